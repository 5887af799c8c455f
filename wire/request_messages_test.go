package wire

import (
	"bytes"
	"errors"
	"testing"
)

func TestPollMessagesFields(t *testing.T) {
	golden := readGolden(t, "requests/poll_messages.hex")
	autoCommitAt := len(golden) - 1
	strategyAt := autoCommitAt - 4 - PollingStrategySizeBytes

	// auto_commit is true for any non-zero byte.
	b := bytes.Clone(golden)
	b[autoCommitAt] = 7
	var r PollMessages
	if err := r.Decode(b); err != nil || !r.AutoCommit {
		t.Fatalf("auto_commit 7: %+v, %v", r, err)
	}
	b[autoCommitAt] = 0
	if err := r.Decode(b); err != nil || r.AutoCommit {
		t.Fatalf("auto_commit 0: %+v, %v", r, err)
	}
	if r.Consumer.Kind != ConsumerSingle || r.StreamID.Numeric != 1 || string(r.TopicID.String) != "events" ||
		r.Partition != SomePartition(0) || r.Strategy != (PollingStrategy{Kind: PollingOffset, Value: 100}) || r.Count != 10 {
		t.Fatalf("fields: %+v", r)
	}
	// The topic name aliases the body: no copy was made.
	if &r.TopicID.String[0] != &b[len(b)-PollingStrategySizeBytes-OptionalPartitionSizeBytes-4-1-6] {
		t.Fatal("topic name does not alias the body")
	}

	tests := []struct {
		name string
		body []byte
	}{
		{"strategy kind 6", func() []byte { c := bytes.Clone(golden); c[strategyAt] = 6; return c }()},
		{"strategy kind 0", func() []byte { c := bytes.Clone(golden); c[strategyAt] = 0; return c }()},
		{"missing auto_commit", golden[:autoCommitAt]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r PollMessages
			if err := r.Decode(tt.body); !errors.Is(err, ErrInvalidCommand) {
				t.Fatalf("err = %v", err)
			}
		})
	}
	// A later protocol build appends a u64 wait timeout; 0.11.0 ignores it, as the
	// reference's decode_from ignores every trailing byte.
	var withTimeout PollMessages
	if err := withTimeout.Decode(append(bytes.Clone(golden), make([]byte, 8)...)); err != nil || withTimeout.Count != r.Count {
		t.Fatalf("wait timeout suffix: %+v, %v", withTimeout, err)
	}
}

func TestPollMessagesDecodeAllocs(t *testing.T) {
	body := readGolden(t, "requests/poll_messages.hex")
	var r PollMessages
	if n := testing.AllocsPerRun(100, func() { _ = r.Decode(body) }); n != 0 {
		t.Fatalf("Decode allocates %v times", n)
	}
	req := r
	buf := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() { _, _ = req.Append(buf[:0]) }); n != 0 {
		t.Fatalf("Append into a sized buffer allocates %v times", n)
	}
}

func TestFlushUnsavedBufferDecodes(t *testing.T) {
	var r FlushUnsavedBuffer
	b := readGolden(t, "requests/flush_unsaved_buffer.hex")
	b[len(b)-1] = 9
	if err := r.Decode(b); err != nil || !r.Fsync {
		t.Fatalf("fsync 9: %+v, %v", r, err)
	}
}
