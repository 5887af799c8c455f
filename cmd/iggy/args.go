package main

import (
	"strconv"

	"github.com/spf13/cobra"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// identifierLengthMax is the longest name an identifier may carry.
const identifierLengthMax = 255

// parseIdentifier reads a STREAM_ID, TOPIC_ID, GROUP_ID, USER_ID or CONSUMER_ID
// argument as the reference does: a number that fits in u32 is a numeric id,
// anything else a name of 1 to 255 bytes.
func parseIdentifier(what, s string) (wire.Identifier, error) {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return client.ID(uint32(n)), nil
	}
	if s == "" || len(s) > identifierLengthMax {
		return wire.Identifier{}, usageErrorf("invalid %s %q: a numeric id or a name of 1 to %d bytes", what, s, identifierLengthMax)
	}
	return client.NameID(s), nil
}

// parseUint32 reads a PARTITION_ID, CLIENT_ID or count argument.
func parseUint32(what, s string) (uint32, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, usageErrorf("invalid %s %q: expected a whole number from 0 to %d", what, s, uint32(1<<32-1))
	}
	return uint32(n), nil
}

// parseCount reads a count argument bounded to 1..max.
func parseCount(what, s string, max uint32) (uint32, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n < 1 || n > uint64(max) {
		return 0, usageErrorf("invalid %s %q: expected a whole number from 1 to %d", what, s, max)
	}
	return uint32(n), nil
}

// exactArgs, rangeArgs and minArgs are cobra's argument checks, with their
// complaints made usage errors (exit 2) naming the arguments expected.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageErrorf("%s takes %d argument(s), got %d\nUsage: %s", cmd.CommandPath(), n, len(args), cmd.UseLine())
		}
		return nil
	}
}

func rangeArgs(lo, hi int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < lo || len(args) > hi {
			return usageErrorf("%s takes %d to %d arguments, got %d\nUsage: %s", cmd.CommandPath(), lo, hi, len(args), cmd.UseLine())
		}
		return nil
	}
}

func minArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return usageErrorf("%s takes at least %d argument(s), got %d\nUsage: %s", cmd.CommandPath(), n, len(args), cmd.UseLine())
		}
		return nil
	}
}

// target names what a command works on, so that a server's refusal can be told in
// its terms: "stream 'orders' not found (1009)".
type target struct {
	stream, topic, group, partition string
	user, token, consumer, client   string
	// name is the name a create or rename gives.
	name string
}

// idText prints an identifier as the user gave it.
func idText(id wire.Identifier) string {
	if id.Kind == wire.IdentifierNumeric {
		return strconv.FormatUint(uint64(id.Numeric), 10)
	}
	return string(id.String)
}

// plural returns "s" unless n is 1, for the reference's "{n} partition[s]".
func plural[T ~int | ~uint32](n T) string {
	if n == 1 {
		return ""
	}
	return "s"
}
