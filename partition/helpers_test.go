package partition

import (
	"encoding/binary"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// simStorages is SimStorages under the tests' names.
type simStorages = SimStorages

func newSimStorages(seed uint64) *simStorages { return NewSimStorages(seed) }

func (s *SimStorages) crash(seed uint64) *SimStorages { return s.Crash(seed) }

var testKey = Key{StreamID: 1, TopicID: 2, PartitionID: 3}

// smallConfig rolls segments every few KiB so tests cross segment boundaries.
func smallConfig() Config {
	return Config{SegmentSizeBytes: 4096, PartitionsCount: 1}
}

func newSimStore(t testing.TB, seed uint64, cfg Config) (*Store, *simStorages) {
	t.Helper()
	st := newSimStorages(seed)
	s := NewStore("local_data", st)
	if err := s.Create(testKey, cfg, 1234); err != nil {
		t.Fatal(err)
	}
	return s, st
}

// makeBatch builds a producer batch of n messages whose payloads carry the sequence
// numbers first, first+1, ... in their first 8 bytes, padded to payloadSize bytes.
func makeBatch(t testing.TB, first uint64, n, payloadSize int) []byte {
	t.Helper()
	var bb wire.BatchBuilder
	bb.Reset(nil)
	payload := make([]byte, max(payloadSize, 8))
	for i := 0; i < n; i++ {
		seq := first + uint64(i)
		binary.LittleEndian.PutUint64(payload, seq)
		if err := bb.Append(wire.Uint128{Lo: seq + 1}, 1_000_000+seq, payload, nil); err != nil {
			t.Fatal(err)
		}
	}
	b, err := bb.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sendRequest(batch []byte) *wire.SendMessages {
	h, _ := wire.ViewBatchHeader(batch)
	return &wire.SendMessages{
		StreamID:      wire.NumericIdentifier(testKey.StreamID),
		TopicID:       wire.NumericIdentifier(testKey.TopicID),
		Partitioning:  wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: testKey.PartitionID},
		MessagesCount: h.MessageCount(),
		Batch:         batch,
	}
}

// sendRecorder records completions by token.
type sendRecorder struct {
	acked  map[uint64]wire.SendConfirmation
	failed map[uint64]error
	order  []uint64
	// check runs at each completion, to assert what the log says then.
	check func(token uint64, c wire.SendConfirmation, err error)
}

func newSendRecorder() *sendRecorder {
	return &sendRecorder{acked: map[uint64]wire.SendConfirmation{}, failed: map[uint64]error{}}
}

func (r *sendRecorder) SendDone(token uint64, c wire.SendConfirmation, err error) {
	if _, dup := r.acked[token]; dup {
		panic("send completed twice")
	}
	if _, dup := r.failed[token]; dup {
		panic("send completed twice")
	}
	if r.check != nil {
		r.check(token, c, err)
	}
	if err != nil {
		r.failed[token] = err
	} else {
		r.acked[token] = c
	}
	r.order = append(r.order, token)
}

func (r *sendRecorder) done() int { return len(r.acked) + len(r.failed) }

// mustSend sends a batch and waits for its acknowledgement; it returns the base offset.
func mustSend(t testing.TB, s *Store, k Key, batch []byte, nowMicros uint64) uint64 {
	t.Helper()
	rec := newSendRecorder()
	if err := s.Send(k, sendRequest(batch), nowMicros, rec, 7); err != nil {
		t.Fatalf("send: %v", err)
	}
	s.WaitIdle()
	if err := rec.failed[7]; err != nil {
		t.Fatalf("send failed: %v", err)
	}
	c, ok := rec.acked[7]
	if !ok {
		t.Fatal("send not acknowledged after WaitIdle")
	}
	return c.BaseOffset
}

// pollRecorder records one poll completion.
type pollRecorder struct {
	calls int
	err   error
}

func (r *pollRecorder) PollDone(_ uint64, _ *PollResult, err error) {
	r.calls++
	r.err = err
}

type polledMessage struct {
	offset, seq uint64
	timestamp   uint64
}

// poll runs one poll to completion and returns the decoded reply and its messages.
func poll(t testing.TB, s *Store, k Key, req PollRequest) (wire.PolledMessages, []polledMessage) {
	t.Helper()
	var res PollResult
	var rec pollRecorder
	if err := s.Poll(k, req, &res, &rec, 1); err != nil {
		t.Fatalf("poll: %v", err)
	}
	s.WaitIdle()
	if rec.calls != 1 {
		t.Fatalf("poll completed %d times", rec.calls)
	}
	if rec.err != nil {
		t.Fatalf("poll failed: %v", rec.err)
	}
	return decodePoll(t, &res)
}

func decodePoll(t testing.TB, res *PollResult) (wire.PolledMessages, []polledMessage) {
	t.Helper()
	body := AppendPollReply(nil, res)
	if len(body) != res.ReplySizeBytes() {
		t.Fatalf("reply is %d bytes, ReplySizeBytes says %d", len(body), res.ReplySizeBytes())
	}
	var vectored []byte
	for _, b := range res.AppendPollBuffers(nil) {
		vectored = append(vectored, b...)
	}
	if string(vectored) != string(body) {
		t.Fatal("vectored buffers differ from AppendPollReply")
	}
	var pm wire.PolledMessages
	if err := pm.Decode(body); err != nil {
		t.Fatalf("decode poll reply: %v", err)
	}
	if err := pm.Verify(); err != nil {
		t.Fatalf("poll reply fails its checksums: %v", err)
	}
	var msgs []polledMessage
	for it := pm.Messages(); it.Next(); {
		m := it.Message()
		msgs = append(msgs, polledMessage{offset: m.Offset, seq: binary.LittleEndian.Uint64(m.Payload()), timestamp: m.Timestamp})
	}
	if uint32(len(msgs)) != pm.MessagesCount || pm.MessagesCount != res.MessageCount() {
		t.Fatalf("%d messages decoded, prefix says %d, result %d", len(msgs), pm.MessagesCount, res.MessageCount())
	}
	if len(msgs) > 0 {
		first, _ := res.FirstOffset()
		last, _ := res.LastOffset()
		if first != msgs[0].offset || last != msgs[len(msgs)-1].offset {
			t.Fatalf("FirstOffset/LastOffset %d/%d, messages %d..%d", first, last, msgs[0].offset, msgs[len(msgs)-1].offset)
		}
	}
	return pm, msgs
}

func offsetsOf(msgs []polledMessage) []uint64 {
	out := make([]uint64, len(msgs))
	for i, m := range msgs {
		out[i] = m.offset
	}
	return out
}

func span(from, to uint64) []uint64 {
	var out []uint64
	for o := from; o < to; o++ {
		out = append(out, o)
	}
	return out
}

// headerWindow is a replicated group's header window at the defaults
// (Store.journalSlots): the ops a replica serves repair of; a peer behind by more
// takes a state transfer.
var headerWindow = (&Store{}).journalSlots()
