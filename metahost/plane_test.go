package metahost

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/metafiles"
	"github.com/iggy-shard/iggy-shard/metaplane"
	"github.com/iggy-shard/iggy-shard/segment"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// planeHarness drives a metadata plane without a server: writes are submitted by
// hand and the file work runs inline when pump is called, so that several writes
// can be in flight in one Ready.
type planeHarness struct {
	t     testing.TB
	m     *Plane
	store *metafiles.SimStorage
	now   uint64
}

func openPlaneHarness(t testing.TB, store *metafiles.SimStorage, snapshotIntervalOps uint64) (*planeHarness, error) {
	// A single node's configuration (config.Default) but for the snapshot
	// interval.
	cfg := metaplane.Config{JournalSlots: metaplane.JournalSlotsMin, CheckpointIntervalOps: snapshotIntervalOps,
		RootUsername: "iggy", RootPassword: "iggy"}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := Open(log, store, "simdisk", cfg, 1_000_000)
	if err != nil {
		return nil, err
	}
	m.Files.Manual(true)
	return &planeHarness{t: t, m: m, store: store, now: 2_000_000}, nil
}

// pump does the plane's file work until none is left.
func (p *planeHarness) pump() {
	for range 10_000 {
		if p.m.Files.RunQueued() == 0 {
			return
		}
	}
	p.t.Fatal("the plane never ran out of work")
}

// writeOutcome is what a submitted write ended with.
type writeOutcome struct {
	done   bool
	err    error
	op     uint64
	result wire.ErrorCode
	epoch  uint64
}

func (p *planeHarness) submit(client wire.Uint128, request uint64, op wire.Operation, body []byte) *writeOutcome {
	o := &writeOutcome{}
	p.now += 10
	p.m.Propose(vsr.Proposal{Client: client, Request: request, Operation: op, UserID: metadata.RootUserID}, body, p.now, func(c *metaplane.Commit, err error) {
		if o.done {
			p.t.Fatalf("write of client %v request %d finished twice", client, request)
		}
		o.done, o.err = true, err
		if err == nil {
			o.op, o.epoch = c.Header.Op, c.Epoch
			switch {
			case c.Skipped:
				// No session to execute it in (metaplane's apply dedup).
				o.result = wire.ErrRequestAlreadyApplied
			case op != wire.OperationRegister && op != wire.OperationLogout:
				_, o.result, _ = wire.SplitResult(c.Frame[wire.HeaderSize:])
			}
		}
	})
	return o
}

func encode(t testing.TB, r interface{ Append([]byte) ([]byte, error) }) []byte {
	t.Helper()
	b, err := r.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func name(s string) wire.Identifier { return wire.StringIdentifier([]byte(s)) }

// TestPipelinedWritesCommitRefusals: writes admitted on the committed state and in
// flight together in one Ready; when an earlier one makes a later one invalid, the
// later commits a refusal (result-framed), and a restart that replays the journal
// reaches the same state and the same cached replies.
func TestPipelinedWritesCommitRefusals(t *testing.T) {
	p, err := openPlaneHarness(t, metafiles.NewSimStorage(segment.NewSimDisk(1)), 1000)
	if err != nil {
		t.Fatal(err)
	}
	topic := func(stream, topic string) []byte {
		return encode(t, &wire.CreateTopic{StreamID: name(stream), PartitionsCount: 1, Name: []byte(topic)})
	}
	// Set up, one at a time: stream "x" with topic "t" and group "g".
	setup := [][2]any{
		{wire.OperationCreateStream, createStreamBody(t, "x")},
		{wire.OperationCreateTopic, topic("x", "t")},
		{wire.OperationCreateStream, createStreamBody(t, "y")},
		{wire.OperationCreateTopic, topic("y", "t")},
		{wire.OperationCreateConsumerGroup, encode(t, &wire.CreateConsumerGroup{StreamID: name("y"), TopicID: name("t"), Name: []byte("g")})},
	}
	admin := wire.Uint128{Lo: 1000}
	p.submit(admin, 0, wire.OperationRegister, nil)
	p.pump()
	for i, s := range setup {
		o := p.submit(admin, uint64(i+1), s[0].(wire.Operation), s[1].([]byte))
		p.pump()
		if !o.done || o.err != nil || o.result != 0 {
			t.Fatalf("setup %d: %+v", i, o)
		}
	}
	pairs := []struct {
		what          string
		first, second wire.Operation
		firstBody     []byte
		secondBody    []byte
	}{
		{"two CreateStream of one name", wire.OperationCreateStream, wire.OperationCreateStream,
			createStreamBody(t, "dup"), createStreamBody(t, "dup")},
		{"CreateTopic on a stream deleted before it", wire.OperationDeleteStream, wire.OperationCreateTopic,
			encode(t, &wire.DeleteStream{StreamID: name("x")}), topic("x", "t2")},
		{"UpdateStream to a name taken before it", wire.OperationCreateStream, wire.OperationUpdateStream,
			createStreamBody(t, "taken"), encode(t, &wire.UpdateStream{StreamID: name("y"), Name: []byte("taken")})},
		{"CreatePartitions on a topic deleted before it", wire.OperationDeleteTopic, wire.OperationCreatePartitions,
			encode(t, &wire.DeleteTopic{StreamID: name("y"), TopicID: name("t")}),
			encode(t, &wire.CreatePartitions{StreamID: name("y"), TopicID: name("t"), PartitionsCount: 1})},
		{"two CreateTopic of one name", wire.OperationCreateTopic, wire.OperationCreateTopic,
			topic("y", "same"), topic("y", "same")},
		{"two DeleteStream of one stream", wire.OperationDeleteStream, wire.OperationDeleteStream,
			encode(t, &wire.DeleteStream{StreamID: name("dup")}), encode(t, &wire.DeleteStream{StreamID: name("dup")})},
	}
	clients := make([]wire.Uint128, 2*len(pairs))
	for i := range clients {
		clients[i] = wire.Uint128{Lo: uint64(i + 1)}
		p.submit(clients[i], 0, wire.OperationRegister, nil)
	}
	p.pump()
	// Everything in flight at once: each pair's two writes from two clients, all
	// proposed in one Ready, one journal write. They arrive while another write's
	// Ready is out, as they do under load (a write that finds no Ready out is
	// proposed in a Ready of its own).
	syncsBefore := p.store.Syncs
	blocker := p.submit(admin, uint64(len(setup)+1), wire.OperationCreateStream, createStreamBody(t, "blocker"))
	outcomes := make([]*writeOutcome, 0, len(clients))
	for i, pair := range pairs {
		outcomes = append(outcomes, p.submit(clients[2*i], 1, pair.first, pair.firstBody),
			p.submit(clients[2*i+1], 1, pair.second, pair.secondBody))
	}
	if n := p.m.WritesWaiting(); n != int64(len(outcomes)) {
		t.Fatalf("%d writes waiting, want %d", n, len(outcomes))
	}
	p.pump()
	if syncs := p.store.Syncs - syncsBefore; syncs != 2 || !blocker.done {
		t.Fatalf("%d writes in flight together took %d fdatasyncs besides the one before them, want 1", len(outcomes), syncs-1)
	}
	for i, pair := range pairs {
		first, second := outcomes[2*i], outcomes[2*i+1]
		if !first.done || first.err != nil || first.result != 0 {
			t.Errorf("%s: the first: %+v", pair.what, first)
		}
		if !second.done || second.err != nil || second.result == 0 || second.op != first.op+1 {
			t.Errorf("%s: the second did not commit a refusal right after the first: %+v", pair.what, second)
		}
	}

	// A restart replays the journal: the same state, the same cached replies.
	want := p.m.State().AppendSnapshot(nil, p.m.Applied().Op)
	wantTable := p.m.Table().AppendICT2(nil)
	p2, err := openPlaneHarness(t, metafiles.NewSimStorage(p.store.AfterCrash(1)), 1000)
	if err != nil {
		t.Fatal(err)
	}
	if got := p2.m.State().AppendSnapshot(nil, p2.m.Applied().Op); string(got) != string(want) {
		t.Fatal("the state after a replay differs from the state before the restart")
	}
	if got := p2.m.Table().AppendICT2(nil); string(got) != string(wantTable) {
		t.Fatal("the client table after a replay differs from the one before the restart")
	}
}

// TestMetaPlaneCrashes runs the metadata plane over the simulated disk with writes
// in flight and snapshots every few ops, crashes it at a seeded durable step (the
// unsynced journal tail lost, torn or kept), recovers, and checks: recovery never
// fails, every acknowledged write is there exactly once (its stream exists once,
// its request is a replay in the client table), nothing appears that was never
// submitted, and the recovered plane takes writes again, through three crashes.
func TestMetaPlaneCrashes(t *testing.T) {
	const seeds = 120
	crashes, ackedTotal := 0, 0
	defer func() { t.Logf("%d seeds, %d crashes, %d writes acknowledged", seeds, crashes, ackedTotal) }()
	for seed := uint64(1); seed <= seeds; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0x3E7A))
		store := metafiles.NewSimStorage(segment.NewSimDisk(seed))
		interval := uint64(1 + rng.IntN(6))
		p, err := openPlaneHarness(t, store, interval)
		if err != nil {
			t.Fatalf("seed %d: first open: %v", seed, err)
		}
		type write struct {
			client  wire.Uint128
			request uint64
			name    string
			o       *writeOutcome
		}
		var submitted []write
		acked := map[string]write{}
		nextRequest := map[wire.Uint128]uint64{}
		clients := []wire.Uint128{{Lo: 1}, {Lo: 2}, {Lo: 3}, {Lo: 4}}
		for round := range 3 {
			for _, c := range clients {
				p.submit(c, 0, wire.OperationRegister, nil)
			}
			p.pump()
			store.CrashAfter(1+rng.IntN(40), seed*31+uint64(round))
			for step := 0; step < 60 && !store.Crashed(); step++ {
				// One write per client in flight; a random subset of them per Ready.
				for _, c := range clients {
					if rng.IntN(2) == 0 {
						continue
					}
					nextRequest[c]++
					w := write{client: c, request: nextRequest[c], name: fmt.Sprintf("s%d-%d-%d", round, c.Lo, nextRequest[c])}
					w.o = p.submit(c, w.request, wire.OperationCreateStream, createStreamBody(t, w.name))
					submitted = append(submitted, w)
				}
				p.pump()
				for _, w := range submitted {
					if w.o.done && w.o.err == nil && w.o.result == 0 {
						acked[w.name] = w
					}
				}
			}
			if store.Crashed() {
				crashes++
			}
			after := store.AfterCrash(seed ^ uint64(round))
			store = metafiles.NewSimStorage(after)
			if p, err = openPlaneHarness(t, store, interval); err != nil {
				t.Fatalf("seed %d round %d: recovery after the crash: %v", seed, round, err)
			}
			seen := map[string]int{}
			for st := range p.m.State().Streams() {
				seen[st.Name]++
			}
			for name, w := range acked {
				if seen[name] != 1 {
					t.Fatalf("seed %d round %d: acknowledged stream %s found %d times after recovery", seed, round, name, seen[name])
				}
				if verdict, _ := p.m.Table().Preflight(w.client, epochOf(p.m.Table(), w.client), w.request, wire.Uint128{}); verdict == vsr.PreflightExecute {
					t.Fatalf("seed %d round %d: acknowledged request %d of client %v would execute again", seed, round, w.request, w.client)
				}
			}
			known := map[string]bool{}
			for _, w := range submitted {
				known[w.name] = true
			}
			for name, n := range seen {
				if !known[name] || n != 1 {
					t.Fatalf("seed %d round %d: stream %s (%d times) was never submitted once", seed, round, name, n)
				}
			}
			// Unacknowledged writes that survived are acknowledged by the state now;
			// what was lost is submitted again under a new request number.
			for _, w := range submitted {
				if seen[w.name] == 1 {
					acked[w.name] = w
				}
			}
			kept := submitted[:0]
			for _, w := range submitted {
				if seen[w.name] == 1 {
					kept = append(kept, w)
				}
			}
			submitted = kept
		}
		ackedTotal += len(acked)
	}
}

// epochOf is the client's session epoch in the table (0 when it has none).
func epochOf(t *vsr.ClientTable, client wire.Uint128) uint64 {
	epoch, _, _ := t.Session(client)
	return epoch
}

// TestWaitingWritesBounded: while a Ready's journal write is out, the writes that
// arrive wait in the plane's Driver, up to metaplane.WritesWaitingMax; the next one
// is refused at once as busy (the router answers 58) without being numbered. Once the write is done the
// waiting ones commit, a pipeline's depth per append and fdatasync, with snapshots
// taken between the batches, and all of them survive a restart.
func TestWaitingWritesBounded(t *testing.T) {
	p, err := openPlaneHarness(t, metafiles.NewSimStorage(segment.NewSimDisk(7)), 100)
	if err != nil {
		t.Fatal(err)
	}
	// The server's own writes (request 0): no session to execute them in.
	first := p.submit(wire.Uint128{Lo: 1 << 32}, 0, wire.OperationCreateStream, createStreamBody(t, "first"))
	if p.m.Files.Queued() != 1 || !p.m.Driver().ReadyOut() {
		t.Fatalf("%d journal tasks for the first write, want 1 (a Ready out)", p.m.Files.Queued())
	}
	waiting := make([]*writeOutcome, 0, metaplane.WritesWaitingMax)
	for i := range metaplane.WritesWaitingMax {
		waiting = append(waiting, p.submit(wire.Uint128{Lo: uint64(i + 1)}, 0, wire.OperationCreateStream, createStreamBody(t, fmt.Sprint("w", i))))
	}
	refused := p.submit(wire.Uint128{Lo: 1<<32 + 1}, 0, wire.OperationCreateStream, createStreamBody(t, "refused"))
	if !refused.done || refused.err != metaplane.ErrWritesBusy {
		t.Fatalf("a write beyond %d waiting: %+v, want refused as busy", metaplane.WritesWaitingMax, refused)
	}
	if p.m.Files.Queued() != 1 {
		t.Fatal("a second journal task while one is out")
	}
	syncsBefore, appendsBefore := p.store.Syncs, p.store.Appends
	p.pump()
	if !first.done || first.err != nil || first.result != 0 {
		t.Fatalf("the first write: %+v", first)
	}
	for i, o := range waiting {
		if !o.done || o.err != nil || o.result != 0 || o.op != first.op+1+uint64(i) {
			t.Fatalf("waiting write %d: %+v", i, o)
		}
	}
	batches := (metaplane.WritesWaitingMax + vsr.PipelineDepthDefault - 1) / vsr.PipelineDepthDefault
	appends, syncs := p.store.Appends-appendsBefore, p.store.Syncs-syncsBefore
	snapshots := syncs - appends
	if appends != batches+1 || snapshots < 1 {
		t.Fatalf("%d waiting writes took %d appends and %d snapshots, want %d appends (the first's, then one per pipeline) and some snapshots",
			len(waiting), appends, snapshots, batches+1)
	}
	if p.m.SnapshotOp() < first.op+uint64(len(waiting))-100 {
		t.Fatalf("snapshot at op %d after op %d: snapshots were not taken between the batches", p.m.SnapshotOp(), p.m.Applied().Op)
	}
	// The journal starts at the snapshot's op: Core.Recover anchors the log on it.
	var firstOp uint64
	if _, err := vsr.ScanJournal(p.store.Disk.ReadFile(metafiles.JournalFileName), metafiles.FrameMax, func(h *wire.PrepareHeader, _ []byte) error {
		if firstOp == 0 {
			firstOp = h.Op
		}
		return nil
	}); err != nil || firstOp != p.m.SnapshotOp() {
		t.Fatalf("the journal starts at op %d (%v), the snapshot is at op %d", firstOp, err, p.m.SnapshotOp())
	}
	p2, err := openPlaneHarness(t, metafiles.NewSimStorage(p.store.AfterCrash(7)), 100)
	if err != nil {
		t.Fatal(err)
	}
	streams := 0
	for range p2.m.State().Streams() {
		streams++
	}
	if streams != 1+len(waiting) {
		t.Fatalf("%d streams after a restart, want %d", streams, 1+len(waiting))
	}
}

// TestStateRecordRecovered: the state record (view, log view, commit max, view
// headers) comes back into the core at a restart, and new writes go on in the
// recorded view; a damaged record refuses the boot rather than start in view 0.
func TestStateRecordRecovered(t *testing.T) {
	p, err := openPlaneHarness(t, metafiles.NewSimStorage(segment.NewSimDisk(3)), 1000)
	if err != nil {
		t.Fatal(err)
	}
	c := wire.Uint128{Lo: 5}
	p.submit(c, 0, wire.OperationRegister, nil)
	p.pump()
	for i := range 3 {
		p.submit(c, uint64(i+1), wire.OperationCreateStream, createStreamBody(t, fmt.Sprint("s", i)))
		p.pump()
	}
	head, _ := p.m.Core().Header(p.m.Core().Op())
	disk := p.store.AfterCrash(3)
	disk.WriteFile(metafiles.StateFileName, metafiles.EncodeStateRecord(vsr.DurableState{View: 2, LogView: 2, CommitMax: head.Op}, []wire.PrepareHeader{head}))
	p2, err := openPlaneHarness(t, metafiles.NewSimStorage(disk), 1000)
	if err != nil {
		t.Fatal(err)
	}
	if v, lv := p2.m.Core().View(), p2.m.Core().LogView(); v != 2 || lv != 2 {
		t.Fatalf("recovered view %d, log view %d; want 2 and 2", v, lv)
	}
	o := p2.submit(c, 4, wire.OperationCreateStream, createStreamBody(t, "after"))
	p2.pump()
	if h, _ := p2.m.Core().Header(o.op); !o.done || o.err != nil || h.View != 2 || h.Parent != head.Checksum {
		t.Fatalf("a write after the restart: %+v, view %d", o, h.View)
	}

	record := metafiles.EncodeStateRecord(vsr.DurableState{View: 1}, nil)
	for _, bad := range [][]byte{record[:len(record)-1], append([]byte("XXXX"), record[4:]...), {}} {
		disk := p2.store.AfterCrash(4)
		disk.WriteFile(metafiles.StateFileName, bad)
		if _, err := openPlaneHarness(t, metafiles.NewSimStorage(disk), 1000); err == nil {
			t.Fatalf("a state record of %d damaged bytes was accepted", len(bad))
		}
	}
}

// TestSingleNodeRefusesACorruptJournalEntry: a single node has no peer to repair a
// corrupt synced entry from, so damage with intact entries after it is data loss:
// it refuses to start. A torn tail is still cut.
func TestSingleNodeRefusesACorruptJournalEntry(t *testing.T) {
	store := metafiles.NewSimStorage(segment.NewSimDisk(5))
	p, err := openPlaneHarness(t, store, 1000)
	if err != nil {
		t.Fatal(err)
	}
	p.submit(wire.Uint128{Lo: 1}, 0, wire.OperationRegister, nil)
	p.pump()
	for r := range 4 {
		p.submit(wire.Uint128{Lo: 1}, uint64(r+1), wire.OperationCreateStream, createStreamBody(t, fmt.Sprintf("single-%d", r)))
		p.pump()
	}
	raw := store.Disk.ReadFile(metafiles.JournalFileName)
	var offsets []int
	if _, err := vsr.ScanJournalHoles(raw, metafiles.FrameMax, func(_ *wire.PrepareHeader, _ []byte, offset int) error {
		offsets = append(offsets, offset)
		return nil
	}, nil); err != nil || len(offsets) != 5 {
		t.Fatalf("journal of %d entries: %v", len(offsets), err)
	}

	torn := append([]byte(nil), raw[:len(raw)-3]...)
	store.Disk.WriteFile(metafiles.JournalFileName, torn)
	p, err = openPlaneHarness(t, metafiles.NewSimStorage(store.Disk), 1000)
	if err != nil {
		t.Fatalf("a torn tail: %v", err)
	}
	if p.m.Applied().Op != 4 {
		t.Fatalf("after a torn tail the plane applied op %d, want 4", p.m.Applied().Op)
	}

	rotten := append([]byte(nil), raw...)
	rotten[offsets[2]+40] ^= 1
	store.Disk.WriteFile(metafiles.JournalFileName, rotten)
	if _, err := openPlaneHarness(t, metafiles.NewSimStorage(store.Disk), 1000); !errors.Is(err, vsr.ErrJournalCorrupt) {
		t.Fatalf("a corrupt entry before intact ones: %v, want %v", err, vsr.ErrJournalCorrupt)
	}
}

func createStreamBody(t testing.TB, name string) []byte {
	t.Helper()
	b, err := wire.AppendName(nil, []byte(name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
