package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/jsonview"
	"github.com/iggy-shard/iggy-shard/wire"
)

// A long send goes in batches, each bounded in messages and bytes, so that a file
// of any size streams through with bounded memory and every frame stays far below
// the server's 64 MiB.
const (
	sendBatchMessagesMax = 1000
	sendBatchBytesMax    = 1 << 20
	// progressInterval is how often the progress line is redrawn.
	progressInterval = 100 * time.Millisecond
)

type sendFlags struct {
	partition      uint32
	partitionGiven bool
	key            string
	headers        []string
	inputFile      string
}

func (a *app) messageCommand() *cobra.Command {
	send := leaf("send [flags] <STREAM_ID> <TOPIC_ID> [MESSAGES]...", "s", "Send messages to given topic ID and given stream ID", minArgs(2), nil)
	send.Long = "Send messages to given topic ID and given stream ID: one message per MESSAGES argument; without\n" +
		"any, one message per line of standard input; or the binary message file of --input-file (the format\n" +
		"'message poll --output-file' writes). Messages go to the partition of -p, to the partition the key of\n" +
		"-m hashes to, or round-robin. On a terminal, a long send from a file shows its progress."
	send.Example = "  iggy message send 1 2 message\n  iggy message send stream 2 \"long message\"\n" +
		"  iggy message send 1 topic message1 message2 message3\n  iggy message send -p 0 -H source:string:cli,retries:uint8:3 stream topic hello\n" +
		"  seq 1 100000 | iggy message send stream topic"
	var sf sendFlags
	send.Flags().Uint32VarP(&sf.partition, "partition-id", "p", 0, "Send to this partition")
	send.Flags().StringVarP(&sf.key, "message-key", "m", "", "Send to the partition this key (1 to 255 bytes) hashes to")
	send.Flags().StringArrayVarP(&sf.headers, "headers", "H", nil, "Headers of every message: key:kind:value,... (kinds: raw, string, bool,\nint8..int128, uint8..uint128, float32, float64)")
	send.Flags().StringVar(&sf.inputFile, "input-file", "", "Send the messages of this binary message file")
	send.RunE = func(cmd *cobra.Command, args []string) error {
		sf.partitionGiven = cmd.Flags().Changed("partition-id")
		return a.send(cmd, args, &sf, cmd.Flags().Changed("message-key"))
	}

	return groupCommand("message", "m", "message operations", send, a.pollCommand())
}

// messageSource yields the messages of a send, one at a time.
type messageSource interface {
	// next returns the next message, io.EOF after the last.
	next() (client.Message, error)
}

type argsSource struct{ args []string }

func (s *argsSource) next() (client.Message, error) {
	if len(s.args) == 0 {
		return client.Message{}, io.EOF
	}
	m := client.Message{Payload: []byte(s.args[0])}
	s.args = s.args[1:]
	return m, nil
}

// linesSource reads one message per line; line terminators are dropped.
type linesSource struct {
	r    *bufio.Reader
	line int
}

func (s *linesSource) next() (client.Message, error) {
	line, err := s.r.ReadBytes('\n')
	if len(line) == 0 && err != nil {
		return client.Message{}, err
	}
	s.line++
	line = trimLineEnd(line)
	if len(line) == 0 {
		return client.Message{}, usageErrorf("line %d of the input is empty: a message needs at least one byte", s.line)
	}
	return client.Message{Payload: line}, nil
}

func trimLineEnd(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
		if n := len(b); n > 0 && b[n-1] == '\r' {
			b = b[:n-1]
		}
	}
	return b
}

type fileSource struct{ fr *fileRecordReader }

func (s *fileSource) next() (client.Message, error) {
	r, err := s.fr.next()
	if errors.Is(err, errRecordEnd) {
		return client.Message{}, io.EOF
	}
	if err != nil {
		return client.Message{}, fmt.Errorf("failed to parse message from bytes: %w", err)
	}
	return client.Message{ID: r.id, Payload: r.payload, UserHeaders: r.userHeaders, TimestampMicros: r.originTimestamp}, nil
}

// countingReader counts the bytes read through it, for the progress line.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (a *app) send(cmd *cobra.Command, args []string, sf *sendFlags, keyGiven bool) error {
	stream, topic, t, err := streamAndTopic(args)
	if err != nil {
		return err
	}
	partitioning := wire.Partitioning{Kind: wire.PartitioningBalanced}
	switch {
	case sf.partitionGiven && keyGiven:
		return usageErrorf("give --partition-id or --message-key, not both")
	case sf.partitionGiven:
		partitioning = wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: sf.partition}
		t.partition = fmt.Sprint(sf.partition)
	case keyGiven:
		if len(sf.key) == 0 || len(sf.key) > 255 {
			return usageErrorf("invalid --message-key: it must be 1 to 255 bytes, not %d", len(sf.key))
		}
		partitioning = wire.Partitioning{Kind: wire.PartitioningMessagesKey, Key: []byte(sf.key)}
	}
	headers, err := parseHeaders(sf.headers)
	if err != nil {
		return err
	}
	messages := args[2:]
	for i, m := range messages {
		if m == "" {
			return usageErrorf("message %d is empty: a message needs at least one byte", i+1)
		}
	}
	// The source, and the size of a file behind it for the progress line.
	var source messageSource
	var counter *countingReader
	var totalBytes int64
	switch {
	case sf.inputFile != "" && len(messages) > 0:
		return usageErrorf("give MESSAGES or --input-file, not both")
	case sf.inputFile != "":
		if len(headers) > 0 {
			return usageErrorf("--headers do not apply to --input-file: its messages carry their own")
		}
		f, err := os.Open(sf.inputFile)
		if err != nil {
			return usageErrorf("cannot read --input-file: %v", err)
		}
		defer f.Close()
		if info, err := f.Stat(); err == nil {
			totalBytes = info.Size()
		}
		counter = &countingReader{r: f}
		source = &fileSource{fr: &fileRecordReader{r: bufio.NewReaderSize(counter, 1<<20)}}
	case len(messages) > 0:
		source = &argsSource{args: messages}
	default:
		if f, ok := a.io.in.(*os.File); ok {
			if info, err := f.Stat(); err == nil && info.Mode().IsRegular() {
				totalBytes = info.Size()
			}
		}
		counter = &countingReader{r: a.in}
		source = &linesSource{r: bufio.NewReaderSize(counter, 1<<20)}
	}
	cipher, err := a.payloadCipher()
	if err != nil {
		return err
	}
	explain := "send messages to topic with ID: " + args[1] + " and stream with ID: " + args[0]
	return a.call(cmd, t, explain, func(ctx context.Context, c *client.Client) error {
		var p *progress
		if counter != nil && totalBytes > 0 && a.io.errTerminal && !a.flags.quiet {
			p = &progress{w: a.io.err, total: totalBytes, read: &counter.n}
		}
		sent, confirmations, err := a.sendAll(ctx, c, stream, topic, partitioning, headers, source, cipher, p)
		p.finish()
		if err != nil {
			if sent > 0 {
				return fmt.Errorf("%s\n(%d messages were sent before)", describe(err, a.target), sent)
			}
			return err
		}
		if sent == 0 {
			return usageErrorf("no messages to send: give MESSAGES, pipe lines in, or --input-file")
		}
		if sf.inputFile != "" {
			a.say("Created %d messages using %d bytes from %s", sent, counter.n, sf.inputFile)
		}
		return a.result(jsonview.SendConfirmations{Confirmations: confirmations}, func() {
			a.say("Sent %d message%s to topic with ID: %s and stream with ID: %s", sent, plural(sent), args[1], args[0])
		})
	})
}

// sendAll sends the source's messages in batches and returns how many went.
func (a *app) sendAll(ctx context.Context, c *client.Client, stream, topic wire.Identifier, partitioning wire.Partitioning,
	headers []byte, source messageSource, cipher *payloadCipher, p *progress) (int, []jsonview.SendConfirmation, error) {
	sent := 0
	confirmations := []jsonview.SendConfirmation{}
	batch := make([]client.Message, 0, sendBatchMessagesMax)
	batchBytes := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		conf, err := c.SendMessages(ctx, stream, topic, partitioning, batch)
		if err != nil {
			return err
		}
		confirmations = jsonview.AppendSendConfirmations(confirmations, conf)
		sent += len(batch)
		a.debugf("sent a batch of %d messages (%d bytes)", len(batch), batchBytes)
		batch, batchBytes = batch[:0], 0
		p.update(sent)
		return nil
	}
	for {
		m, err := source.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return sent, confirmations, err
		}
		if m.UserHeaders == nil {
			m.UserHeaders = headers
		}
		if cipher != nil {
			if m.Payload, err = cipher.encrypt(m.Payload); err != nil {
				return sent, confirmations, err
			}
		}
		batch = append(batch, m)
		batchBytes += len(m.Payload) + len(m.UserHeaders)
		if len(batch) == sendBatchMessagesMax || batchBytes >= sendBatchBytesMax {
			if err := flush(); err != nil {
				return sent, confirmations, err
			}
		}
		if ctx.Err() != nil {
			return sent, confirmations, ctx.Err()
		}
	}
	return sent, confirmations, flush()
}

// progress draws a send's progress on a terminal: one line, redrawn in place.
type progress struct {
	w     io.Writer
	total int64
	read  *int64
	drawn time.Time
	shown bool
}

func (p *progress) update(sent int) {
	if p == nil || time.Since(p.drawn) < progressInterval {
		return
	}
	p.drawn = time.Now()
	p.shown = true
	done := min(*p.read, p.total)
	fmt.Fprintf(p.w, "\rSending: %d messages, %s of %s (%d%%)\033[K", sent, displaySize(uint64(done)),
		displaySize(uint64(p.total)), done*100/p.total)
}

// finish clears the progress line.
func (p *progress) finish() {
	if p != nil && p.shown {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
