package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/jsonview"
	"github.com/iggy-shard/iggy-shard/wire"
)

const (
	// followCountDefault is how many messages a poll of --follow asks for when -m
	// is not given.
	followCountDefault = 100
	// commitTimeout bounds the offset store after the last printed message, which
	// runs even when Ctrl-C ended the polling.
	commitTimeout = 5 * time.Second
	// messageTimeLayout shows a message's timestamp, in local time.
	messageTimeLayout = "2006-01-02 15:04:05.000000"
)

type pollFlags struct {
	count       uint32
	autoCommit  bool
	offset      uint64
	first, last bool
	next        bool
	consumer    string
	showHeaders bool
	outputFile  string
	follow      bool
	interval    time.Duration
	output      string
}

// Output formats of poll's own --output.
const outputRaw = "raw"

func (a *app) pollCommand() *cobra.Command {
	cmd := leaf("poll [flags] <--offset <OFFSET>|--first|--last|--next> <STREAM_ID> <TOPIC_ID> <PARTITION_ID>", "p",
		"Poll messages from given topic ID and given stream ID", exactArgs(3), nil)
	cmd.Long = "Poll messages from a partition of a topic, starting at an offset, the first, the last, or the next\n" +
		"message of the consumer (-c), and print them: as a table, as JSON (--output json), or their payloads' raw\n" +
		"bytes one after another (--output raw).\n\n" +
		"--follow keeps polling for new messages until Ctrl-C (JSON: one message per line). With --auto-commit,\n" +
		"the consumer's offset is stored after the messages are printed, and only for the messages printed."
	cmd.Example = "  iggy message poll --offset 0 1 2 1\n  iggy message poll --first -m 10 stream topic 0\n" +
		"  iggy message poll --next -c 1 --auto-commit --follow stream topic 0\n" +
		"  iggy message poll --first --output json stream topic 0 | jq ."
	var pf pollFlags
	f := cmd.Flags()
	f.Uint32VarP(&pf.count, "message-count", "m", 1, "How many messages a poll asks for (with --follow, 100 when not given)")
	f.BoolVarP(&pf.autoCommit, "auto-commit", "a", false, "Store the consumer's offset once the messages are printed")
	f.Uint64VarP(&pf.offset, "offset", "o", 0, "Start at this offset")
	f.BoolVarP(&pf.first, "first", "f", false, "Start at the first message")
	f.BoolVarP(&pf.last, "last", "l", false, "Start at the last message (the last -m messages)")
	f.BoolVarP(&pf.next, "next", "n", false, "Start after the consumer's stored offset")
	f.StringVarP(&pf.consumer, "consumer", "c", "0", "Consumer ID, a number (whose offset --next and --auto-commit use)")
	f.BoolVarP(&pf.showHeaders, "show-headers", "s", false, "Print the messages' headers, one per line under each message")
	f.StringVar(&pf.outputFile, "output-file", "", "Append the messages to this binary message file instead of printing them")
	f.BoolVar(&pf.follow, "follow", false, "Keep polling for new messages until Ctrl-C")
	f.DurationVar(&pf.interval, "interval", 500*time.Millisecond, "With --follow, how long to wait when there is nothing new")
	f.StringVar(&pf.output, "output", outputText, "Output format: text, json or raw (payload bytes only)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error { return a.poll(cmd, args, &pf) }
	return cmd
}

// pollPlan is a checked poll command.
type pollPlan struct {
	stream, topic wire.Identifier
	partition     uint32
	consumer      wire.Consumer
	strategy      wire.PollingStrategy
	count         uint32
	output        string
}

func (a *app) pollPlan(cmd *cobra.Command, args []string, pf *pollFlags) (pollPlan, target, error) {
	var p pollPlan
	stream, topic, t, err := streamAndTopic(args)
	if err != nil {
		return p, t, err
	}
	p.stream, p.topic = stream, topic
	if p.partition, err = parseUint32("partition ID", args[2]); err != nil {
		return p, t, err
	}
	t.partition = args[2]
	consumerID, err := parseIdentifier("consumer", pf.consumer)
	if err != nil {
		return p, t, err
	}
	p.consumer = client.SingleConsumer(consumerID)
	t.consumer = pf.consumer
	var strategies []wire.PollingStrategy
	if cmd.Flags().Changed("offset") {
		strategies = append(strategies, wire.PollingStrategy{Kind: wire.PollingOffset, Value: pf.offset})
	}
	for _, s := range []struct {
		on   bool
		kind wire.PollingKind
	}{{pf.first, wire.PollingFirst}, {pf.last, wire.PollingLast}, {pf.next, wire.PollingNext}} {
		if s.on {
			strategies = append(strategies, wire.PollingStrategy{Kind: s.kind})
		}
	}
	if len(strategies) != 1 {
		return p, t, usageErrorf("give exactly one of --offset OFFSET, --first, --last and --next")
	}
	p.strategy = strategies[0]
	p.count = pf.count
	if pf.follow && !cmd.Flags().Changed("message-count") {
		p.count = followCountDefault
	}
	if p.count == 0 {
		return p, t, usageErrorf("invalid --message-count 0: at least 1")
	}
	p.output = pf.output
	if !cmd.Flags().Changed("output") {
		p.output = a.flags.output
	}
	switch p.output {
	case outputText, outputJSON, outputRaw:
		a.flags.output = p.output
	default:
		return p, t, usageErrorf("invalid --output %q: text, json or raw", p.output)
	}
	if pf.follow && pf.interval <= 0 {
		return p, t, usageErrorf("invalid --interval %s: it must be positive", pf.interval)
	}
	return p, t, nil
}

func (a *app) poll(cmd *cobra.Command, args []string, pf *pollFlags) error {
	plan, t, err := a.pollPlan(cmd, args, pf)
	if err != nil {
		return err
	}
	var file *os.File
	if pf.outputFile != "" {
		if file, err = os.OpenFile(pf.outputFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644); err != nil {
			return usageErrorf("cannot write --output-file: %v", err)
		}
		defer file.Close()
	}
	cipher, err := a.payloadCipher()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	a.target = t
	c, err := a.connect(ctx, true)
	if err != nil {
		return err
	}
	a.executing("poll messages from topic ID: %s and stream with ID: %s", args[1], args[0])
	pr := &pollPrinter{a: a, plan: plan, showHeaders: pf.showHeaders, file: file, follow: pf.follow, cipher: cipher}
	if file != nil {
		a.say("Storing messages to %s binary file", pf.outputFile)
	}
	req := wire.PollMessages{Consumer: plan.consumer, StreamID: plan.stream, TopicID: plan.topic,
		Partition: wire.SomePartition(plan.partition), Strategy: plan.strategy, Count: plan.count}
	for {
		start := time.Now()
		polled, err := c.PollMessages(ctx, &req)
		if err != nil {
			if ctx.Err() != nil && pf.follow {
				return nil // Ctrl-C: a clean stop.
			}
			return a.refused(err)
		}
		took := time.Since(start)
		printed, last, err := pr.batch(ctx, &polled, took, args)
		if printed > 0 && pf.autoCommit {
			if err := a.commit(c, &plan, last); err != nil {
				return err
			}
		}
		if err != nil || !pf.follow || ctx.Err() != nil {
			if err == nil && file != nil && !pf.follow {
				a.say("Stored %s of total size %s to %s binary file", messagesText(printed), displaySize(pr.bytes), pf.outputFile)
			}
			return err
		}
		if next, ok := nextOffset(&polled); ok {
			req.Strategy = wire.PollingStrategy{Kind: wire.PollingOffset, Value: next}
			continue
		}
		if !sleepCtx(ctx, pf.interval) {
			return nil
		}
	}
}

// nextOffset is the offset after the last message of a poll; false for none.
func nextOffset(polled *wire.PolledMessages) (uint64, bool) {
	var next uint64
	found := false
	for it := polled.Messages(); it.Next(); {
		next, found = it.Message().Offset+1, true
	}
	return next, found
}

// commit stores the offset of the last printed message, on a context of its own:
// Ctrl-C may have ended the command's.
func (a *app) commit(c *client.Client, plan *pollPlan, offset uint64) error {
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	err := c.StoreConsumerOffset(ctx, &wire.StoreConsumerOffset{Consumer: plan.consumer, StreamID: plan.stream,
		TopicID: plan.topic, Partition: wire.SomePartition(plan.partition), Offset: offset, Ack: wire.AckQuorum})
	if err != nil {
		return fmt.Errorf("storing the consumer offset %d: %s", offset, describe(err, a.target))
	}
	a.debugf("stored offset %d for consumer %s", offset, a.target.consumer)
	return nil
}

func messagesText(n int) string {
	if n == 1 {
		return "1 message"
	}
	return strconv.Itoa(n) + " messages"
}

// pollPrinter prints polled messages in the chosen format; with --follow, batch
// after batch under one header.
type pollPrinter struct {
	a           *app
	plan        pollPlan
	showHeaders bool
	file        *os.File
	follow      bool
	// headerDone: the text column header was printed; widths are fixed then.
	headerDone         bool
	offsetWidth, idLen int
	// bytes counts what was stored to the file.
	bytes uint64
	// cipher decrypts payloads (--encryption-key); nil leaves them as they are.
	cipher *payloadCipher
}

// batch prints the messages of one poll and reports how many it printed and the
// offset of the last; a write that fails stops it there.
func (pr *pollPrinter) batch(ctx context.Context, polled *wire.PolledMessages, took time.Duration, args []string) (int, uint64, error) {
	a := pr.a
	var msgs []wire.PolledMessage
	var payloads [][]byte
	var size uint64
	for it := polled.Messages(); it.Next(); {
		m := it.Message()
		payload := m.Payload()
		if pr.cipher != nil {
			var err error
			if payload, err = pr.cipher.decrypt(payload); err != nil {
				return 0, 0, fmt.Errorf("message at offset %d: %w", m.Offset, err)
			}
		}
		msgs = append(msgs, m)
		payloads = append(payloads, payload)
		size += fileRecordHeaderSize + uint64(len(m.Payload())+len(m.UserHeaders()))
	}
	if !pr.follow && pr.file == nil {
		switch pr.plan.output {
		case outputText:
			a.say("Polled messages from topic with ID: %s and stream with ID: %s (from partition with ID: %d)", args[1], args[0], polled.PartitionID)
			a.say("Polled %s of total size %s, it took %s", messagesText(len(msgs)), displaySize(size), formatHumanDuration(took))
		case outputJSON:
			return pr.wholeJSON(polled, msgs, payloads)
		}
	}
	if a.flags.quiet && pr.file == nil {
		// Nothing is printed, so nothing counts as printed.
		return 0, 0, nil
	}
	printed := 0
	var last uint64
	for i := range msgs {
		if ctx.Err() != nil {
			break
		}
		if err := pr.one(&msgs[i], payloads[i], polled.CurrentOffset); err != nil {
			return printed, last, err
		}
		printed++
		last = msgs[i].Offset
	}
	return printed, last, nil
}

// wholeJSON prints one poll as GET .../messages answers it.
func (pr *pollPrinter) wholeJSON(polled *wire.PolledMessages, msgs []wire.PolledMessage, payloads [][]byte) (int, uint64, error) {
	if pr.a.flags.quiet {
		return 0, 0, nil
	}
	v := jsonview.Polled{PartitionID: polled.PartitionID, CurrentOffset: polled.CurrentOffset, Count: len(msgs), Messages: []jsonview.PolledMessage{}}
	for i := range msgs {
		v.Messages = append(v.Messages, jsonview.PolledMessageOf(&msgs[i], payloads[i]))
	}
	if err := pr.a.emitJSON(v); err != nil {
		return 0, 0, err
	}
	if len(msgs) == 0 {
		return 0, 0, nil
	}
	return len(msgs), msgs[len(msgs)-1].Offset, nil
}

// one prints (or stores) one message.
func (pr *pollPrinter) one(m *wire.PolledMessage, payload []byte, currentOffset uint64) error {
	out := pr.a.io.out
	if pr.file != nil {
		r := fileRecord{checksum: m.Checksum(), id: m.ID(), offset: m.Offset, timestamp: m.Timestamp,
			originTimestamp: m.OriginTimestamp, payload: payload, userHeaders: m.UserHeaders()}
		pr.bytes += uint64(r.size())
		_, err := pr.file.Write(appendFileRecord(nil, &r))
		return err
	}
	switch pr.plan.output {
	case outputRaw:
		_, err := out.Write(payload)
		return err
	case outputJSON:
		b, err := json.Marshal(jsonview.PolledMessageOf(m, payload))
		if err != nil {
			return err
		}
		_, err = out.Write(append(b, '\n'))
		return err
	}
	id := jsonview.U128(m.ID()).String()
	if !pr.headerDone {
		pr.headerDone = true
		pr.offsetWidth = max(len("Offset"), len(strconv.FormatUint(currentOffset, 10)))
		pr.idLen = max(len("ID"), len(id))
		if _, err := fmt.Fprintf(out, "%-*s  %-26s  %-*s  %-6s  %s\n", pr.offsetWidth, "Offset", "Timestamp", pr.idLen, "ID", "Length", "Payload"); err != nil {
			return err
		}
	}
	ts := time.UnixMicro(int64(m.Timestamp)).Local().Format(messageTimeLayout)
	if _, err := fmt.Fprintf(out, "%-*d  %-26s  %-*s  %-6d  %s\n", pr.offsetWidth, m.Offset, ts, pr.idLen, id, len(payload), payloadText(payload)); err != nil {
		return err
	}
	if pr.showHeaders {
		it := wire.NewTLVIterator(m.UserHeaders())
		for e, ok := it.Next(); ok; e, ok = it.Next() {
			if _, err := fmt.Fprintf(out, "%*s  header %s (%s) = %s\n", pr.offsetWidth, "", jsonview.ValueText(e.KeyKind, e.Key),
				e.ValueKind, jsonview.ValueText(e.ValueKind, e.Value)); err != nil {
				return err
			}
		}
	}
	return nil
}

// payloadText shows a payload as text: as it is when it is printable UTF-8,
// quoted with escapes otherwise (invalid bytes as U+FFFD), so one message is one
// line.
func payloadText(p []byte) string {
	s := strings.ToValidUTF8(string(p), "\uFFFD")
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) < 0 {
		return s
	}
	return strconv.Quote(s)
}
