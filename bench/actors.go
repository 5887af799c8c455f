package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Role is what an actor does.
type Role string

const (
	RoleProducer          Role = "producer"
	RoleConsumer          Role = "consumer"
	RoleProducingConsumer Role = "producing-consumer"
)

// actorStats is one actor's measured window: counts, and a latency per batch.
type actorStats struct {
	role         Role
	index        int
	stream       string
	messages     uint64
	batches      uint64
	payloadBytes uint64
	wireBytes    uint64
	start, end   time.Time
	latency      Histogram // per batch: a send, a poll, or a send and its poll-back
	endToEnd     Histogram // consumers: producer timestamp to receipt, per poll
	series       secondSeries
	check        pollCheck
	label        string // name(), once made
	// live is what a progress display reads while the actor runs.
	live liveCounts
}

// liveCounts are an actor's measured totals so far, written by the actor and read
// by the progress ticker: one atomic add each per batch.
type liveCounts struct {
	messages     atomic.Uint64
	payloadBytes atomic.Uint64
}

// measure counts one measured batch that took from start to end.
func (s *actorStats) measure(start, end time.Time, messages, payloadBytes, wireBytes uint64) {
	if s.batches == 0 {
		s.start = start
	}
	s.end = end
	s.batches++
	s.messages += messages
	s.payloadBytes += payloadBytes
	s.wireBytes += wireBytes
	latency := end.Sub(start)
	s.latency.Record(latency)
	s.series.record(end, messages, payloadBytes, latency)
	s.live.messages.Add(messages)
	s.live.payloadBytes.Add(payloadBytes)
}

// name is "producer 3" and the like, for messages. Made once: a consumer hands it
// to every poll's check, and a Sprintf per poll would be an allocation per batch.
func (s *actorStats) name() string {
	if s.label == "" {
		s.label = fmt.Sprintf("%s %d", s.role, s.index)
	}
	return s.label
}

// window tracks the warm-up and the measured window of one actor. Before measureAt
// nothing is recorded; a duration run ends at endAt.
type window struct {
	measureAt time.Time
	endAt     time.Time // zero for a batch-count run
	batches   int
}

// done reports whether an actor that has measured n batches is finished.
func (w *window) done(now time.Time, n uint64) bool {
	if w.endAt.IsZero() {
		return n >= uint64(w.batches)
	}
	return !now.Before(w.endAt)
}

// pacer holds an actor to its share of the rate limit: after moving n payload bytes
// it sleeps until the time those bytes are due at the rate. A timer made once and
// reset keeps the loop allocation-free.
type pacer struct {
	bytesPerSecond uint64
	started        time.Time
	owed           uint64 // payload bytes moved since started
	timer          *time.Timer
}

func newPacer(bytesPerSecond uint64) *pacer {
	if bytesPerSecond == 0 {
		return nil
	}
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &pacer{bytesPerSecond: bytesPerSecond, timer: t}
}

func (p *pacer) wait(ctx context.Context, n uint64) error {
	if p == nil {
		return nil
	}
	if p.started.IsZero() {
		p.started = time.Now()
	}
	p.owed += n
	due := p.started.Add(time.Duration(float64(p.owed) / float64(p.bytesPerSecond) * float64(time.Second)))
	d := time.Until(due)
	if d <= 0 {
		return nil
	}
	p.timer.Reset(d)
	select {
	case <-p.timer.C:
		return nil
	case <-ctx.Done():
		p.timer.Stop()
		return ctx.Err()
	}
}

// producer sends its template batch again and again to one stream.
type producer struct {
	stats        *actorStats
	c            *client.Client
	s            *stream
	partitioning wire.Partitioning
	batch        []byte
	frameBytes   uint64 // request frame: header, routing metadata, batch
	pacer        *pacer
	win          window
	// seeding producers send exactly win.batches unmeasured batches.
	seeding bool
}

func (p *producer) run(ctx context.Context) error {
	defer p.s.producerFinished()
	// Requests go out under a context that cannot be cancelled (runAll says why),
	// made once: context.WithoutCancel allocates.
	requests := context.WithoutCancel(ctx)
	var sent uint64 // seed batches, or measured ones
	for ctx.Err() == nil {
		now := time.Now()
		measuring := !p.seeding && !now.Before(p.win.measureAt)
		if (p.seeding || measuring) && p.win.done(now, sent) {
			return nil
		}
		if err := p.send(requests, now, measuring); err != nil {
			return err
		}
		if p.seeding || measuring {
			sent++
		}
		if err := p.pacer.wait(ctx, p.payloadBytes()); err != nil {
			return err
		}
	}
	return ctx.Err()
}

func (p *producer) messagesPerBatch() uint64 {
	return uint64(binary.LittleEndian.Uint32(p.batch[batchMessageCountAt:]))
}

func (p *producer) payloadBytes() uint64 {
	return uint64(len(p.batch)) - batchHeaderSizeBytes - p.messagesPerBatch()*frameHeaderSizeBytes
}

// send is one turn of the send loop: restamp the batch, send it, count what the
// server confirmed and, when measuring, record it. It allocates nothing
// (TestSendLoopDoesNotAllocate).
func (p *producer) send(ctx context.Context, now time.Time, measuring bool) error {
	streamID, topicID := p.s.identifiers()
	restamp(p.batch, uint64(now.UnixMicro()))
	confirmations, err := p.c.SendBatch(ctx, streamID, topicID, p.partitioning, p.batch)
	if err != nil {
		return fmt.Errorf("%s: sending to %s: %w", p.stats.name(), p.s.name, err)
	}
	end := time.Now()
	if confirmations.Len() != 1 {
		return fmt.Errorf("%s: the server confirmed %d batches for one", p.stats.name(), confirmations.Len())
	}
	index, ok := p.s.partitionIndex(confirmations.At(0).PartitionID)
	if !ok {
		return fmt.Errorf("%s: the server confirmed partition %d, which %s does not have", p.stats.name(), confirmations.At(0).PartitionID, p.s.name)
	}
	n := p.messagesPerBatch()
	p.s.produced[index].Add(n)
	if measuring {
		p.stats.measure(now, end, n, p.payloadBytes(), p.frameBytes)
	}
	return nil
}

// consumer polls one stream: a pinned consumer its one partition by offset, a group
// member whatever the group assigns it, by the group's stored offset.
type consumer struct {
	stats            *actorStats
	c                *client.Client
	s                *stream
	cfg              *Config
	pacer            *pacer
	measureAt        time.Time
	endToEndLatency  bool // producers run alongside: the producer timestamps are fresh
	group            *client.Consumer
	pinned           wire.PollMessages   // the request of a pinned consumer
	trackers         []*partitionTracker // pinned: this consumer's own
	messagesPerBatch uint32
	lastProgress     time.Time
}

// backoffMax bounds the pause after an empty poll: short enough not to add
// measurable latency to a consumer that caught up with its producers, long enough
// not to spin a core on an idle partition.
const backoffMax = 2 * time.Millisecond

func (k *consumer) run(ctx context.Context) error {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	requests := context.WithoutCancel(ctx)
	k.lastProgress = time.Now()
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		if k.finished() {
			return nil
		}
		got, payloadBytes, err := k.poll(requests)
		if err != nil {
			return err
		}
		if got {
			backoff = 0
			if err := k.pacer.wait(ctx, payloadBytes); err != nil {
				return err
			}
			continue
		}
		backoff = min(max(2*backoff, 20*time.Microsecond), backoffMax)
		timer.Reset(backoff)
		select {
		case <-timer.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return ctx.Err()
}

// poll is one turn of the poll loop: poll, verify, track and, when measuring,
// record. It reports whether messages came and their payload bytes; an empty poll
// after the producers finished, with messages still owed for longer than the stall
// timeout, is an error.
func (k *consumer) poll(requests context.Context) (bool, uint64, error) {
	now := time.Now()
	var polled wire.PolledMessages
	var err error
	if k.group != nil {
		polled, err = k.group.Poll(requests)
	} else {
		k.pinned.Strategy.Value = k.trackers[0].next
		polled, err = k.c.PollMessages(requests, &k.pinned)
	}
	if err != nil {
		return false, 0, fmt.Errorf("%s: polling %s: %w", k.stats.name(), k.s.name, err)
	}
	end := time.Now()
	if polled.MessagesCount == 0 {
		if k.s.final() && end.Sub(k.lastProgress) > k.cfg.StallTimeout {
			return false, 0, fmt.Errorf("%s: no new message on %s for %v although %d were produced and this reader has %d: %w",
				k.stats.name(), k.s.name, k.cfg.StallTimeout, k.s.producedTotal(), k.consumedSoFar(), errStalled)
		}
		return false, 0, nil
	}
	k.lastProgress = end
	index, ok := k.s.partitionIndex(polled.PartitionID)
	if !ok {
		return false, 0, fmt.Errorf("%s: a poll of %s answered from partition %d, which it does not have", k.stats.name(), k.s.name, polled.PartitionID)
	}
	first, count, originMicros := k.stats.check.check(k.stats.name(), &polled, !k.cfg.SkipMessageChecks)
	if k.group != nil {
		k.s.groupTrackers[index].observe(first, count)
		k.s.groupConsumed.Add(count)
	} else {
		k.trackers[0].observe(first, count)
	}
	payloadBytes := count * uint64(k.cfg.MessageSizeBytes)
	if !now.Before(k.measureAt) {
		k.stats.measure(now, end, count, payloadBytes, wire.HeaderSize+wire.PolledMessagesPrefixSize+uint64(len(polled.Records)))
		if k.endToEndLatency {
			k.stats.endToEnd.Record(end.Sub(time.UnixMicro(int64(originMicros))))
		}
	}
	return true, payloadBytes, nil
}

// groupProducingConsumer is one actor of e2ecg: on one connection it alternates a
// send to its stream (while it has batches to send) with a poll as a member of the
// stream's consumer group (while the group is owed messages). Its sends and polls
// are reported as a producer's and a consumer's figures.
type groupProducingConsumer struct {
	p *producer // nil for an actor that only consumes
	k *consumer // nil for an actor that only produces
}

func (a *groupProducingConsumer) run(ctx context.Context) error {
	producing := a.p != nil
	defer func() {
		if producing {
			a.p.s.producerFinished()
		}
	}()
	requests := context.WithoutCancel(ctx)
	if a.k != nil {
		a.k.lastProgress = time.Now()
	}
	var sent uint64
	for ctx.Err() == nil {
		if producing {
			now := time.Now()
			measuring := !now.Before(a.p.win.measureAt)
			if measuring && a.p.win.done(now, sent) {
				producing = false
				a.p.s.producerFinished()
			} else {
				if err := a.p.send(requests, now, measuring); err != nil {
					return err
				}
				if measuring {
					sent++
				}
				if err := a.p.pacer.wait(ctx, a.p.payloadBytes()); err != nil {
					return err
				}
			}
		}
		consuming := a.k != nil && !a.k.finished()
		if !producing && !consuming {
			return nil
		}
		if consuming {
			got, payloadBytes, err := a.k.poll(requests)
			if err != nil {
				return err
			}
			if err := a.k.pacer.wait(ctx, payloadBytes); err != nil {
				return err
			}
			if !got && !producing {
				// Only polling now: do not spin on an idle assignment.
				time.Sleep(backoffMax)
			}
		}
	}
	return ctx.Err()
}

func (k *consumer) consumedSoFar() uint64 {
	if k.group != nil {
		return k.s.groupConsumed.Load()
	}
	return k.trackers[0].next
}

// finished reports whether the reader has everything its producers will ever send.
func (k *consumer) finished() bool {
	if !k.s.final() {
		return false
	}
	return k.consumedSoFar() >= k.s.producedTotal()
}

// producingConsumer sends a batch to its own stream and polls it back before
// sending the next, so its latency is a message's whole trip through the server.
type producingConsumer struct {
	producer
	cfg     *Config
	tracker *partitionTracker
}

func (a *producingConsumer) run(ctx context.Context) error {
	defer a.s.producerFinished()
	streamID, topicID := a.s.identifiers()
	header, err := wire.ViewBatchHeader(a.batch)
	if err != nil {
		return err
	}
	n := uint64(header.MessageCount())
	payloadBytes := uint64(len(a.batch)) - batchHeaderSizeBytes - n*frameHeaderSizeBytes
	tracker := a.tracker
	poll := wire.PollMessages{
		Consumer:  client.SingleConsumer(client.ID(uint32(a.stats.index))),
		StreamID:  streamID,
		TopicID:   topicID,
		Partition: wire.SomePartition(a.s.partitionIDs[0]),
		Strategy:  wire.PollingStrategy{Kind: wire.PollingOffset},
		Count:     uint32(n),
	}
	var measured uint64
	requests := context.WithoutCancel(ctx)
	for ctx.Err() == nil {
		now := time.Now()
		measuring := !now.Before(a.win.measureAt)
		if measuring && a.win.done(now, measured) {
			return nil
		}
		restamp(a.batch, uint64(now.UnixMicro()))
		if _, err := a.c.SendBatch(requests, streamID, topicID, a.partitioning, a.batch); err != nil {
			return fmt.Errorf("%s: sending to %s: %w", a.stats.name(), a.s.name, err)
		}
		a.s.produced[0].Add(n)
		var wireBytes uint64
		lastProgress := time.Now()
		for want := tracker.next + n; tracker.next < want; {
			poll.Strategy.Value = tracker.next
			polled, err := a.c.PollMessages(requests, &poll)
			if err != nil {
				return fmt.Errorf("%s: polling %s: %w", a.stats.name(), a.s.name, err)
			}
			if polled.MessagesCount == 0 {
				// The send was acknowledged, so the batch must be readable: an
				// empty poll here is a lost message unless it is merely late.
				if time.Since(lastProgress) > a.cfg.StallTimeout {
					return fmt.Errorf("%s: the batch sent to %s did not come back within %v: %w", a.stats.name(), a.s.name, a.cfg.StallTimeout, errStalled)
				}
				continue
			}
			lastProgress = time.Now()
			first, count, _ := a.stats.check.check(a.stats.name(), &polled, !a.cfg.SkipMessageChecks)
			tracker.observe(first, count)
			wireBytes += wire.HeaderSize + wire.PolledMessagesPrefixSize + uint64(len(polled.Records))
		}
		end := time.Now()
		if measuring {
			measured++
			a.stats.measure(now, end, n, payloadBytes, a.frameBytes+wireBytes)
		}
		if err := a.pacer.wait(ctx, payloadBytes); err != nil {
			return err
		}
	}
	return ctx.Err()
}
