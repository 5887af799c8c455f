package bench

import (
	"fmt"
	"sync"

	"github.com/iggy-shard/iggy-shard/wire"
)

// partitionTracker follows one reader's progress through one partition: a pinned
// consumer's own, or a consumer group's, shared by its members. Polls of a group can
// reach it out of order (two members' replies race after a rebalance), so a poll
// that starts ahead of the expected offset waits in pending until the gap closes; at
// the end a tracker with anything pending, or whose next offset is not the number
// of messages the server confirmed, lost or duplicated messages.
type partitionTracker struct {
	mu         sync.Mutex
	next       uint64            // the offset the reader should see next
	pending    map[uint64]uint64 // first offset → count, of polls ahead of next
	duplicates uint64            // messages seen twice
}

func (t *partitionTracker) observe(first, count uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case first == t.next:
		t.next += count
		for {
			n, ok := t.pending[t.next]
			if !ok {
				break
			}
			delete(t.pending, t.next)
			t.next += n
		}
	case first > t.next:
		if t.pending == nil {
			t.pending = make(map[uint64]uint64)
		}
		if _, ok := t.pending[first]; ok {
			t.duplicates += count
			return
		}
		t.pending[first] = count
	default:
		overlap := min(count, t.next-first)
		t.duplicates += overlap
		t.next = max(t.next, first+count)
	}
}

// Verification is what the consumers checked.
type Verification struct {
	Enabled bool `json:"enabled"`
	// MessagesProduced is what the server confirmed to producers (warm-up and seed
	// included); MessagesExpected what the readers should have seen of them (a
	// message counts once per pinned consumer and once per group that reads it).
	MessagesProduced uint64 `json:"messages_produced"`
	MessagesExpected uint64 `json:"messages_expected"`
	MessagesConsumed uint64 `json:"messages_consumed"`
	Lost             uint64 `json:"lost"`
	Duplicated       uint64 `json:"duplicated"`
	ChecksumFailures uint64 `json:"checksum_failures"`
	Misplaced        uint64 `json:"misplaced"` // wrong id, payload size or offset order inside a poll
	// Problems describes the first few failures in words.
	Problems []string `json:"problems,omitempty"`
}

// OK reports whether every check passed.
func (v *Verification) OK() bool {
	return v.Lost == 0 && v.Duplicated == 0 && v.ChecksumFailures == 0 && v.Misplaced == 0 && len(v.Problems) == 0
}

const problemsMax = 10

func (v *Verification) problem(format string, args ...any) {
	if len(v.Problems) < problemsMax {
		v.Problems = append(v.Problems, fmt.Sprintf(format, args...))
	}
}

// pollCheck is one actor's running verification of the messages it polled; it is
// merged into the report's Verification at the end.
type pollCheck struct {
	Verification
	messagesPerBatch uint64
	messageSizeBytes int
}

// check verifies one poll's messages and returns the first offset, the count and
// the producer timestamp of the first message. Checks cost one pass over the frame
// headers and, for the checksums, one XXH3 pass over the records.
func (pc *pollCheck) check(actor string, polled *wire.PolledMessages, verify bool) (first, count, originMicros uint64) {
	if verify {
		if err := polled.Verify(); err != nil {
			pc.ChecksumFailures++
			pc.problem("%s: partition %d: checksum: %v", actor, polled.PartitionID, err)
		}
	}
	for it := polled.Messages(); it.Next(); {
		m := it.Message()
		if count == 0 {
			first, originMicros = m.Offset, m.OriginTimestamp
		}
		if verify {
			id := m.ID()
			switch {
			case m.Offset != first+count:
				pc.Misplaced++
				pc.problem("%s: partition %d: offset %d follows %d in one poll", actor, polled.PartitionID, m.Offset, first+count-1)
			case id.Hi^idMagic > 1<<20 || id.Lo != m.Offset%pc.messagesPerBatch:
				pc.Misplaced++
				pc.problem("%s: partition %d: offset %d holds message id %#x:%#x, not message %d of a bench batch", actor, polled.PartitionID, m.Offset, id.Hi, id.Lo, m.Offset%pc.messagesPerBatch)
			case len(m.Payload()) != pc.messageSizeBytes:
				pc.Misplaced++
				pc.problem("%s: partition %d: offset %d has %d payload bytes, want %d", actor, polled.PartitionID, m.Offset, len(m.Payload()), pc.messageSizeBytes)
			}
		}
		count++
	}
	pc.MessagesConsumed += count
	return first, count, originMicros
}

func (v *Verification) merge(o *Verification) {
	v.MessagesConsumed += o.MessagesConsumed
	v.Lost += o.Lost
	v.Duplicated += o.Duplicated
	v.ChecksumFailures += o.ChecksumFailures
	v.Misplaced += o.Misplaced
	for _, p := range o.Problems {
		if len(v.Problems) < problemsMax {
			v.Problems = append(v.Problems, p)
		}
	}
}
