package partition

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"

	"github.com/iggy-shard/iggy-shard/segment"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Key names a partition: 0-based stream, topic and partition ids.
type Key struct {
	StreamID, TopicID, PartitionID uint32
}

func (k Key) String() string {
	return fmt.Sprintf("%d/%d/%d", k.StreamID, k.TopicID, k.PartitionID)
}

// Errors of the store's administrative calls: the glue's bugs, not a client's
// (the metadata plane decides which partitions exist and where they live).
var (
	ErrPartitionExists = errors.New("partition: partition is already open in this store")
	ErrNotOwned        = errors.New("partition: partition is not open in this store")
)

// Store is one shard's partition plane: the partitions this shard owns, each with
// its log, its topic's Config and its consumer offsets. It knows nothing of
// connections, sessions or users; the glue resolves stream, topic and partition ids,
// checks permissions, and turns results into replies.
//
// A Store belongs to one goroutine, the shard's: it calls every method and PollIO,
// and every completion runs on it, from PollIO (or from inside a call that waits
// for I/O: the administrative ones, Quorum offset writes, and Poll when there is
// nothing to read).
type Store struct {
	root       string
	storages   StorageProvider
	partitions map[Key]*Partition
	order      []*Partition // the same partitions, in the order they were opened
	repl       Replication
	// timers drives every group's clock from the shard's tick; timerOwners maps its
	// handles back to the partitions.
	timers      *vsr.Timers
	timerOwners []*Partition
	// changed lists the partitions whose log moved since TakeChanged last ran.
	changed []*Partition
	// What an idle store does not pay for per partition (activity.go): the
	// partitions PollIO visits, the groups due waiting for their turn, the idle
	// groups parked off the timers, the groups this replica leads.
	activity
	// bodies counts the copies of bodies the partitions hold (memory.go).
	bodies bodyBudget
	// loans are the frames lent to the journals (lend.go).
	loans lending
	// prepareOutbox is repl.Outbox when it sends prepares from their request
	// buffers (leaderlend.go).
	prepareOutbox PrepareOutbox
	// files keeps the partitions' open files within Replication.OpenFilesMax.
	files *segment.FileCache
	// dirsPending: partitions were opened since SyncDirs last ran.
	dirsPending bool
	// statesInstalled counts the state transfers installed (transfer.go).
	statesInstalled uint64
	// dropsRetired sums the ignored inputs of the groups stopped (Drops);
	// ingress counts the frames Step refused before a group saw them
	// (IngressDrops).
	dropsRetired vsr.DropCounts
	ingress      IngressDrops
	// scrub paces the re-verification of sealed segments (scrub.go).
	scrub storeScrub
	// plans are the poll plans held (plan.go).
	plans storePlans
}

// StatesInstalled is how many partition states this store has installed by state
// transfer since it was made: a replica that fell further behind than its
// primary keeps for repair.
func (s *Store) StatesInstalled() uint64 { return s.statesInstalled }

// TakeChanged calls fn with every partition whose log moved since the last call (a
// backup's applies, an installed state, a primary's sends), so that the caller
// refreshes what it reports of them (GET_TOPIC's offsets and sizes on any node).
func (s *Store) TakeChanged(fn func(Key)) {
	for _, p := range s.changed {
		p.activity.statsChanged = false
		if s.partitions[p.key] == p {
			fn(p.key)
		}
	}
	clear(s.changed)
	s.changed = s.changed[:0]
}

func (p *Partition) noteChanged() {
	if !p.activity.statsChanged {
		p.activity.statsChanged = true
		p.store.changed = append(p.store.changed, p)
	}
}

// NewStore returns an empty store whose partitions live under root (the server's
// local_data directory), at root/streams/{s}/topics/{t}/partitions/{p}/
// (iggy.apache.org/docs/server/storage-engine, "Directory layout"). Each partition
// is a consensus group of one replica: the single-node server.
func NewStore(root string, storages StorageProvider) *Store {
	return NewReplicatedStore(root, storages, Replication{})
}

// NewReplicatedStore is NewStore for replica repl.ReplicaID of a cluster of
// repl.ReplicaCount: each partition is that replica of its group.
func NewReplicatedStore(root string, storages StorageProvider, repl Replication) *Store {
	budget := repl.BodyBudgetBytes
	if budget <= 0 {
		budget = bodyBudgetDefault
	}
	openFiles := repl.OpenFilesMax
	if openFiles <= 0 {
		openFiles = segment.FilesBudget(runtime.GOMAXPROCS(0))
	}
	lentMax := repl.LentBodiesMax
	if lentMax == 0 {
		lentMax = LentBodiesMaxDefault
	}
	prepareOutbox, _ := repl.Outbox.(PrepareOutbox)
	return &Store{root: root, storages: storages, partitions: make(map[Key]*Partition), repl: repl, timers: vsr.NewTimers(),
		bodies: bodyBudget{budgetBytes: budget}, files: segment.NewFileCache(openFiles), loans: lending{max: lentMax},
		prepareOutbox: prepareOutbox}
}

// OpenFiles says what the store's file cache did: the partitions' files open now
// and at most, against Replication.OpenFilesMax, and how often a file was closed
// to make room and opened again.
func (s *Store) OpenFiles() segment.FileCacheStats { return s.files.Stats() }

// openStorage is the storage of a partition directory, its files counted against
// the store's budget.
func (s *Store) openStorage(dir string) (segment.Storage, error) {
	st, err := s.storages.Open(dir)
	if err != nil {
		return nil, err
	}
	s.dirsPending = true
	return s.files.Storage(st), nil
}

// Dir returns the directory of a partition's files.
func (s *Store) Dir(k Key) string {
	return filepath.Join(s.root, "streams", strconv.FormatUint(uint64(k.StreamID), 10),
		"topics", strconv.FormatUint(uint64(k.TopicID), 10),
		"partitions", strconv.FormatUint(uint64(k.PartitionID), 10))
}

// Partition is one partition of the store.
type Partition struct {
	key             Key
	dir             string
	cfg             Config
	createdAtMicros uint64
	purgeGeneration uint64 // the purges of its topic its life follows (incarnation.go)
	store           *Store

	// Its log (send.go, apply.go).
	storage     segment.Storage
	log         *segment.Log
	hooks       segment.Hooks // bound to this partition once, so appends allocate no closure
	sends       sendQueue
	lastFailure error // the last storage failure that cut acknowledged-pending batches
	saveWanted  bool  // a send was refused for a full window: save once the writes are done
	reopenErr   error // the log is closed: reopening it failed (Recover tries again)
	// diverged: a backup's log does not continue where the primary's did; it
	// refuses sends until Recover.
	diverged error

	// Its consensus group (group.go), driven by its Driver (host.go).
	group partitionGroup
	// journal holds the prepared ops not applied yet; committedOp is the highest
	// committed op, applied up to journal.firstOp-1 (apply.go).
	journal     journal
	committedOp uint64
	prepared    preparedState  // what the journal's batches add to the log (apply.go)
	proposing   proposingState // the sends and offset ops on their way in (propose.go)
	persist     persistState   // a Ready's durable writes (host.go)
	// durable is the journal file of an enforce_fsync partition (durable.go).
	durable *durableJournal

	copies bodyCopies // copies of bodies it holds (memory.go)
	// loansEnded are the lent frames given back once the group's Ready is done
	// (lend.go).
	loansEnded []bodyLoan
	activity   partitionActivity // its places in the store's lists (activity.go)
	transfer   transferState     // the states installed (transfer.go)
	deleted    deletedSegments   // the last DeleteSegments op applied (deletesegments.go)
}

// Create makes a new, empty partition: whatever a crashed deletion left in its
// directory is removed first, so a reused id never shows an old message.
func (s *Store) Create(k Key, cfg Config, createdAtMicros uint64) error {
	return s.CreateInView(k, cfg, Incarnation{CreatedAtMicros: createdAtMicros}, 0)
}

// CreateInView is Create for a partition of a cluster whose group starts in view
// (vsr.CoreConfig.InitialView): the view of the metadata op that created it, the
// same on every replica, so that the node leading the cluster leads the partition.
func (s *Store) CreateInView(k Key, cfg Config, inc Incarnation, view uint32) error {
	if _, ok := s.partitions[k]; ok {
		return fmt.Errorf("%w: %v", ErrPartitionExists, k)
	}
	if err := s.storages.Remove(s.Dir(k)); err != nil {
		return fmt.Errorf("partition %v: clear directory: %w", k, err)
	}
	_, err := s.open(k, cfg, inc, true, view)
	return err
}

// Open opens an existing partition after a restart: segment.Open recovers its log
// (a torn tail cut, indexes rebuilt, offsets clamped) and the report says what it
// found, for the log. A partition with no files opens empty.
func (s *Store) Open(k Key, cfg Config, inc Incarnation) (*segment.RecoveryReport, error) {
	if _, ok := s.partitions[k]; ok {
		return nil, fmt.Errorf("%w: %v", ErrPartitionExists, k)
	}
	return s.open(k, cfg, inc, false, 0)
}

func (s *Store) open(k Key, cfg Config, inc Incarnation, fresh bool, view uint32) (*segment.RecoveryReport, error) {
	p := &Partition{key: k, dir: s.Dir(k), cfg: cfg, createdAtMicros: inc.CreatedAtMicros, purgeGeneration: inc.PurgeGeneration, store: s,
		group: partitionGroup{fresh: fresh, initialView: view}, activity: partitionActivity{armedAt: -1}}
	p.hooks = segment.Hooks{Written: p.onWritten, Durable: p.onDurable, Failed: p.onFailed}
	p.journal.drop = p.releaseBody
	st, err := s.openStorage(p.dir)
	if err != nil {
		return nil, fmt.Errorf("partition %v: open storage: %w", k, err)
	}
	p.storage = st
	log, report, err := segment.Open(st, p.logConfig(cfg), p.hooks)
	if err != nil {
		return report, fmt.Errorf("partition %v: %w", k, err)
	}
	p.log = log
	if err := p.openDeletedSegments(); err != nil {
		_ = log.Close()
		return report, fmt.Errorf("partition %v: %w", k, err)
	}
	if err := p.openState(); err != nil {
		_ = log.Close()
		return report, fmt.Errorf("partition %v: %w", k, err)
	}
	if err := p.openDurable(); err != nil {
		_ = p.close()
		return report, fmt.Errorf("partition %v: %w", k, err)
	}
	if err := s.startGroup(p); err != nil {
		_ = p.close()
		return report, err
	}
	s.partitions[k] = p
	s.order = append(s.order, p)
	s.activate(p)
	return report, nil
}

// Has reports whether the store owns the partition.
func (s *Store) Has(k Key) bool {
	_, ok := s.partitions[k]
	return ok
}

// Len is the number of partitions the store owns.
func (s *Store) Len() int { return len(s.order) }

// Keys appends the keys of the store's partitions, in the order they were opened.
func (s *Store) Keys(dst []Key) []Key {
	for _, p := range s.order {
		dst = append(dst, p.key)
	}
	return dst
}

// Delete closes a partition and removes its directory (DeletePartitions,
// DeleteTopic, DeleteStream). Sends still waiting for durability complete first,
// as Close makes them durable.
func (s *Store) Delete(k Key) error {
	p, ok := s.partitions[k]
	if !ok {
		return fmt.Errorf("%w: %v", ErrNotOwned, k)
	}
	closeErr := p.close()
	s.forget(p)
	if err := s.storages.Remove(p.dir); err != nil {
		return fmt.Errorf("partition %v: remove directory: %w", k, err)
	}
	if closeErr != nil {
		return fmt.Errorf("partition %v: %w", k, closeErr)
	}
	return nil
}

// DeleteTopic deletes every partition of a topic the store owns.
func (s *Store) DeleteTopic(streamID, topicID uint32) error {
	return s.each(func(k Key) bool { return k.StreamID == streamID && k.TopicID == topicID }, s.Delete)
}

// DeleteStream deletes every partition of a stream the store owns.
func (s *Store) DeleteStream(streamID uint32) error {
	return s.each(func(k Key) bool { return k.StreamID == streamID }, s.Delete)
}

// Purge drops every message and every consumer offset of a partition and keeps the
// partition: it starts again, empty, at offset 0, as the reference server's purge
// does (its offset frontier returns to 0, core/partitions purge tests). The log is
// closed (sends in flight complete), its directory removed and a fresh log opened.
// segment.Log.Purge is not used: it keeps the offset counter. purgeGeneration is
// the topic's purge generation the purge reached: the partition's group starts its
// new life under that life's tag (incarnation.go), Normal in view 0.
//
// Every replica must start a life in one view: a replica that started Normal in a
// view of its own was a primary or a backup of a view no view change made. The
// old life's view differs from replica to replica (the simulator, sim/purge.go,
// found two replicas committing different prepares at op 1 of a life), and so
// does the view the metadata op that committed the purge carries: a prepare's
// view is outside its checksum (wire/checksum.go), a retransmission re-stamps it
// and a header a replica learned from a view change's suffix has none (0). Two
// replicas that took the op's view started one life Normal in views 0 and 39;
// with two replicas (replication quorum 1) each led its own and committed alone
// (the simulator's seed 927 under -purge, before the SimDisk reservations of
// 75b41f5 moved its schedule). View 0 is the one every node knows: no view change
// of the life can pass it without a view-change quorum of replicas that started
// it, and the metadata leader takes the group over afterwards as it does any
// group it backs (LeadGroups). A node that carries out a purge it missed (after a
// restart, or a state transfer of the metadata) may find the life past view 0
// with it among the quorum: PurgeMissed.
func (s *Store) Purge(k Key, purgeGeneration uint64) error {
	return s.purge(k, purgeGeneration, false)
}

// PurgeMissed is Purge for a purge whose op this node applied without carrying it
// out (a crash cut it, or the node took the metadata by a state transfer): the new
// life may have moved on since in views this node does not know, so its group
// probes for the view (vsr.Core.Recover) instead of starting in one.
func (s *Store) PurgeMissed(k Key, purgeGeneration uint64) error {
	return s.purge(k, purgeGeneration, true)
}

// purge empties k and starts its new life of purgeGeneration, probing for the
// life's view (PurgeMissed) or in view 0 (Purge).
func (s *Store) purge(k Key, purgeGeneration uint64, probeView bool) error {
	p, ok := s.partitions[k]
	if !ok {
		return fmt.Errorf("%w: %v", ErrNotOwned, k)
	}
	p.purgeGeneration = purgeGeneration
	return s.wipe(p, probeView)
}

// PurgeTopic purges every partition of a topic the store owns, to purgeGeneration.
func (s *Store) PurgeTopic(streamID, topicID uint32, purgeGeneration uint64) error {
	return s.each(func(k Key) bool { return k.StreamID == streamID && k.TopicID == topicID },
		func(k Key) error { return s.Purge(k, purgeGeneration) })
}

// PurgeStream purges every partition of a stream the store owns, to purgeGeneration.
func (s *Store) PurgeStream(streamID uint32, purgeGeneration uint64) error {
	return s.each(func(k Key) bool { return k.StreamID == streamID }, func(k Key) error { return s.Purge(k, purgeGeneration) })
}

// Reconfigure applies a topic's new Config (UpdateTopic changes message_expiry and
// max_topic_size; CreatePartitions and DeletePartitions change the partition count
// and so the size share). A log takes its Config at open, so a partition whose log
// settings change is closed and opened again; that costs a recovery walk of its open
// segment, which is fine for an administrative call.
func (s *Store) Reconfigure(streamID, topicID uint32, cfg Config) error {
	return s.each(func(k Key) bool { return k.StreamID == streamID && k.TopicID == topicID }, func(k Key) error {
		p := s.partitions[k]
		if cfg.segmentConfig(k.PartitionID) == p.cfg.segmentConfig(k.PartitionID) {
			p.cfg = cfg
			return nil
		}
		_, err := p.reopen(p.storage, cfg)
		return err
	})
}

// Recover closes a partition's log and opens it again, running recovery: for a
// partition that refuses sends with 4010 because its log is broken (Err says why: a
// repair after a storage failure failed too, or a reopen did), once the disk is
// usable again. The report says what recovery found.
func (s *Store) Recover(k Key) (*segment.RecoveryReport, error) {
	p, ok := s.partitions[k]
	if !ok {
		return nil, fmt.Errorf("%w: %v", ErrNotOwned, k)
	}
	return p.reopen(p.storage, p.cfg)
}

// reopen closes p's log and opens it again from st with cfg. A failure to close is
// recovery's to sort out (it decides what the disk kept); a failure to open leaves
// the partition in the store, closed and refusing sends with 4010, until Recover.
func (p *Partition) reopen(st segment.Storage, cfg Config) (*segment.RecoveryReport, error) {
	_ = p.close()
	p.storage = st
	p.cfg = cfg
	log, report, err := segment.Open(st, p.logConfig(cfg), p.hooks)
	if err != nil {
		p.reopenErr = fmt.Errorf("partition %v: %w", p.key, err)
		return report, p.reopenErr
	}
	p.log = log
	p.persist.journalErr, p.diverged = nil, nil
	if err := p.openDeletedSegments(); err != nil {
		p.reopenErr = fmt.Errorf("partition %v: %w", p.key, err)
		return report, p.reopenErr
	}
	if err := p.openState(); err != nil {
		p.reopenErr = fmt.Errorf("partition %v: %w", p.key, err)
		return report, p.reopenErr
	}
	if err := p.openDurable(); err != nil {
		p.reopenErr = fmt.Errorf("partition %v: %w", p.key, err)
		return report, p.reopenErr
	}
	if err := p.store.startGroup(p); err != nil {
		p.reopenErr = err
		return report, err
	}
	p.lastFailure, p.reopenErr = nil, nil
	p.store.activate(p)
	return report, nil
}

// wipe closes p's log, removes every file of the partition and opens an empty log.
func (s *Store) wipe(p *Partition, probeView bool) error {
	_ = p.close() // the data goes anyway
	if err := s.storages.Remove(p.dir); err != nil {
		p.reopenErr = fmt.Errorf("partition %v: remove directory: %w", p.key, err)
		return p.reopenErr
	}
	st, err := s.openStorage(p.dir)
	if err != nil {
		p.reopenErr = fmt.Errorf("partition %v: open storage: %w", p.key, err)
		return p.reopenErr
	}
	p.group.fresh = true // every replica purges: the group starts anew, in view 0 (Purge)
	p.group.initialView, p.group.probeView = 0, probeView
	_, err = p.reopen(st, p.cfg)
	return err
}

// each runs fn on the partitions whose key matches, in opening order, and joins the
// errors: one partition failing does not stop the others.
func (s *Store) each(match func(Key) bool, fn func(Key) error) error {
	var keys []Key
	for _, p := range s.order {
		if match(p.key) {
			keys = append(keys, p.key)
		}
	}
	var errs []error
	for _, k := range keys {
		if err := fn(k); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *Store) forget(p *Partition) {
	s.stopGroup(p)
	delete(s.partitions, p.key)
	for i, q := range s.order {
		if q == p {
			s.order = append(s.order[:i], s.order[i+1:]...)
			break
		}
	}
}

// close closes the log: every request in flight completes, the open segment and the
// offsets are synced. Sends the log could not store are failed.
func (p *Partition) close() error {
	p.quiesce()
	err := p.log.Close()
	p.releaseWritten()
	p.returnLoans() // nothing in flight: the group is stopped, the log closed
	if p.durable != nil {
		err = errors.Join(err, p.durable.close(p))
		p.durable = nil
	}
	if p.group.state != nil {
		err = errors.Join(err, p.group.state.close())
		p.group.state = nil
	}
	if p.broken() == nil {
		p.acknowledge(p.ackEnd())
	}
	p.failSends(0, wire.ErrCannotSaveMessagesToSegment)
	return err
}

// Close closes every partition, making what was written durable.
func (s *Store) Close() error {
	var errs []error
	for _, p := range s.order {
		if err := p.close(); err != nil {
			errs = append(errs, fmt.Errorf("partition %v: %w", p.key, err))
		}
		s.stopGroup(p)
	}
	s.order = nil
	clear(s.partitions)
	return errors.Join(errs...)
}

// idle reports whether neither the log nor the journal file has I/O in flight.
func (p *Partition) idle() bool {
	return p.log.Idle() && (p.durable == nil || p.durable.inFlight == 0)
}

// Busy reports whether any partition has I/O in flight or queued.
func (s *Store) Busy() bool {
	for _, p := range s.order {
		if !p.idle() {
			return true
		}
	}
	return false
}

// WaitIdle polls until no partition has I/O in flight: for shutdown, tools and
// tests. The shard's loop uses PollIO.
func (s *Store) WaitIdle() {
	for busy := true; busy; {
		busy = false
		for _, p := range s.order {
			for p.durable != nil && p.durable.inFlight > 0 {
				if p.pollStorage(true) == 0 {
					panic("partition: the journal file waits on a storage with nothing in flight")
				}
			}
			p.log.WaitIdle()
			p.resume()
			p.settleSends() // may submit a save, or a journal write of sends that waited
			busy = busy || !p.idle()
		}
	}
}

// DeleteSegments deletes the count oldest sealed segments of a partition
// (DELETE_SEGMENTS, 503); the open segment is never deleted. It reports what went.
func (s *Store) DeleteSegments(k Key, count uint32) ([]segment.RemovedSegment, error) {
	p, ok := s.partitions[k]
	if !ok {
		return nil, wire.ErrPartitionNotFound
	}
	s.activate(p)
	return p.log.DeleteOldestSegments(int(count))
}

// ApplyRetention runs a retention pass over every partition at time nowMicros (µs
// since the epoch, the clock the batches were stamped with): sealed segments older
// than message_expiry, and the oldest sealed segments while a partition exceeds its
// share of max_topic_size, are deleted. It returns how many segments went and the
// partitions' errors joined; a failing partition does not stop the pass.
func (s *Store) ApplyRetention(nowMicros uint64) (removedSegments int, err error) {
	var errs []error
	for _, p := range s.order {
		removed, err := p.log.ApplyRetention(nowMicros)
		removedSegments += len(removed)
		if len(removed) > 0 || !p.idle() {
			s.activate(p)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("partition %v: %w", p.key, err))
		}
	}
	return removedSegments, errors.Join(errs...)
}

// Info returns what GetTopic's PartitionInfo and GetStats report of a partition:
// its creation time, segment count, current offset (0 when empty), size in bytes and
// message count. Sizes and counts include batches still being written.
func (s *Store) Info(k Key) (wire.PartitionInfo, error) {
	p, ok := s.partitions[k]
	if !ok {
		return wire.PartitionInfo{}, wire.ErrPartitionNotFound
	}
	current, _ := p.log.CurrentOffset()
	return wire.PartitionInfo{
		ID:              k.PartitionID,
		CreatedAtMicros: p.createdAtMicros,
		SegmentsCount:   uint32(p.log.SegmentCount()),
		CurrentOffset:   current,
		SizeBytes:       uint64(p.log.SizeBytes()),
		MessagesCount:   p.log.NextOffset() - p.log.FirstOffset(),
	}, nil
}

// Totals are the sums over the store's partitions, for GetStats (apache/iggy
// core/binary_protocol/src/responses/system/get_stats.rs: partitions_count,
// segments_count, messages_count, messages_size_bytes); the glue adds up the shards'
// totals.
type Totals struct {
	Partitions, Segments uint32
	Messages, SizeBytes  uint64
}

// Totals sums Info over every partition the store owns.
func (s *Store) Totals() Totals {
	var t Totals
	for _, p := range s.order {
		t.Partitions++
		t.Segments += uint32(p.log.SegmentCount())
		t.Messages += p.log.NextOffset() - p.log.FirstOffset()
		t.SizeBytes += uint64(p.log.SizeBytes())
	}
	return t
}

// Err returns why a partition's log refuses appends for good (a repair after a
// storage failure failed too: reopen the partition), or the last storage failure
// that failed sends; nil when there was none.
func (s *Store) Err(k Key) error {
	p, ok := s.partitions[k]
	if !ok {
		return ErrNotOwned
	}
	if err := p.broken(); err != nil {
		return err
	}
	return p.lastFailure
}
