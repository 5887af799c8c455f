package clustertest

import (
	"context"
	"strings"
	"testing"
	"time"
)

// The checker of the failover tests accepts exactly the logs a correct cluster may
// hold: every acknowledged batch once, in order, whole; unacknowledged batches at
// most once.
func TestPartitionReadCheck(t *testing.T) {
	read := func(batches ...int) *partitionRead {
		r := &partitionRead{}
		for _, b := range batches {
			for m := range batchMessages {
				r.offsets = append(r.offsets, uint64(len(r.payloads)))
				r.payloads = append(r.payloads, messagePayload(0, b, m))
			}
		}
		return r
	}
	sent := map[int]bool{0: true, 1: true, 2: true, 3: true}
	acked := []int{0, 1, 3}
	if n, err := read(0, 1, 2, 3).check(0, acked, sent); err != nil || n != 4 {
		t.Fatalf("a log with an unacknowledged batch kept: %d, %v", n, err)
	}
	if _, err := read(0, 1, 3).check(0, acked, sent); err != nil {
		t.Fatalf("a log without the unacknowledged batch: %v", err)
	}
	for _, tc := range []struct {
		name string
		r    *partitionRead
		want string
	}{
		{"missing", read(0, 3), "missing"},
		{"duplicated", read(0, 1, 1, 3), "duplicated or out of order"},
		{"reordered", read(1, 0, 3), "duplicated or out of order"},
		{"never sent", read(0, 1, 3, 7), "never sent"},
		{"gap", func() *partitionRead { r := read(0, 1, 3); r.offsets[5]++; return r }(), "at offset"},
		{"split", func() *partitionRead {
			r := read(0, 1, 3)
			r.payloads, r.offsets = r.payloads[:25], r.offsets[:25]
			return r
		}(), "split"},
		{"other partition", func() *partitionRead { r := read(0, 1, 3); r.payloads[3] = messagePayload(1, 0, 3); return r }(), "not a message of partition"},
	} {
		if _, err := tc.r.check(0, acked, sent); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	if _, err := read(0, 3).check(0, acked, sent); !isMissing(err) {
		t.Errorf("a lagging copy is not told from a wrong one: %v", err)
	}
}

// The failover measure ends at the first acknowledgement of a batch sent after the
// victim exited: an acknowledgement read after the kill of a batch sent before it
// (the dying primary's last reply) does not count, and while none counts there is
// no measure (BenchmarkFailover once took a zero time for one: a negative failover).
func TestFirstAckOfSentAfter(t *testing.T) {
	l := newPartitionLog(0)
	base := time.Now()
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	exited := at(100)
	ack := func(batch, sentMs, ackedMs int) {
		l.sent[batch], l.sentAt[batch] = true, at(sentMs)
		l.acked, l.ackedAt = append(l.acked, batch), append(l.ackedAt, at(ackedMs))
	}
	ack(0, 0, 5)
	ack(1, 90, 150)
	if got, ok := l.firstAckOfSentAfter(exited); ok {
		t.Fatalf("a batch sent before the exit counted: acknowledged at %v", got.Sub(base))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	if _, err := l.awaitAckOfSentAfter(ctx, exited); err == nil {
		t.Fatal("awaitAckOfSentAfter returned without an acknowledgement that counts")
	}
	ack(2, 2000, 2050)
	ack(3, 2060, 2100)
	got, err := l.awaitAckOfSentAfter(context.Background(), exited)
	if err != nil || !got.Equal(at(2050)) {
		t.Fatalf("awaitAckOfSentAfter = %v, %v; want the acknowledgement of batch 2 at 2.05s", got.Sub(base), err)
	}
}
