package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// errStalled marks a consumer that stopped receiving messages it was owed.
var errStalled = errors.New("stalled: messages owed were not delivered")

// ConnectError is a failure to reach or log in to the server, before any stream was
// touched.
type ConnectError struct {
	Address string
	Err     error
}

func (e *ConnectError) Error() string {
	return fmt.Sprintf("cannot connect to the server at %s: %v", e.Address, e.Err)
}
func (e *ConnectError) Unwrap() error { return e.Err }

// Watcher is told what a run is doing, for a progress display. Its methods are
// called from one goroutine at a time, and never after Run returns.
type Watcher interface {
	// Step announces a step of the run: creating the streams, seeding, running.
	Step(line string)
	// Progress is called about every ProgressInterval while the actors run, and
	// once more when they have finished.
	Progress(p Progress)
}

// ProgressInterval is how often a Watcher hears of the actors' progress.
const ProgressInterval = 250 * time.Millisecond

// Progress is a running benchmark's measured totals so far, for the role that
// paces the run: the producers (or producing consumers), or the consumers of a kind
// that only consumes.
type Progress struct {
	Role         Role
	Messages     uint64
	PayloadBytes uint64
	// MessagesTotal is what the role will have measured at the end of a run of
	// --batches; 0 for a run of --duration.
	MessagesTotal uint64
	// Elapsed is the time since the measured window opened: negative during the
	// warm-up.
	Elapsed time.Duration
	// Duration is a run of --duration's measured window; 0 for a run of --batches.
	Duration time.Duration
}

// Run runs one benchmark against the server at cfg.ServerAddress: it creates the
// streams the kind needs (deleting earlier bench streams of the same names), seeds
// them for the consume-only kinds, runs every actor on its own connection and
// goroutine, verifies what the consumers polled, deletes the streams unless
// cfg.KeepStreams, and reports. watch hears of each step and of the progress (nil
// for nothing).
//
// A run whose actors all finished returns its Report even when verification found
// lost or duplicated messages (Report.Verification says so); err is then nil unless
// the cleanup failed. An actor's failure stops the run and returns the error.
func Run(ctx context.Context, cfg Config, watch Watcher) (*Report, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logf := func(format string, args ...any) {
		if watch != nil {
			watch.Step(fmt.Sprintf(format, args...))
		}
	}
	admin, err := dial(ctx, &cfg)
	if err != nil {
		return nil, &ConnectError{Address: cfg.ServerAddress, Err: err}
	}
	defer admin.Close()

	logf("creating %d stream(s) %s1.. with %d partition(s) each", cfg.Streams, StreamNamePrefix, cfg.Partitions)
	streams, err := setupStreams(ctx, admin, &cfg)
	report, runErr := func() (*Report, error) {
		if err != nil {
			return nil, err
		}
		if cfg.Kind.seeded() {
			logf("seeding the streams (not measured)")
			if err := seed(ctx, &cfg, streams); err != nil {
				return nil, fmt.Errorf("seeding: %w", err)
			}
		}
		logf("running %s", cfg.Kind)
		return runActors(ctx, &cfg, streams, watch, nil)
	}()
	if !cfg.KeepStreams {
		// The run's context may be the one that was cancelled: clean up under a
		// fresh deadline.
		cleanupCtx, cancel := context.WithTimeout(context.Background(), cfg.RequestTimeout)
		defer cancel()
		if err := deleteStreams(cleanupCtx, admin, streams); err != nil && runErr == nil {
			runErr = fmt.Errorf("cleanup: %w", err)
		}
	}
	return report, runErr
}

func dial(ctx context.Context, cfg *Config) (*client.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	opts := []client.Option{client.WithCredentials(cfg.Username, cfg.Password), client.WithRequestTimeout(cfg.RequestTimeout)}
	if cfg.TLS != nil {
		opts = append(opts, client.WithTLS(cfg.TLS))
	}
	return client.Dial(ctx, cfg.ServerAddress, opts...)
}

// seed fills each stream with what its readers will consume: the measured batches
// of each pinned consumer (they all read the whole stream), or of every member of
// the stream's group (they share it), from one unmeasured producer per stream.
func seed(ctx context.Context, cfg *Config, streams []*stream) error {
	var producers []*producer
	var clients []*client.Client
	for i, s := range streams {
		batches := cfg.Batches
		if cfg.Kind.groups() {
			members := 0
			for j := range cfg.Consumers {
				if j%len(streams) == i {
					members++
				}
			}
			batches *= members
		}
		p, err := newProducer(ctx, cfg, i, s, nil, nil)
		if err != nil {
			return err
		}
		defer p.c.Close()
		clients = append(clients, p.c)
		p.seeding = true
		p.win.batches = batches
		s.producersLeft.Add(1)
		producers = append(producers, p)
	}
	return runAll(ctx, len(producers), closeAll(clients), func(ctx context.Context, i int) error { return producers[i].run(ctx) })
}

// newProducer makes producer index of stream s on connection c, or on a connection
// of its own when c is nil.
func newProducer(ctx context.Context, cfg *Config, index int, s *stream, stats *actorStats, c *client.Client) (*producer, error) {
	batch, err := templateBatch(index, cfg.MessagesPerBatch, cfg.MessageSizeBytes)
	if err != nil {
		return nil, err
	}
	partitioning := wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: s.partitionIDs[0]}
	if len(s.partitionIDs) > 1 {
		// Balanced, resolved by the server as upstream iggy-bench asks it to.
		partitioning = wire.Partitioning{Kind: wire.PartitioningBalanced}
	}
	streamID, topicID := s.identifiers()
	req := wire.SendMessages{StreamID: streamID, TopicID: topicID, Partitioning: partitioning, MessagesCount: uint32(cfg.MessagesPerBatch)}
	metadata, err := req.AppendMetadata(nil)
	if err != nil {
		return nil, err
	}
	if stats == nil {
		stats = &actorStats{role: RoleProducer, index: index, stream: s.name}
	}
	if c == nil {
		if c, err = dial(ctx, cfg); err != nil {
			return nil, fmt.Errorf("%s: connecting: %w", stats.name(), err)
		}
	}
	return &producer{
		stats:        stats,
		c:            c,
		s:            s,
		partitioning: partitioning,
		batch:        batch,
		frameBytes:   uint64(wire.HeaderSize + len(metadata) + len(batch)),
	}, nil
}

// runAll runs n functions on their own goroutines and returns the first error. The
// first failure, or the cancellation of ctx, cancels the others and calls abort,
// which closes the actors' connections so that requests in flight end at once: the
// actors make their requests under a context that cannot be cancelled, because a
// cancellable one costs the client an allocation per request.
func runAll(ctx context.Context, n int, abort func(), f func(context.Context, int) error) error {
	inner, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(inner, abort)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(inner, i); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
				cancel()
			}
		}()
	}
	wg.Wait()
	stop()
	if first != nil && ctx.Err() != nil {
		return ctx.Err() // interrupted: the actors' errors are its echoes
	}
	return first
}

func closeAll(clients []*client.Client) func() {
	return func() {
		for _, c := range clients {
			c.Close()
		}
	}
}

// runActors connects and runs the actors of cfg on streams and reports. connected,
// when not nil, is called on the caller's goroutine once every actor is connected
// and logged in, just before they start: the go test -bench suites reset their
// timer there, so that logins (an argon2id hash each) are not measured.
func runActors(ctx context.Context, cfg *Config, streams []*stream, watch Watcher, connected func()) (*Report, error) {
	var (
		actors    []func(context.Context) error
		stats     []*actorStats
		clients   []*client.Client
		producers []*producer
		consumers []*consumer
		producing []*producingConsumer
	)
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	ratePerActor := uint64(0)
	if cfg.RateLimitBytesPerSecond > 0 {
		ratePerActor = max(cfg.RateLimitBytesPerSecond/uint64(cfg.Producers+cfg.Consumers), 1)
	}
	if !cfg.Kind.seeded() {
		producersOf := make([]int, len(streams))
		for i := range cfg.Producers {
			producersOf[i%len(streams)]++
		}
		for i, s := range streams {
			s.producersLeft.Store(int64(producersOf[i]))
			if producersOf[i] == 0 {
				close(s.producersDone)
			}
		}
	}
	switch {
	case cfg.Kind == EndToEndProducingConsumer:
		for i := range cfg.Producers {
			s := streams[i%len(streams)]
			st := &actorStats{role: RoleProducingConsumer, index: i, stream: s.name}
			p, err := newProducer(ctx, cfg, i, s, st, nil)
			if err != nil {
				return nil, err
			}
			clients = append(clients, p.c)
			p.pacer = newPacer(ratePerActor)
			a := &producingConsumer{producer: *p, cfg: cfg, tracker: new(partitionTracker)}
			producing = append(producing, a)
			stats = append(stats, st)
			actors = append(actors, a.run)
		}
	case cfg.Kind.producers() && cfg.Kind != EndToEndProducingConsumerGroup:
		for i := range cfg.Producers {
			p, err := newProducer(ctx, cfg, i, streams[i%len(streams)], nil, nil)
			if err != nil {
				return nil, err
			}
			clients = append(clients, p.c)
			p.pacer = newPacer(ratePerActor)
			producers = append(producers, p)
			stats = append(stats, p.stats)
			actors = append(actors, p.run)
		}
	}
	if cfg.Kind == EndToEndProducingConsumerGroup {
		for i := range max(cfg.Producers, cfg.Consumers) {
			s := streams[i%len(streams)]
			c, err := dial(ctx, cfg)
			if err != nil {
				return nil, fmt.Errorf("actor %d: connecting: %w", i, err)
			}
			clients = append(clients, c)
			a := &groupProducingConsumer{}
			if i < cfg.Producers {
				if a.p, err = newProducer(ctx, cfg, i, s, nil, c); err != nil {
					return nil, err
				}
				a.p.pacer = newPacer(ratePerActor)
				producers = append(producers, a.p)
				stats = append(stats, a.p.stats)
			}
			if i < cfg.Consumers {
				a.k = newConsumer(cfg, i, s, c, ratePerActor)
				consumers = append(consumers, a.k)
				stats = append(stats, a.k.stats)
			}
			actors = append(actors, a.run)
		}
	} else if cfg.Kind.consumers() {
		for j := range cfg.Consumers {
			s := streams[j%len(streams)]
			c, err := dial(ctx, cfg)
			if err != nil {
				return nil, fmt.Errorf("consumer %d: connecting: %w", j, err)
			}
			clients = append(clients, c)
			k := newConsumer(cfg, j, s, c, ratePerActor)
			consumers = append(consumers, k)
			stats = append(stats, k.stats)
			actors = append(actors, k.run)
		}
	}
	if connected != nil {
		connected()
	}
	started := time.Now()
	measureAt := started.Add(cfg.Warmup)
	for _, st := range stats {
		st.check.messagesPerBatch = uint64(cfg.MessagesPerBatch)
		st.check.messageSizeBytes = cfg.MessageSizeBytes
		st.series.origin = measureAt
	}
	win := window{measureAt: measureAt, batches: cfg.Batches}
	if cfg.Duration > 0 {
		win.endAt = measureAt.Add(cfg.Duration)
	}
	for _, p := range producers {
		p.win = win
	}
	for _, a := range producing {
		a.win = win
	}
	for _, k := range consumers {
		k.measureAt = measureAt
	}
	stopTicking := tickProgress(cfg, stats, measureAt, watch)
	err := runAll(ctx, len(actors), closeAll(clients), func(ctx context.Context, i int) error { return actors[i](ctx) })
	stopTicking()
	if err != nil {
		return nil, err
	}
	report := newReport(cfg, stats, measureAt, time.Since(started))
	report.Verification = verify(cfg, streams, consumers, producing, stats)
	return report, nil
}

// newConsumer makes consumer index of stream s on connection c: a pinned one reading
// the stream's partition by offset, or a member of the stream's group.
func newConsumer(cfg *Config, index int, s *stream, c *client.Client, bytesPerSecond uint64) *consumer {
	streamID, topicID := s.identifiers()
	k := &consumer{
		stats:            &actorStats{role: RoleConsumer, index: index, stream: s.name},
		c:                c,
		s:                s,
		cfg:              cfg,
		pacer:            newPacer(bytesPerSecond),
		endToEndLatency:  cfg.Kind.producers(),
		messagesPerBatch: uint32(cfg.MessagesPerBatch),
	}
	if cfg.Kind.groups() {
		k.group = c.NewConsumer(client.ConsumerConfig{
			Consumer:   client.GroupConsumer(client.ID(s.groupID)),
			Stream:     streamID,
			Topic:      topicID,
			Strategy:   wire.PollingStrategy{Kind: wire.PollingNext},
			BatchSize:  uint32(cfg.MessagesPerBatch),
			AutoCommit: true,
		})
		return k
	}
	k.pinned = wire.PollMessages{
		Consumer:  client.SingleConsumer(client.ID(uint32(index))),
		StreamID:  streamID,
		TopicID:   topicID,
		Partition: wire.SomePartition(s.partitionIDs[0]),
		Strategy:  wire.PollingStrategy{Kind: wire.PollingOffset},
		Count:     uint32(cfg.MessagesPerBatch),
	}
	k.trackers = []*partitionTracker{new(partitionTracker)}
	return k
}

// tickProgress tells watch of the pacing role's progress every ProgressInterval
// until the returned stop is called, which tells it a last time and returns once
// the ticker has stopped.
func tickProgress(cfg *Config, stats []*actorStats, measureAt time.Time, watch Watcher) (stop func()) {
	if watch == nil {
		return func() {}
	}
	role := RoleConsumer
	for _, st := range stats {
		if st.role != RoleConsumer {
			role = st.role
			break
		}
	}
	var paced []*actorStats
	for _, st := range stats {
		if st.role == role {
			paced = append(paced, st)
		}
	}
	p := Progress{Role: role, Duration: cfg.Duration}
	if cfg.Duration == 0 {
		// Each producer sends, and each consumer of a seeded kind reads, its
		// batches: the seed holds a batch count for every member of a group.
		p.MessagesTotal = uint64(len(paced)) * uint64(cfg.Batches) * uint64(cfg.MessagesPerBatch)
	}
	tell := func() {
		p.Messages, p.PayloadBytes = 0, 0
		for _, st := range paced {
			p.Messages += st.live.messages.Load()
			p.PayloadBytes += st.live.payloadBytes.Load()
		}
		p.Elapsed = time.Since(measureAt)
		watch.Progress(p)
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		ticker := time.NewTicker(ProgressInterval)
		defer ticker.Stop()
		for {
			select {
			case <-ticker.C:
				tell()
			case <-done:
				return
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
		tell()
	}
}
