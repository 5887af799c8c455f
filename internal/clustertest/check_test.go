package clustertest

import (
	"strings"
	"testing"
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
