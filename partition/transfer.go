package partition

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/iggy-shard/iggy-shard/segment"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
	"github.com/zeebo/xxh3"
)

// State transfer of a partition: a replica that restarted, or whose log does not
// continue where its primary's does, takes a whole applied state from a peer
// (vsr's transfer frames, iggy.apache.org/docs/binary-protocol/server-to-server,
// "State transfer"). The state is the artifacts of the partition plane:
//
//	SEGMENT_LOG       one per segment, its .log verbatim up to the applied end;
//	                  frontier = the segment's base offset
//	CONSUMER_OFFSETS  ICO1: version u8 = 1, purge_generation u64, next_offset u64,
//	                  consumers u32, groups u32, (id u32, offset u64) ascending per
//	                  table, XxHash3-64 trailer; frontier = the offer's commit_op
//
// An offer is made of the applied state only when every applied batch is written
// (the log's written end is its next offset), so the files hold exactly the ops up
// to the applied one: the writes in flight are waited for (OfferState). A segment is
// offered as it is then (its size and XxHash3, cached per file and size) and read
// a chunk at a time as the requester asks (segmentSource), so an offer holds no
// copy of the log. purge_generation is sent as 0: purges are metadata operations
// every node applies itself.
//
// The requester does not fetch a segment it holds byte for byte (same base, size
// and checksum: vsr.ArtifactHolder), so a replica that restarted fetches only the
// segments it lacks or has shorter. Hashing a file and serving a chunk are
// blocking reads on the shard, as are the installs' writes: a transfer is rare.
//
// Installing closes the log, removes the partition's own files but the segments
// held (installReplaces; the files of others stay), writes the fetched segments
// and opens the log again (its recovery rebuilds the indexes and checks every
// batch), then stores the offsets. The group state (groupstate.go) records the
// installed op as the checkpoint; a crash before that record is durable finds a
// log it cannot place, and transfers again.

// transferState counts the states a partition installed, and the segments they
// did not fetch (held already); checksums caches the XxHash3 of segment files by
// name and size.
type transferState struct {
	installs     uint64
	segmentsHeld uint64
	checksums    map[string]fileSum
}

// OfferState implements vsr.Host: the applied state, once every applied batch is
// written. The batches applied and still being written are waited for here, as a
// chunk's read and a segment's hash wait for theirs: a transfer is rare. A state
// that cannot be made now is refused (the requester asks again).
func (h *groupHost) OfferState(vsr.StateRequest) (uint64, []vsr.Artifact) {
	p := (*Partition)(h)
	for p.log.WrittenEnd() != p.log.NextOffset() && !p.log.Idle() {
		if p.storage.Poll(true) == 0 {
			break
		}
	}
	applied := p.journal.firstOp - 1
	if applied == 0 || p.log.WrittenEnd() != p.log.NextOffset() {
		return 0, nil
	}
	artifacts, err := p.stateArtifacts(applied)
	if err != nil {
		p.lastFailure = fmt.Errorf("partition %v: state offer: %w", p.key, err)
		return 0, nil
	}
	return applied, artifacts
}

// stateArtifacts is the applied state: every segment's .log, read on demand
// (segmentSource), and the offsets.
func (p *Partition) stateArtifacts(applied uint64) ([]vsr.Artifact, error) {
	names, err := p.storage.List("")
	if err != nil {
		return nil, err
	}
	var artifacts []vsr.Artifact
	for _, name := range names {
		base, ok := segmentLogBase(name)
		if !ok {
			continue
		}
		src, err := p.segmentSource(name)
		if err != nil {
			return nil, err
		}
		artifacts = append(artifacts, vsr.Artifact{Kind: wire.ArtifactSegmentLog, Frontier: base, Source: src})
	}
	artifacts = append(artifacts, vsr.Artifact{Kind: wire.ArtifactConsumerOffsets, Frontier: applied, Bytes: p.encodeOffsets()})
	return artifacts, nil
}

// segmentSource serves one segment's .log as it is now: its size and checksum are
// taken at the offer (a segment only grows, so the bytes below that size stay
// what they are), and each chunk is read from the file when asked for, with a
// blocking read (state transfer is rare; the partition's own I/O goes on through
// its ring).
type segmentSource struct {
	storage   segment.Storage
	name      string
	sizeBytes uint64
	checksum  uint64
}

func (s *segmentSource) SizeBytes() uint64 { return s.sizeBytes }
func (s *segmentSource) Checksum() uint64  { return s.checksum }

func (s *segmentSource) ReadAt(b []byte, off uint64) error {
	f, _, err := s.storage.Open(s.name, false, 0)
	if err != nil {
		return err
	}
	defer func() { _ = s.storage.Close(f) }()
	r := &segment.Request{Op: segment.OpRead, File: f, Offset: int64(off), Data: b}
	if err := waitRequest(s.storage, r); err != nil {
		return err
	}
	if r.Result != int64(len(b)) {
		return fmt.Errorf("segment %s: read %d of %d bytes at %d", s.name, r.Result, len(b), off)
	}
	return nil
}

func (p *Partition) segmentSource(name string) (*segmentSource, error) {
	sum, size, err := p.fileChecksum(name)
	if err != nil {
		return nil, err
	}
	return &segmentSource{storage: p.storage, name: name, sizeBytes: uint64(size), checksum: sum}, nil
}

// checksumChunkBytes is the read size when a file is hashed whole.
const checksumChunkBytes = 1 << 20

// fileChecksum is the XxHash3-64 of a file as it is now and its size, from the
// partition's cache when the file has not changed size since it was hashed (a
// segment is only ever appended to, and a sealed one never changes), else read
// whole with blocking reads.
func (p *Partition) fileChecksum(name string) (uint64, int64, error) {
	f, size, err := p.storage.Open(name, false, 0)
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = p.storage.Close(f) }()
	if c, ok := p.transfer.checksums[name]; ok && c.sizeBytes == size {
		return c.checksum, size, nil
	}
	h := xxh3.New()
	buf := make([]byte, min(size, checksumChunkBytes))
	for off := int64(0); off < size; {
		n := min(size-off, int64(len(buf)))
		r := &segment.Request{Op: segment.OpRead, File: f, Offset: off, Data: buf[:n]}
		if err := waitRequest(p.storage, r); err != nil {
			return 0, 0, err
		}
		if r.Result != n {
			return 0, 0, fmt.Errorf("%s: read %d of %d bytes at %d", name, r.Result, n, off)
		}
		_, _ = h.Write(buf[:n])
		off += n
	}
	if p.transfer.checksums == nil {
		p.transfer.checksums = make(map[string]fileSum)
	}
	p.transfer.checksums[name] = fileSum{sizeBytes: size, checksum: h.Sum64()}
	return h.Sum64(), size, nil
}

type fileSum struct {
	sizeBytes int64
	checksum  uint64
}

// holdsArtifact reports whether the partition holds an offered segment byte for
// byte (same name, size and checksum): a replica that restarted holds most of its
// sealed segments, and fetches only what it lacks.
func (p *Partition) holdsArtifact(a wire.StateArtifact) bool {
	if a.Kind != wire.ArtifactSegmentLog || p.reopenErr != nil {
		return false
	}
	// A segment this replica lacks fails to open.
	sum, size, err := p.fileChecksum(fmt.Sprintf("%020d.log", a.Frontier))
	return err == nil && uint64(size) == a.SizeBytes && sum == a.Checksum
}

// segmentLogBase parses a segment's .log name (20 digits, its base offset).
func segmentLogBase(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, ".log")
	if !ok || len(digits) != 20 {
		return 0, false
	}
	base, err := strconv.ParseUint(digits, 10, 64)
	return base, err == nil
}

const offsetsMagic = "ICO1"

// encodeOffsets is the CONSUMER_OFFSETS artifact of the log's offsets.
func (p *Partition) encodeOffsets() []byte {
	consumers := p.log.ConsumerOffsets(segment.Consumer, nil)
	groups := p.log.ConsumerOffsets(segment.ConsumerGroup, nil)
	b := make([]byte, 0, 4+1+8+8+4+4+12*(len(consumers)+len(groups))+8)
	b = append(b, offsetsMagic...)
	b = append(b, 1)
	b = binary.LittleEndian.AppendUint64(b, 0)
	b = binary.LittleEndian.AppendUint64(b, p.log.NextOffset())
	b = binary.LittleEndian.AppendUint32(b, uint32(len(consumers)))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(groups)))
	for _, table := range [][][2]uint64{consumers, groups} {
		for _, e := range table {
			b = binary.LittleEndian.AppendUint32(b, uint32(e[0]))
			b = binary.LittleEndian.AppendUint64(b, e[1])
		}
	}
	return binary.LittleEndian.AppendUint64(b, xxh3.Hash(b))
}

// offsetsMax bounds each table of a received CONSUMER_OFFSETS artifact, as the
// reference's decoder does.
const offsetsMax = 1 << 20

// decodeOffsets checks a CONSUMER_OFFSETS artifact and returns its tables and the
// offset frontier.
func decodeOffsets(b []byte) (consumers, groups [][2]uint64, nextOffset uint64, err error) {
	const head = 4 + 1 + 8 + 8 + 4 + 4
	if len(b) < head+8 || string(b[:4]) != offsetsMagic || b[4] != 1 {
		return nil, nil, 0, errors.New("consumer offsets: not an ICO1 artifact")
	}
	if binary.LittleEndian.Uint64(b[len(b)-8:]) != xxh3.Hash(b[:len(b)-8]) {
		return nil, nil, 0, errors.New("consumer offsets: trailer checksum")
	}
	nextOffset = binary.LittleEndian.Uint64(b[13:])
	nc, ng := binary.LittleEndian.Uint32(b[21:]), binary.LittleEndian.Uint32(b[25:])
	if nc > offsetsMax || ng > offsetsMax || len(b) != head+12*int(nc+ng)+8 {
		return nil, nil, 0, errors.New("consumer offsets: table sizes")
	}
	pos := head
	read := func(n uint32) ([][2]uint64, error) {
		t := make([][2]uint64, n)
		for i := range t {
			t[i] = [2]uint64{uint64(binary.LittleEndian.Uint32(b[pos:])), binary.LittleEndian.Uint64(b[pos+4:])}
			pos += 12
			if i > 0 && t[i][0] <= t[i-1][0] {
				return nil, errors.New("consumer offsets: ids not strictly ascending")
			}
		}
		return t, nil
	}
	if consumers, err = read(nc); err != nil {
		return nil, nil, 0, err
	}
	if groups, err = read(ng); err != nil {
		return nil, nil, 0, err
	}
	return consumers, groups, nextOffset, nil
}

// install replaces the partition's log and offsets with a transferred state of the
// ops up to in.CommitOp, as the Ready's last step before Advance.
func (p *Partition) install(in *vsr.StateInstall) error {
	var segments []vsr.Artifact
	var consumers, groups [][2]uint64
	nextOffset, haveOffsets := uint64(0), false
	for _, a := range in.Artifacts {
		switch a.Kind {
		case wire.ArtifactSegmentLog:
			if len(segments) > 0 && a.Frontier <= segments[len(segments)-1].Frontier {
				return errors.New("state transfer: segments out of order")
			}
			segments = append(segments, a)
		case wire.ArtifactConsumerOffsets:
			var err error
			if consumers, groups, nextOffset, err = decodeOffsets(a.Bytes); err != nil {
				return fmt.Errorf("state transfer: %w", err)
			}
			haveOffsets = true
		}
	}
	if !haveOffsets {
		return errors.New("state transfer: no consumer offsets artifact")
	}
	// The ops up to the installed one leave the journal: the state holds them, this
	// replica's prepare of each or another view's op in its place, which it cannot
	// tell apart here: a send is answered 57 (outcome unknown), not 4006 (never
	// polled).
	for p.journal.len() > 0 && p.journal.firstOp <= in.CommitOp {
		e := p.journal.front()
		if e.present && !e.void && e.header.Operation == wire.OperationSendMessages {
			p.prepared.unappliedBatches--
		}
		p.finishEntry(e, wire.ErrTransientNotCommitted)
		p.journal.popFront()
	}
	if p.journal.len() == 0 {
		p.journal.firstOp = max(p.journal.firstOp, in.CommitOp+1)
	}
	p.committedOp = max(p.committedOp, in.CommitOp)

	_ = p.log.Close() // replaced
	p.releaseWritten()
	if p.durable != nil {
		_ = p.durable.close(p)
		p.durable = nil
	}
	// The view state goes into the new state file's first record: a checkpoint
	// recorded there alone would say view 0 beside ops of a later view.
	var viewState groupState
	if p.group.state != nil {
		viewState = p.group.state.wanted
		_ = p.group.state.close()
		p.group.state = nil
	}
	st := p.storage
	// A segment held was checked when the offer came; the log may have appended
	// to it since (batches applied before the install): it is cut back to the
	// offered size and checked again, and its index goes (recovery rebuilds it).
	kept := make(map[string]bool)
	for _, a := range segments {
		if !a.Local {
			continue
		}
		name := fmt.Sprintf("%020d", a.Frontier)
		grown, err := p.cutTo(name+".log", a.SizeBytes)
		if err != nil {
			return fmt.Errorf("state transfer: segment %d held: %w", a.Frontier, err)
		}
		if sum, size, err := p.fileChecksum(name + ".log"); err != nil || uint64(size) != a.SizeBytes || sum != a.Checksum {
			return fmt.Errorf("state transfer: segment %d held changed since the offer (%v)", a.Frontier, err)
		}
		kept[name+".log"] = true
		kept[name+".index"] = !grown
	}
	// Every other file the state replaces goes, the group state last, so that a
	// crash meanwhile finds a log it cannot place.
	for _, dir := range segment.LogDirs {
		names, err := st.List(dir)
		if err != nil {
			return fmt.Errorf("state transfer: list %q: %w", dir, err)
		}
		for _, name := range names {
			if !installReplaces(dir, name) || dir == "" && (kept[name] || name == groupStateFileName) {
				continue
			}
			if dir != "" {
				name = dir + "/" + name
			}
			if err := waitRequest(st, &segment.Request{Op: segment.OpRemove, Name: name}); err != nil {
				return fmt.Errorf("state transfer: remove %s: %w", name, err)
			}
		}
	}
	if err := waitRequest(st, &segment.Request{Op: segment.OpRemove, Name: groupStateFileName}); err != nil {
		return fmt.Errorf("state transfer: remove %s: %w", groupStateFileName, err)
	}
	clear(p.transfer.checksums)
	for _, a := range segments {
		if a.Local {
			p.transfer.segmentsHeld++
			continue
		}
		if err := writeWhole(st, fmt.Sprintf("%020d.log", a.Frontier), a.Bytes); err != nil {
			return fmt.Errorf("state transfer: segment %d: %w", a.Frontier, err)
		}
	}
	log, _, err := segment.Open(st, p.logConfig(p.cfg), p.hooks)
	if err != nil {
		return fmt.Errorf("state transfer: open log: %w", err)
	}
	p.log = log
	if log.NextOffset() != nextOffset {
		return fmt.Errorf("state transfer: the installed log ends at %d, the offer's at %d", log.NextOffset(), nextOffset)
	}
	if err := p.noteStateInstalled(); err != nil {
		return fmt.Errorf("state transfer: %w", err)
	}
	for _, e := range consumers {
		if err := log.StoreConsumerOffset(segment.Consumer, uint32(e[0]), e[1]); err != nil {
			return fmt.Errorf("state transfer: consumer offset: %w", err)
		}
	}
	for _, e := range groups {
		if err := log.StoreConsumerOffset(segment.ConsumerGroup, uint32(e[0]), e[1]); err != nil {
			return fmt.Errorf("state transfer: group offset: %w", err)
		}
	}
	// The offsets are written (and, with enforce_fsync, durable) before the
	// checkpoint below names the installed op: a restart that places itself there
	// must find them.
	log.WaitIdle()
	if !log.OffsetsWritten() {
		return errors.New("state transfer: consumer offsets not written")
	}
	if err := p.openState(); err != nil {
		return fmt.Errorf("state transfer: %w", err)
	}
	if p.group.state != nil {
		p.group.state.wanted.durable = viewState.durable
		p.group.state.wanted.viewHeaders = append(p.group.state.wanted.viewHeaders[:0], viewState.viewHeaders...)
	}
	if err := p.openDurable(); err != nil {
		return fmt.Errorf("state transfer: %w", err)
	}
	if err := p.rejournal(); err != nil {
		return fmt.Errorf("state transfer: %w", err)
	}
	p.recomputePrepared()
	p.group.applied = appliedRing{}
	p.group.recent.reset()
	if h, ok := p.group.core.Header(in.CommitOp); ok {
		in.Identity = h.Checksum
		p.group.state.persistCheckpoint(&h, log.NextOffset())
	}
	p.group.state.persistView(p.group.core.Durable(), nil)
	p.transfer.installs++
	p.store.statesInstalled++
	p.noteChanged()
	return nil
}

// installReplaces reports whether a state install replaces the file name in dir
// (one of segment.LogDirs): the partition plane's own files, which the transferred
// state stands for, and nothing else. They are
//
//	{base}.log, {base}.index          the segments (segment.IsLogFile)
//	offsets/consumers/{id}            the consumer offsets (segment.IsLogFile)
//	offsets/groups/{id}
//	partition.journal                 the durable journal (durable.go)
//	partition.state                   the group state (groupstate.go), removed last
//
// A partition directory holds files of others beside them: the server's purge.gen
// (partitionhost/record.go) says which metadata effects the directory reflects,
// so that each applies at most once. It must outlive a transfer of the data: without
// it, a purge applied again after a restart would empty the partition a second time,
// losing what was written after the first. This package's segments.deleted
// stays too, marked as installed over (deletesegments.go).
func installReplaces(dir, name string) bool {
	return segment.IsLogFile(dir, name) || dir == "" && (name == journalFileName || name == groupStateFileName)
}

// rejournal writes the journal's entries, the ops above the installed state, to
// the new journal file, durably: the core counts them durable (this replica may
// have acknowledged them), and the old file went with the old state.
func (p *Partition) rejournal() error {
	d := p.durable
	if d == nil || p.journal.len() == 0 {
		return nil
	}
	var records []byte
	for op := p.journal.firstOp; op <= p.journal.lastOp(); op++ {
		if e := p.journal.at(op); e != nil && e.present && !e.void {
			records = append(records, wire.HeaderBytes(&e.header)[:]...)
			records = append(records, e.body...)
		}
	}
	if len(records) == 0 {
		return nil
	}
	if err := d.ensureOpen(); err != nil {
		return err
	}
	if err := waitRequest(p.storage, &segment.Request{Op: segment.OpWrite, File: d.file, Offset: d.sizeBytes, Data: records}); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	d.sizeBytes += int64(len(records))
	if err := waitRequest(p.storage, &segment.Request{Op: segment.OpSync, File: d.file}); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

// cutTo truncates a file to size when it is longer, durably, and reports whether it
// was.
func (p *Partition) cutTo(name string, size uint64) (bool, error) {
	f, have, err := p.storage.Open(name, false, 0)
	if err != nil {
		return false, err
	}
	defer func() { _ = p.storage.Close(f) }()
	if uint64(have) <= size {
		return false, nil
	}
	if err := waitRequest(p.storage, &segment.Request{Op: segment.OpTruncate, File: f, Offset: int64(size)}); err != nil {
		return true, err
	}
	return true, waitRequest(p.storage, &segment.Request{Op: segment.OpSync, File: f})
}

// writeWhole writes a new file and makes it durable.
func writeWhole(st segment.Storage, name string, data []byte) error {
	f, _, err := st.Open(name, true, 0)
	if err != nil {
		return err
	}
	defer func() { _ = st.Close(f) }()
	if len(data) > 0 {
		if err := waitRequest(st, &segment.Request{Op: segment.OpWrite, File: f, Data: data}); err != nil {
			return err
		}
	}
	return waitRequest(st, &segment.Request{Op: segment.OpSync, File: f})
}
