package clustertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// The workload: writers number their batches per partition and never resend one,
// so that a batch whose outcome a failure left unknown appears at most once in the
// log, and the log can be checked exactly: offsets from 0 without a gap, batches
// whole, in rising order, each at most once, every acknowledged one there.

const (
	loadStream    = "load"
	loadTopic     = "t"
	batchMessages = 10
	payloadBytes  = 100
)

// messagePayload is message m of batch b on partition p, payloadBytes long.
func messagePayload(p, b, m int) []byte {
	out := fmt.Appendf(make([]byte, 0, payloadBytes), "p%d-b%07d-m%02d-", p, b, m)
	for len(out) < payloadBytes {
		out = append(out, 'x')
	}
	return out
}

// parsePayload reads back messagePayload's numbers.
func parsePayload(payload []byte) (p, b, m int, err error) {
	_, err = fmt.Sscanf(string(payload), "p%d-b%07d-m%02d-", &p, &b, &m)
	return p, b, m, err
}

// partitionLog is what a writer did to one partition.
type partitionLog struct {
	partition int

	mu sync.Mutex
	// sent is every batch number written, acknowledged or not; sentAt when each
	// was handed to the client.
	sent   map[int]bool
	sentAt map[int]time.Time
	// acked lists the acknowledged batches in order, ackedAt when each was.
	acked   []int
	ackedAt []time.Time
	// progress wakes a waiter after an acknowledgement; it holds at most one
	// wake-up, so a writer never blocks on it.
	progress chan struct{}
}

func newPartitionLog(partition int) *partitionLog {
	return &partitionLog{partition: partition, sent: map[int]bool{}, sentAt: map[int]time.Time{}, progress: make(chan struct{}, 1)}
}

func (l *partitionLog) markSent(batch int) {
	l.mu.Lock()
	l.sent[batch] = true
	l.sentAt[batch] = time.Now()
	l.mu.Unlock()
}

func (l *partitionLog) markAcked(batch int) {
	l.mu.Lock()
	l.acked = append(l.acked, batch)
	l.ackedAt = append(l.ackedAt, time.Now())
	l.mu.Unlock()
	select {
	case l.progress <- struct{}{}:
	default:
	}
}

func (l *partitionLog) ackedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// firstAckOfSentAfter is when the first acknowledged batch that was sent after t
// was acknowledged, and false while there is none. After a kill, t the victim's
// exit: a batch sent before may be answered by the dead process (its reply read
// after the signal), or by the new primary; one sent after only by a survivor.
func (l *partitionLog) firstAckOfSentAfter(t time.Time) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, b := range l.acked {
		if l.sentAt[b].After(t) {
			return l.ackedAt[i], true
		}
	}
	return time.Time{}, false
}

// awaitAckOfSentAfter waits (bounded by ctx) for firstAckOfSentAfter(t) and
// returns it.
func (l *partitionLog) awaitAckOfSentAfter(ctx context.Context, t time.Time) (time.Time, error) {
	for {
		if at, ok := l.firstAckOfSentAfter(t); ok {
			return at, nil
		}
		select {
		case <-l.progress:
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("partition %d: no batch sent after %v acknowledged (%d acknowledged in all): %w",
				l.partition, t.Format(time.StampMilli), l.ackedCount(), ctx.Err())
		}
	}
}

// snapshot copies the acknowledged batches and the sent set.
func (l *partitionLog) snapshot() (acked []int, sent map[int]bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sent = make(map[int]bool, len(l.sent))
	for b := range l.sent {
		sent[b] = true
	}
	return append([]int(nil), l.acked...), sent
}

// awaitAcked waits (bounded by ctx) until at least n batches are acknowledged.
func (l *partitionLog) awaitAcked(ctx context.Context, n int) error {
	for {
		if got := l.ackedCount(); got >= n {
			return nil
		}
		select {
		case <-l.progress:
		case <-ctx.Done():
			return fmt.Errorf("partition %d: %d batches acknowledged, waited for %d: %w", l.partition, l.ackedCount(), n, ctx.Err())
		}
	}
}

func fillBatch(msgs []client.Message, partition, batch int) {
	for i := range msgs {
		msgs[i] = client.Message{Payload: messagePayload(partition, batch, i)}
	}
}

// writers run until stop is closed or ctx ends; wait for them with wg.
type writers struct {
	wg   sync.WaitGroup
	stop chan struct{}
}

func newWriters() *writers { return &writers{stop: make(chan struct{})} }

func (w *writers) halt() {
	close(w.stop)
	w.wg.Wait()
}

// dialAny logs in at the nodes in turn, from *next on, and returns the first
// client; the login follows the leader.
func dialAny(ctx context.Context, nodes []*node, next *int) (*client.Client, error) {
	n := nodes[*next%len(nodes)]
	*next++
	attempt, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return n.dial(attempt)
}

// syncWriter sends batches to log's partition through a Client, one at a time.
func (w *writers) syncWriter(ctx context.Context, nodes []*node, log *partitionLog) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		var cl *client.Client
		defer func() {
			if cl != nil {
				cl.Close()
			}
		}()
		next := 0
		msgs := make([]client.Message, batchMessages)
		target := wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: uint32(log.partition)}
		for batch := 0; batch < 1_000_000; {
			select {
			case <-w.stop:
				return
			case <-ctx.Done():
				return
			default:
			}
			if cl == nil {
				var err error
				if cl, err = dialAny(ctx, nodes, &next); err != nil {
					cl = nil
					waitCtx(ctx, 50*time.Millisecond)
					continue
				}
			}
			fillBatch(msgs, log.partition, batch)
			log.markSent(batch)
			_, err := cl.SendMessages(ctx, client.NameID(loadStream), client.NameID(loadTopic), target, msgs)
			if err == nil {
				log.markAcked(batch)
			} else {
				cl.Close()
				cl = nil
			}
			batch++
		}
	}()
}

// pipelinedWriter sends batches to log's partition through a PipelinedProducer,
// up to four in flight.
func (w *writers) pipelinedWriter(ctx context.Context, nodes []*node, log *partitionLog) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		type inFlight struct {
			batch   int
			pending client.Pending
		}
		var p *client.PipelinedProducer
		var flight []inFlight
		// settle takes the outcomes of the batches in flight, oldest first, until
		// fewer than keep remain; it reports whether one failed.
		settle := func(keep int) bool {
			failed := false
			for len(flight) > 0 && len(flight) >= keep {
				f := flight[0]
				flight = flight[1:]
				if _, err := f.pending.Wait(ctx); err == nil {
					log.markAcked(f.batch)
				} else {
					failed = true
				}
			}
			return failed
		}
		reset := func() {
			settle(0)
			if p != nil {
				p.Close()
				p = nil
			}
		}
		defer reset()
		next := 0
		msgs := make([]client.Message, batchMessages)
		target := wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: uint32(log.partition)}
		for batch := 0; batch < 1_000_000; {
			select {
			case <-w.stop:
				return
			case <-ctx.Done():
				return
			default:
			}
			if p == nil {
				n := nodes[next%len(nodes)]
				next++
				attempt, cancel := context.WithTimeout(ctx, 5*time.Second)
				var err error
				p, err = client.DialPipelinedProducer(attempt, n.addr(), client.NameID(loadStream), client.NameID(loadTopic), target,
					client.PipelineOptions{InFlightMax: 4, AckTimeout: 10 * time.Second},
					client.WithCredentials(rootUsername, rootPassword), client.WithRequestTimeout(10*time.Second))
				cancel()
				if err != nil {
					p = nil
					waitCtx(ctx, 50*time.Millisecond)
					continue
				}
			}
			fillBatch(msgs, log.partition, batch)
			log.markSent(batch)
			pending, err := p.Send(ctx, msgs)
			batch++
			if err != nil {
				reset()
				continue
			}
			flight = append(flight, inFlight{batch: batch - 1, pending: pending})
			if settle(4) {
				reset()
			}
		}
	}()
}

// partitionRead is one node's copy of a partition, read from offset 0.
type partitionRead struct {
	// records are the batch records the polls returned, byte for byte.
	records  []byte
	payloads [][]byte
	offsets  []uint64
}

// readPartition polls a node (no redirection: that node's own copy) from offset 0
// to its end.
func readPartition(ctx context.Context, n *node, partition int) (*partitionRead, error) {
	cl, err := n.adminClient(ctx)
	if err != nil {
		return nil, err
	}
	r := &partitionRead{}
	var next uint64
	for range 100_000 {
		polled, err := cl.PollMessages(ctx, &wire.PollMessages{Consumer: client.SingleConsumer(client.ID(1)),
			StreamID: client.NameID(loadStream), TopicID: client.NameID(loadTopic), Partition: wire.SomePartition(uint32(partition)),
			Strategy: wire.PollingStrategy{Kind: wire.PollingOffset, Value: next}, Count: 1000})
		if err != nil {
			if isConnectionLoss(err) {
				n.dropAdmin()
			}
			return nil, fmt.Errorf("node %d partition %d poll at %d: %w", n.id, partition, next, err)
		}
		if polled.MessagesCount == 0 {
			return r, nil
		}
		r.records = append(r.records, polled.Records...)
		advanced := false
		for it := polled.Messages(); it.Next(); {
			m := it.Message()
			if m.Offset < next {
				continue
			}
			r.offsets = append(r.offsets, m.Offset)
			r.payloads = append(r.payloads, bytes.Clone(m.Payload()))
			next = m.Offset + 1
			advanced = true
		}
		if !advanced {
			return nil, fmt.Errorf("node %d partition %d: a poll at %d returned nothing new", n.id, partition, next)
		}
	}
	return nil, fmt.Errorf("node %d partition %d: more than 100000 polls", n.id, partition)
}

// check verifies a read against what the writer did: offsets 0.. without a gap,
// whole batches in rising order, each at most once and each one that was sent, and
// every batch of acked there. It returns how many batches the read holds.
func (r *partitionRead) check(partition int, acked []int, sent map[int]bool) (int, error) {
	present := map[int]bool{}
	lastBatch := -1
	for i, payload := range r.payloads {
		if r.offsets[i] != uint64(i) {
			return 0, fmt.Errorf("message %d is at offset %d", i, r.offsets[i])
		}
		p, b, m, err := parsePayload(payload)
		if err != nil || p != partition {
			return 0, fmt.Errorf("offset %d holds %q, not a message of partition %d", i, payload, partition)
		}
		if m == 0 {
			if b <= lastBatch {
				return 0, fmt.Errorf("offset %d: batch %d after batch %d (duplicated or out of order)", i, b, lastBatch)
			}
			if !sent[b] {
				return 0, fmt.Errorf("offset %d: batch %d was never sent", i, b)
			}
			if lastBatch >= 0 && i%batchMessages != 0 {
				return 0, fmt.Errorf("offset %d: batch %d starts inside a batch", i, b)
			}
			lastBatch = b
			present[b] = true
		} else if b != lastBatch || i%batchMessages != m {
			return 0, fmt.Errorf("offset %d: message %d of batch %d, in batch %d", i, m, b, lastBatch)
		}
	}
	if len(r.payloads)%batchMessages != 0 {
		return 0, fmt.Errorf("%d messages: a batch was split", len(r.payloads))
	}
	for _, b := range acked {
		if !present[b] {
			return 0, &missingBatchError{batch: b, present: len(present)}
		}
	}
	return len(present), nil
}

// catchUpMax bounds a node's catch-up in the tests.
const catchUpMax = 30 * time.Second

// awaitCaughtUp waits (bounded by ctx and catchUpMax) until n's copy of the partition holds every
// batch acked (a follower applies a commit after the primary), failing at once on
// a copy that breaks the log's rules. It returns the last read.
func awaitCaughtUp(ctx context.Context, n *node, log *partitionLog, acked []int) (*partitionRead, error) {
	ctx, cancel := context.WithTimeout(ctx, catchUpMax)
	defer cancel()
	var lastErr error
	for {
		read, err := readPartition(ctx, n, log.partition)
		if err == nil {
			// Taken after the read: a batch is marked sent before it is written,
			// so every batch the read holds is in it.
			_, sent := log.snapshot()
			_, err = read.check(log.partition, acked, sent)
			if err == nil {
				return read, nil
			}
			if !isMissing(err) {
				return nil, fmt.Errorf("node %d partition %d: %w", n.id, log.partition, err)
			}
		}
		lastErr = err
		if aliveErr := n.checkAlive(); aliveErr != nil {
			return nil, aliveErr
		}
		if !waitCtx(ctx, 100*time.Millisecond) {
			return nil, fmt.Errorf("node %d partition %d not caught up: %w", n.id, log.partition, lastErr)
		}
	}
}

// missingBatchError is a copy that lacks an acknowledged batch: one that lags, or
// one that lost it; any other failure of check is a copy that is wrong.
type missingBatchError struct{ batch, present int }

func (e *missingBatchError) Error() string {
	return fmt.Sprintf("acknowledged batch %d is missing (%d batches present)", e.batch, e.present)
}

func isMissing(err error) bool {
	var missing *missingBatchError
	return errors.As(err, &missing)
}
