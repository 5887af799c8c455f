package main

import (
	"context"
	"encoding/binary"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/jsonview"
	"github.com/iggy-shard/iggy-shard/wire"
)

// topicSettings are the three typed topic settings of create and update, as
// given: compression, expiry (the summed MESSAGE_EXPIRY arguments) and max size.
type topicSettings struct {
	compression string
	// expiryMicros: expiryServerDefault, expiryNever or a lifetime.
	expiryMicros uint64
	// maxSizeBytes: topicSizeDefault, topicSizeUnlimited or a cap.
	maxSizeBytes uint64
}

func parseTopicSettings(compression string, expiry []string, maxSize string) (topicSettings, error) {
	var s topicSettings
	switch c := strings.ToLower(compression); c {
	case "none", "gzip":
		s.compression = c
	default:
		return s, usageErrorf("invalid compression algorithm %q: none or gzip", compression)
	}
	d, never, err := parseExpiryParts(expiry)
	if err != nil {
		return s, usageErrorf("invalid message expiry: %v", err)
	}
	switch {
	case never:
		s.expiryMicros = expiryNever
	case uint64(d/time.Second) > math.MaxUint32:
		return s, usageErrorf("invalid message expiry %q: at most %d seconds", strings.Join(expiry, " "), uint32(math.MaxUint32))
	default:
		s.expiryMicros = uint64(d / time.Microsecond)
	}
	switch maxSize {
	case "unlimited", "Unlimited":
		s.maxSizeBytes = topicSizeUnlimited
	case "0", "server_default", "default":
		s.maxSizeBytes = topicSizeDefault
	default:
		if s.maxSizeBytes, err = parseSize(maxSize); err != nil {
			return s, usageErrorf("invalid --max-topic-size: %v (or unlimited, server_default)", err)
		}
	}
	return s, nil
}

func (s topicSettings) expiryText() string  { return displayExpiry(s.expiryMicros) }
func (s topicSettings) maxSizeText() string { return displayTopicSize(s.maxSizeBytes) }

// block encodes the settings as an options block: on create only the values that
// differ from the server's defaults (as the reference sends them), on update all
// three (zero means unchanged there).
func (s topicSettings) block(all bool) ([]byte, error) {
	var b []byte
	var err error
	if all || s.compression != "none" {
		if b, err = wire.AppendOption(b, "compression_algorithm", wire.HeaderString, []byte(s.compression)); err != nil {
			return nil, err
		}
	}
	for _, o := range [...]struct {
		key   string
		value uint64
	}{{"message_expiry", s.expiryMicros}, {"max_topic_size", s.maxSizeBytes}} {
		if all || o.value != 0 {
			if b, err = wire.AppendOption(b, o.key, wire.HeaderUint64, binary.LittleEndian.AppendUint64(nil, o.value)); err != nil {
				return nil, err
			}
		}
	}
	return b, nil
}

// keyValue is a --set KEY=VALUE option.
type keyValue struct{ key, value string }

func parseKeyValue(s string) (keyValue, error) {
	key, value, ok := strings.Cut(s, "=")
	switch {
	case !ok:
		return keyValue{}, usageErrorf("expected KEY=VALUE, got: %s", s)
	case key == "":
		return keyValue{}, usageErrorf("expected non-empty key in KEY=VALUE, got: %s", s)
	case value == "":
		return keyValue{}, usageErrorf("expected non-empty value in KEY=VALUE, got: %s", s)
	case len(key) > 255:
		return keyValue{}, usageErrorf("option key is %d bytes, maximum 255", len(key))
	case len(value) > 255:
		return keyValue{}, usageErrorf("option value is %d bytes, maximum 255", len(value))
	}
	return keyValue{key, value}, nil
}

func (a *app) topicCommand() *cobra.Command {
	create := leaf("create [flags] <STREAM_ID> <NAME> <PARTITIONS_COUNT> <COMPRESSION_ALGORITHM> [MESSAGE_EXPIRY]...", "c",
		"Create topic with given name, number of partitions, compression algorithm and expiry time", minArgs(4), nil)
	create.Long = create.Short + ".\n\n" +
		"COMPRESSION_ALGORITHM is none or gzip. MESSAGE_EXPIRY is how long messages are kept: durations that are\n" +
		"summed (15days, 1day 1hour 1min 1sec), unlimited (never expire) or server_default (the default when omitted)."
	create.Example = "  iggy topic create 1 sensor1 2 gzip 15days\n  iggy topic create prod sensor2 2 none\n" +
		"  iggy topic create test debugs 2 gzip 1day 1hour 1min 1sec\n  iggy topic create prod events 3 none unlimited --set segment_size=128MiB"
	createMax := create.Flags().StringP("max-topic-size", "m", "server_default", "Max topic size: a size (15GB, 1 GiB, 1048576), unlimited or server_default")
	sets := create.Flags().StringArray("set", nil, "Other topic option as KEY=VALUE, repeatable (see 'iggy options topic')")
	create.Flags().Uint32P("topic-id", "t", 0, "Accepted for compatibility and ignored: the server assigns topic ids")
	create.Flags().MarkHidden("topic-id")
	create.RunE = func(cmd *cobra.Command, args []string) error { return a.topicCreate(cmd, args, *createMax, *sets) }

	update := leaf("update [flags] <STREAM_ID> <TOPIC_ID> <NAME> <COMPRESSION_ALGORITHM> [MESSAGE_EXPIRY]...", "u",
		"Update topic name, compression algorithm and message expiry time for given topic ID in given stream ID", minArgs(4), nil)
	update.Long = update.Short + ".\n\nMESSAGE_EXPIRY and --max-topic-size left at server_default keep the topic's current values."
	update.Example = "  iggy topic update 1 1 sensor3 none\n  iggy topic update prod sensor3 old-sensor none\n" +
		"  iggy topic update test debugs ready gzip 15days\n  iggy topic update 1 2 new-name none 1day 1hour 1min 1sec"
	updateMax := update.Flags().StringP("max-topic-size", "m", "server_default", "Max topic size: a size (15GB, 1 GiB, 1048576), unlimited or server_default (unchanged)")
	update.RunE = func(cmd *cobra.Command, args []string) error { return a.topicUpdate(cmd, args, *updateMax) }

	list := leaf("list [flags] <STREAM_ID>", "l", "List all topics in given stream ID", exactArgs(1), nil)
	var mode listMode
	addListMode(list, &mode)
	list.RunE = func(cmd *cobra.Command, args []string) error { return a.topicList(cmd, args, mode) }
	list.Example = "  iggy topic list 1\n  iggy topic list prod"

	return groupCommand("topic", "t", "topic operations",
		create,
		example(leaf("delete <STREAM_ID> <TOPIC_ID>", "d", "Delete topic with given ID in given stream ID", exactArgs(2), a.topicDelete),
			"  iggy topic delete 1 1\n  iggy topic delete prod 2\n  iggy topic delete test debugs"),
		update,
		example(leaf("get <STREAM_ID> <TOPIC_ID>", "g", "Get topic detail for given topic ID and stream ID", exactArgs(2), a.topicGet),
			"  iggy topic get 1 1\n  iggy topic get prod 2\n  iggy topic get test debugs"),
		list,
		example(leaf("purge <STREAM_ID> <TOPIC_ID>", "p", "Purge topic with given ID in given stream ID", exactArgs(2), a.topicPurge),
			"  iggy topic purge 1 1\n  iggy topic purge prod 2\n  iggy topic purge test debugs"),
	)
}

// streamAndTopic parses the leading STREAM_ID TOPIC_ID arguments.
func streamAndTopic(args []string) (stream, topic wire.Identifier, t target, err error) {
	if stream, err = parseIdentifier("stream ID", args[0]); err != nil {
		return
	}
	if topic, err = parseIdentifier("topic ID", args[1]); err != nil {
		return
	}
	return stream, topic, target{stream: args[0], topic: args[1]}, nil
}

func (a *app) topicCreate(cmd *cobra.Command, args []string, maxSize string, sets []string) error {
	stream, err := parseIdentifier("stream ID", args[0])
	if err != nil {
		return err
	}
	name := args[1]
	partitions, err := parseUint32("partitions count", args[2])
	if err != nil {
		return err
	}
	if partitions > wire.TopicPartitionsCountMax {
		return usageErrorf("invalid partitions count %d: a topic has at most %d", partitions, wire.TopicPartitionsCountMax)
	}
	settings, err := parseTopicSettings(args[3], args[4:], maxSize)
	if err != nil {
		return err
	}
	options, err := settings.block(false)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	it := wire.NewTLVIterator(options)
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		seen[string(e.Key)] = true
	}
	for _, s := range sets {
		kv, err := parseKeyValue(s)
		if err != nil {
			return err
		}
		if seen[kv.key] {
			return usageErrorf("topic option %s is given twice (as an argument or --max-topic-size, and with --set)", kv.key)
		}
		seen[kv.key] = true
		if options, err = wire.AppendOption(options, kv.key, wire.HeaderString, []byte(kv.value)); err != nil {
			return usageErrorf("invalid --set %s: %v", s, err)
		}
	}
	explain := "create topic with name: " + name + ", message expiry: " + settings.expiryText() +
		", compression algorithm: " + settings.compression + ", max topic size: " + settings.maxSizeText() +
		" in stream with ID: " + args[0]
	return a.call(cmd, target{stream: args[0], name: name}, explain, func(ctx context.Context, c *client.Client) error {
		t, err := c.CreateTopic(ctx, stream, name, partitions, options)
		if err != nil {
			return err
		}
		return a.result(jsonview.TopicDetailsOf(t), func() {
			a.say("Topic with name: %s, partitions count: %d, compression algorithm: %s, message expiry: %s, max topic size: %s created in stream with ID: %s (topic ID: %d)",
				name, partitions, settings.compression, settings.expiryText(), settings.maxSizeText(), args[0], t.ID)
		})
	})
}

func (a *app) topicUpdate(cmd *cobra.Command, args []string, maxSize string) error {
	stream, topic, t, err := streamAndTopic(args)
	if err != nil {
		return err
	}
	name := args[2]
	t.name = name
	settings, err := parseTopicSettings(args[3], args[4:], maxSize)
	if err != nil {
		return err
	}
	options, err := settings.block(true)
	if err != nil {
		return err
	}
	explain := "update topic with ID: " + args[1] + ", name: " + name + ", message expiry: " + settings.expiryText() +
		", compression algorithm: " + settings.compression + ", max topic size: " + settings.maxSizeText() +
		", in stream with ID: " + args[0]
	return a.call(cmd, t, explain, func(ctx context.Context, c *client.Client) error {
		if err := c.UpdateTopic(ctx, stream, topic, name, options); err != nil {
			return err
		}
		a.say("Topic with ID: %s updated name: %s, updated message expiry: %s, updated compression algorithm: %s, updated max topic size: %s in stream with ID: %s",
			args[1], name, settings.expiryText(), settings.compression, settings.maxSizeText(), args[0])
		return nil
	})
}

func (a *app) topicDelete(cmd *cobra.Command, args []string) error {
	stream, topic, t, err := streamAndTopic(args)
	if err != nil {
		return err
	}
	return a.call(cmd, t, "delete topic with ID: "+args[1]+" in stream with ID: "+args[0], func(ctx context.Context, c *client.Client) error {
		if err := c.DeleteTopic(ctx, stream, topic); err != nil {
			return err
		}
		a.say("Topic with ID: %s in stream with ID: %s deleted", args[1], args[0])
		return nil
	})
}

func (a *app) topicPurge(cmd *cobra.Command, args []string) error {
	stream, topic, t, err := streamAndTopic(args)
	if err != nil {
		return err
	}
	return a.call(cmd, t, "purge topic with ID: "+args[1]+" in stream with ID: "+args[0], func(ctx context.Context, c *client.Client) error {
		if err := c.PurgeTopic(ctx, stream, topic); err != nil {
			return err
		}
		a.say("Topic with ID: %s in stream with ID: %s purged", args[1], args[0])
		return nil
	})
}

func (a *app) topicGet(cmd *cobra.Command, args []string) error {
	stream, topic, t, err := streamAndTopic(args)
	if err != nil {
		return err
	}
	return a.call(cmd, t, "get topic with ID: "+args[1]+" from stream with ID: "+args[0], func(ctx context.Context, c *client.Client) error {
		d, err := c.GetTopic(ctx, stream, topic)
		if err != nil {
			return err
		}
		return a.result(jsonview.TopicDetailsOf(d), func() {
			a.properties([]property{
				{"Topic id", strconv.FormatUint(uint64(d.ID), 10)},
				{"Created", utcTime(d.CreatedAtMicros)},
				{"Topic name", string(d.Name)},
				{"Topic size", displaySize(d.SizeBytes)},
				{"Compression", jsonview.CompressionName(d.CompressionAlgorithm)},
				{"Message expiry", displayExpiry(d.MessageExpiryMicros)},
				{"Max topic size", displayTopicSize(d.MaxTopicSizeBytes)},
				{"Topic message count", strconv.FormatUint(d.MessagesCount, 10)},
				{"Partitions count", strconv.FormatUint(uint64(d.PartitionsCount), 10)},
			})
		})
	})
}

func (a *app) topicList(cmd *cobra.Command, args []string, mode listMode) error {
	stream, err := parseIdentifier("stream ID", args[0])
	if err != nil {
		return err
	}
	explain := "list topics from stream with ID: " + args[0] + " in " + string(mode) + " mode"
	return a.call(cmd, target{stream: args[0]}, explain, func(ctx context.Context, c *client.Client) error {
		topics, err := c.GetTopics(ctx, stream)
		if err != nil {
			return err
		}
		views := make([]jsonview.Topic, len(topics))
		rows := make([][]string, len(topics))
		for i := range topics {
			t := &topics[i]
			views[i] = jsonview.TopicOf(t)
			rows[i] = []string{strconv.FormatUint(uint64(t.ID), 10), string(t.Name),
				strconv.FormatUint(uint64(t.PartitionsCount), 10), strconv.FormatUint(t.MessagesCount, 10),
				displaySize(t.SizeBytes), displayTopicSize(t.MaxTopicSizeBytes), displayExpiry(t.MessageExpiryMicros),
				jsonview.CompressionName(t.CompressionAlgorithm)}
		}
		return a.result(views, func() {
			// Created is left out to fit 80 columns: topic get and --output json have it.
			a.table(mode, []string{"ID", "Name", "Partitions", "Messages", "Size", "Max Size", "Expiry", "Compression"}, rows)
		})
	})
}
