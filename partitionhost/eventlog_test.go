package partitionhost

import (
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/shard"
)

func TestEventLog(t *testing.T) {
	l := newEventLog()
	a, b := shard.ConnID(1), shard.ConnID(2)
	const s = int64(time.Second)
	for i, step := range []struct {
		conn        shard.ConnID
		atNs        int64
		log         bool
		omittedWant int
	}{
		{a, 1 * s, true, 0},       // the first occurrence
		{a, 1*s + s/2, false, 0},  // a has had its line
		{b, 1*s + s/2, false, 0},  // b's first, but within the interval
		{b, 2*s + s/2, true, 2},   // b's line, counting the two left out
		{a, 3 * s, false, 0},      // a has had its line in this episode
		{b, 10 * s, false, 0},     // and b too
		{a, 71 * s, true, 2},      // a quiet minute: a new episode
		{b, 71*s + s/2, false, 0}, // the interval again
	} {
		log, omitted := l.note(step.conn, step.atNs)
		if log != step.log || omitted != step.omittedWant {
			t.Fatalf("step %d: note(%v, %d) = %v, %d; want %v, %d", i, step.conn, step.atNs, log, omitted, step.log, step.omittedWant)
		}
	}
	// Past eventLogConnsMax connections it starts over rather than grow.
	for c := range eventLogConnsMax + 10 {
		l.note(shard.ConnID(1000+c), 200*s+int64(c)*s)
	}
	if len(l.logged) > eventLogConnsMax {
		t.Fatalf("%d connections remembered, want at most %d", len(l.logged), eventLogConnsMax)
	}
}
