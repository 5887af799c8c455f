package vsr

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/cockroachdb/datadriven"

	"github.com/iggy-shard/iggy-shard/wire"
)

// TestTraces runs the scripts of testdata/*.txt: a cluster of cores, each behind
// its Driver, driven step by step (requests, deliveries, drops, ticks, crashes and
// restarts), with every Ready printed as its host carries it out, in the Driver's
// order. The replicas' state machine is the replicated client table (a request's
// reply cached at apply, a retry answered from it).
//
// Commands (r is a replica):
//
//	cluster n=3 [pipeline=P slots=S]   a fresh cluster of n replicas
//	register r=0 client=7              the primary r proposes client 7's session
//	request r=0 client=7 req=1         client 7's request 1 at r: the client
//	                                   table's verdict, and the proposal if any
//	requests r=0 client=7 from=2 to=9  requests 2..9, each delivered until quiet,
//	                                   printed as a summary
//	preflight r=1 client=7 req=1       r's client table's verdict on the request
//	                                   (any replica: the tables are replicated)
//	deliver [from=] [to=] [cmd=] [n=] [quiet]
//	                                   the queued frames that match, in order, and
//	                                   what they cause, until none matches (or n)
//	drop [from=] [to=] [cmd=]          lose the queued frames that match
//	queue                              the frames in flight
//	tick [r=] [n=1]                    n ticks of every (or one) replica up
//	cut a=0 b=1 / heal                 lose every frame between a and b / none
//	crash r=0 / restart r=0            power loss (its journal is durable at each
//	                                   Persist) / recovery from the journal
//	status                             one line per replica
//	check [r=] [status=] [view=] [primary=] [op=] [commit=] [applied=]
//	                                   fails the test unless every replica (or r)
//	                                   up is so
//
// After every command the invariants are checked, and a violation fails the test
// whatever the expected output says (so -rewrite cannot bless it): commit points
// never go back on a running replica, nor the durable view across a restart; an
// op's committed header is the same on every replica at every time; a view has at
// most one primary; a client's request applies at most once.
func TestTraces(t *testing.T) {
	paths, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no trace scripts in testdata: %v", err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			var tc *traceCluster
			datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
				if d.Cmd == "cluster" {
					tc = newTraceCluster(t, d)
					return tc.flush()
				}
				if tc == nil {
					d.Fatalf(t, "%s before cluster", d.Cmd)
				}
				tc.t, tc.pos = t, d.Pos
				tc.run(d)
				tc.checkInvariants()
				return tc.flush()
			})
		})
	}
}

type traceCluster struct {
	t        *testing.T
	pos      string
	replicas []*traceReplica
	net      []traceFrame
	cut      map[[2]int]bool
	out      bytes.Buffer
	pipeline int
	slots    int
	// The invariants' memory.
	committed map[uint64]wire.Uint128
	primaries map[uint32]int
	// appliedRequests counts each (client, request) applied on each replica.
	appliedRequests map[[3]uint64]int
	token           uint64
}

type traceFrame struct {
	from, to int
	header   wire.GenericHeader
	body     []byte
}

type traceReplica struct {
	tc      *traceCluster
	id      int
	core    *Core
	driver  *Driver
	storage *memStorage
	up      bool
	boots   uint64
	// durable and viewHeaders are what the last Persist made durable.
	durable     DurableState
	viewHeaders []wire.PrepareHeader
	// The state machine: the client table, as of applied.
	table   *ClientTable
	applied Checkpoint
	// proposing is the request handed to the driver (Proposal).
	proposing testProposal
	// proposedOp and proposedErr are what became of it.
	proposedOp  uint64
	proposedErr error
	// indent prefixes what the replica prints.
	indent string
	// lastCommitMax and lastCommitMin are the commit points last seen in this
	// incarnation; lastDurableView across incarnations.
	lastCommitMax, lastCommitMin uint64
	lastDurableView              uint32
}

func newTraceCluster(t *testing.T, d *datadriven.TestData) *traceCluster {
	n, pipeline, slots := 3, 0, 64
	d.MaybeScanArgs(t, "n", &n)
	d.MaybeScanArgs(t, "pipeline", &pipeline)
	d.MaybeScanArgs(t, "slots", &slots)
	tc := &traceCluster{t: t, cut: map[[2]int]bool{}, pipeline: pipeline, slots: slots,
		committed: map[uint64]wire.Uint128{}, primaries: map[uint32]int{}, appliedRequests: map[[3]uint64]int{}}
	for i := 0; i < n; i++ {
		tc.replicas = append(tc.replicas, &traceReplica{tc: tc, id: i, storage: newMemStorage(slots)})
	}
	for _, r := range tc.replicas {
		r.boot(false)
	}
	if pipeline == 0 {
		pipeline = PipelineDepthDefault
	}
	fmt.Fprintf(&tc.out, "%d replicas, pipeline %d, journal %d slots; r0 leads view 0", n, pipeline, slots)
	return tc
}

func (r *traceReplica) config() CoreConfig {
	return CoreConfig{
		Config:       Config{Cluster: wire.ClusterID("test"), ReplicaID: uint8(r.id), ReplicaCount: uint8(len(r.tc.replicas)), Group: wire.MetadataGroup, PipelineDepth: r.tc.pipeline},
		Timing:       testTiming,
		JournalSlots: r.tc.slots,
		Storage:      r.storage,
		Incarnation:  wire.Uint128{Lo: r.boots, Hi: uint64(r.id) + 1},
		Sessions:     r,
	}
}

// boot starts the replica: fresh, or recovered from its journal and durable state.
func (r *traceReplica) boot(restart bool) {
	r.boots++
	c, err := NewCore(r.config())
	if err != nil {
		r.tc.t.Fatal(err)
	}
	r.table, r.applied = NewClientTable(64), Checkpoint{}
	if restart {
		rec := CoreRecovered{State: r.durable, ViewHeaders: slices.Clone(r.viewHeaders)}
		for i := range r.storage.headers {
			if h := r.storage.headers[i]; h.Op != 0 {
				rec.Headers = append(rec.Headers, h)
			}
		}
		slices.SortFunc(rec.Headers, func(a, b wire.PrepareHeader) int { return int(a.Op) - int(b.Op) })
		if err := c.Recover(rec); err != nil {
			r.tc.t.Fatal(err)
		}
	}
	r.core, r.up = c, true
	r.lastCommitMax, r.lastCommitMin = c.CommitMax(), c.CommitMin()
	r.driver = NewDriver(c, r, DriverConfig{})
	r.driver.Run()
}

// Sessions (the primary's read of its client table, for forwarded logins).
func (r *traceReplica) RegisterAllowed(client wire.Uint128, userID uint32) bool {
	return r.table.RegisterAllowed(client, userID)
}
func (r *traceReplica) Watermark(client wire.Uint128) uint64 { return r.table.Watermark(client) }

func (r *traceReplica) printf(format string, args ...any) {
	fmt.Fprintf(&r.tc.out, "%sr%d %s\n", r.indent, r.id, fmt.Sprintf(format, args...))
}

// --- the host: every call prints what the replica does ---

func (r *traceReplica) Persist(rd *Ready) bool {
	var parts []string
	for _, op := range rd.Discards {
		parts = append(parts, fmt.Sprintf("discard %d", op))
		if i := op % uint64(len(r.storage.headers)); r.storage.headers[i].Op == op {
			r.storage.headers[i] = wire.PrepareHeader{}
		}
	}
	if rd.Truncate {
		parts = append(parts, fmt.Sprintf("truncate above %d", rd.TruncateAbove))
		for i := range r.storage.headers {
			if r.storage.headers[i].Op > rd.TruncateAbove {
				r.storage.headers[i] = wire.PrepareHeader{}
			}
		}
	}
	if s := rd.State; s != nil {
		parts = append(parts, fmt.Sprintf("state view=%d log_view=%d commit=%d", s.View, s.LogView, s.CommitMax))
		r.durable = *s
	}
	if rd.ViewHeaders != nil {
		parts = append(parts, "view headers "+opRange(rd.ViewHeaders))
		r.viewHeaders = slices.Clone(rd.ViewHeaders)
	}
	if len(rd.Writes) > 0 {
		ops := make([]wire.PrepareHeader, len(rd.Writes))
		for i := range rd.Writes {
			ops[i] = rd.Writes[i].Header
			r.storage.put(&rd.Writes[i].Header, rd.Writes[i].Body)
		}
		parts = append(parts, "write "+opRange(ops))
	}
	r.printf("persist: %s", strings.Join(parts, ", "))
	return true
}

// opRange prints the ops of headers as a list of runs: "4..6", "3, 5".
func opRange(headers []wire.PrepareHeader) string {
	ops := make([]uint64, 0, len(headers))
	for i := range headers {
		ops = append(ops, headers[i].Op)
	}
	slices.Sort(ops)
	var runs []string
	for i := 0; i < len(ops); {
		j := i
		for j+1 < len(ops) && ops[j+1] == ops[j]+1 {
			j++
		}
		if j == i {
			runs = append(runs, strconv.FormatUint(ops[i], 10))
		} else {
			runs = append(runs, fmt.Sprintf("%d..%d", ops[i], ops[j]))
		}
		i = j + 1
	}
	if len(runs) == 0 {
		return "none"
	}
	return strings.Join(runs, ", ")
}

func (r *traceReplica) Send(m *Message) {
	tc := r.tc
	lost := ""
	if tc.cut[[2]int{r.id, int(m.To)}] {
		lost = " (lost: cut)"
	} else {
		tc.net = append(tc.net, traceFrame{from: r.id, to: int(m.To), header: m.Header, body: slices.Clone(m.Body)})
	}
	r.printf("-> r%d %s%s", m.To, describe(&m.Header, m.Body), lost)
}

func (r *traceReplica) Apply(committed []wire.PrepareHeader) bool {
	tc := r.tc
	for i := range committed {
		h := &committed[i]
		if h.Op != r.applied.Op+1 {
			tc.violation("r%d applies op %d after op %d", r.id, h.Op, r.applied.Op)
		}
		if want, ok := tc.committed[h.Op]; ok && want != h.Checksum {
			tc.violation("r%d applies op %d as %x, committed elsewhere as %x", r.id, h.Op, h.Checksum.Lo, want.Lo)
		}
		tc.committed[h.Op] = h.Checksum
		var rh wire.ReplyHeader
		r.core.FillReply(&rh, h)
		reply := wire.HeaderBytes(&rh)[:]
		if h.Operation == wire.OperationRegister {
			epoch := r.table.CommitRegister(h.Client, h.UserID, h.Op, reply)
			r.printf("apply op %d: register c%d, session %d", h.Op, h.Client.Lo, epoch)
		} else {
			key := [3]uint64{uint64(r.id), h.Client.Lo, h.Request}
			if tc.appliedRequests[key]++; tc.appliedRequests[key] > 1 {
				tc.violation("r%d applies request %d of c%d twice", r.id, h.Request, h.Client.Lo)
			}
			r.table.CommitRequest(h.Client, h.Request, h.RequestChecksum, h.Op, reply)
			r.printf("apply op %d: c%d request %d, reply cached", h.Op, h.Client.Lo, h.Request)
		}
		r.applied = Checkpoint{Op: h.Op, Identity: h.Checksum, Timestamp: h.Timestamp}
	}
	return true
}

// The transferred state: the applied op's checkpoint and the client table.
func (r *traceReplica) OfferState(req StateRequest) (uint64, []Artifact) {
	b := binary.LittleEndian.AppendUint64(nil, r.applied.Op)
	b = binary.LittleEndian.AppendUint64(b, r.applied.Identity.Lo)
	b = binary.LittleEndian.AppendUint64(b, r.applied.Identity.Hi)
	b = binary.LittleEndian.AppendUint64(b, r.applied.Timestamp)
	r.printf("offer r%d the state at op %d", req.From, r.applied.Op)
	return r.applied.Op, []Artifact{{Kind: wire.ArtifactClientTable, Frontier: r.applied.Op, Bytes: r.table.AppendICT2(b)}}
}

func (r *traceReplica) Install(in *StateInstall) bool {
	b := in.Artifacts[0].Bytes
	cp := Checkpoint{Op: binary.LittleEndian.Uint64(b), Identity: wire.Uint128{Lo: binary.LittleEndian.Uint64(b[8:]), Hi: binary.LittleEndian.Uint64(b[16:])}, Timestamp: binary.LittleEndian.Uint64(b[24:])}
	table, err := DecodeICT2(b[32:], 64)
	if err != nil || cp.Op != in.CommitOp {
		r.tc.violation("r%d: a state of op %d does not install: %v", r.id, in.CommitOp, err)
		return true
	}
	if want, ok := r.tc.committed[cp.Op]; !ok || want != cp.Identity {
		r.tc.violation("r%d installs a state at op %d that is not of the committed log", r.id, cp.Op)
	}
	r.table, r.applied = table, cp
	in.Identity = cp.Identity
	r.printf("install the state at op %d", cp.Op)
	return true
}

func (r *traceReplica) Forwarded(outcomes []ForwardOutcome) {
	for _, o := range outcomes {
		r.printf("forward of c%d answered: outcome %d", o.Client.Lo, o.Outcome)
	}
}

func (r *traceReplica) Proposal(uint64) (Proposal, []byte, uint64) {
	return r.proposing.p, r.proposing.body, r.proposing.now
}

// Proposed comes before the Readies of the proposal are carried out.
func (r *traceReplica) Proposed(_, op uint64, err error) {
	r.proposedOp, r.proposedErr = op, err
	if err != nil {
		r.printf("does not propose it: %v", err)
		return
	}
	if p := r.proposing.p; p.Operation == wire.OperationRegister {
		r.printf("proposes op %d: register c%d", op, p.Client.Lo)
	} else {
		r.printf("proposes op %d: c%d request %d", op, p.Client.Lo, p.Request)
	}
}

func (r *traceReplica) Advanced() {}

// describe prints a frame compactly: its command, view and what it is about.
func describe(h *wire.GenericHeader, body []byte) string {
	v := fmt.Sprintf("%v v%d", h.Command, h.View)
	switch h.Command {
	case wire.CommandPrepare, wire.CommandRepairPrepare:
		p := h.Prepare()
		return fmt.Sprintf("%s op=%d commit=%d", v, p.Op, p.Commit)
	case wire.CommandPrepareOk:
		return fmt.Sprintf("%s op=%d", v, h.PrepareOk().Op)
	case wire.CommandCommit:
		return fmt.Sprintf("%s commit=%d", v, h.Commit().Commit)
	case wire.CommandDoViewChange:
		d := h.DoViewChange()
		return fmt.Sprintf("%s log_view=%d op=%d commit=%d headers=%d", v, d.LogView, d.Op, d.Commit, len(body)/wire.HeaderSize)
	case wire.CommandStartView:
		s := h.StartView()
		return fmt.Sprintf("%s op=%d commit=%d headers=%d", v, s.Op, s.Commit, len(body)/wire.HeaderSize)
	case wire.CommandRequestPrepares:
		q := h.RequestPrepares()
		return fmt.Sprintf("%s ops %d..%d", v, q.FromOp, q.ToOp)
	case wire.CommandRepairDone, wire.CommandRangeEvicted:
		return fmt.Sprintf("%s op=%d", v, h.RepairRange().Op)
	case wire.CommandStateTransferTarget:
		s := h.StateTransferTarget()
		return fmt.Sprintf("%s commit_op=%d available=%d", v, s.CommitOp, s.Available)
	case wire.CommandRequestStateChunk:
		q := h.RequestStateChunk()
		return fmt.Sprintf("%s artifact=%d offset=%d", v, q.Artifact, q.Offset)
	case wire.CommandStateChunk:
		return fmt.Sprintf("%s artifact=%d offset=%d bytes=%d", v, h.StateChunk().Artifact, h.StateChunk().Offset, len(body))
	}
	return v
}

// --- commands ---

func (tc *traceCluster) flush() string {
	s := strings.TrimRight(tc.out.String(), "\n")
	tc.out.Reset()
	if s == "" {
		return "ok"
	}
	return s
}

func (tc *traceCluster) violation(format string, args ...any) {
	tc.t.Errorf("%s: invariant violated: %s", tc.pos, fmt.Sprintf(format, args...))
	fmt.Fprintf(&tc.out, "VIOLATION: %s\n", fmt.Sprintf(format, args...))
}

// traceDraft (VSR_TRACE_DRAFT=1) prints a failed check instead of failing the
// test, so that a script being written can be run to its end. The printed
// FAILED line then fails every run without it: it cannot be blessed.
var traceDraft = os.Getenv("VSR_TRACE_DRAFT") == "1"

// failed is a check that did not hold.
func (tc *traceCluster) failed(format string, args ...any) {
	fmt.Fprintf(&tc.out, "FAILED: %s\n", fmt.Sprintf(format, args...))
	if !traceDraft {
		tc.t.Errorf("%s: check failed: %s", tc.pos, fmt.Sprintf(format, args...))
	}
}

func intArg(t *testing.T, d *datadriven.TestData, key string, def int) int {
	v := def
	d.MaybeScanArgs(t, key, &v)
	return v
}

func (tc *traceCluster) replica(d *datadriven.TestData) *traceReplica {
	i := intArg(tc.t, d, "r", -1)
	if i < 0 || i >= len(tc.replicas) {
		d.Fatalf(tc.t, "%s needs r= of a replica", d.Cmd)
	}
	return tc.replicas[i]
}

func (tc *traceCluster) run(d *datadriven.TestData) {
	t := tc.t
	switch d.Cmd {
	case "register":
		r := tc.replica(d)
		client := uint64(intArg(t, d, "client", 1))
		r.propose(Proposal{Client: wire.Uint128{Lo: client}, Operation: wire.OperationRegister, UserID: 1}, nil)
	case "request":
		r := tc.replica(d)
		r.request(uint64(intArg(t, d, "client", 1)), uint64(intArg(t, d, "req", 1)))
	case "preflight":
		r := tc.replica(d)
		client, request := uint64(intArg(t, d, "client", 1)), uint64(intArg(t, d, "req", 1))
		r.preflight(client, request)
	case "requests":
		r := tc.replica(d)
		client := uint64(intArg(t, d, "client", 1))
		from, to := intArg(t, d, "from", 1), intArg(t, d, "to", 1)
		out := tc.out.Len()
		for req := from; req <= to; req++ {
			r.request(client, uint64(req))
			tc.deliver(-1, -1, "", -1)
		}
		tc.out.Truncate(out)
		fmt.Fprintf(&tc.out, "requests %d..%d of c%d at r%d delivered: ", from, to, client, r.id)
		tc.status()
	case "deliver":
		from, to, n := intArg(t, d, "from", -1), intArg(t, d, "to", -1), intArg(t, d, "n", -1)
		cmd := ""
		d.MaybeScanArgs(t, "cmd", &cmd)
		out := tc.out.Len()
		delivered := tc.deliver(from, to, cmd, n)
		if d.HasArg("quiet") {
			tc.out.Truncate(out)
			fmt.Fprintf(&tc.out, "delivered %d frames\n", delivered)
		}
	case "drop":
		from, to := intArg(t, d, "from", -1), intArg(t, d, "to", -1)
		cmd := ""
		d.MaybeScanArgs(t, "cmd", &cmd)
		kept := tc.net[:0]
		for _, f := range tc.net {
			if f.matches(from, to, cmd) {
				fmt.Fprintf(&tc.out, "dropped r%d -> r%d %s\n", f.from, f.to, describe(&f.header, f.body))
				continue
			}
			kept = append(kept, f)
		}
		tc.net = kept
	case "queue":
		for _, f := range tc.net {
			fmt.Fprintf(&tc.out, "r%d -> r%d %s\n", f.from, f.to, describe(&f.header, f.body))
		}
	case "tick":
		n := intArg(t, d, "n", 1)
		only := intArg(t, d, "r", -1)
		for k := 0; k < n; k++ {
			for _, r := range tc.replicas {
				if r.up && (only < 0 || only == r.id) {
					r.driver.Tick()
				}
			}
		}
	case "cut":
		a, b := intArg(t, d, "a", -1), intArg(t, d, "b", -1)
		tc.cut[[2]int{a, b}], tc.cut[[2]int{b, a}] = true, true
	case "heal":
		clear(tc.cut)
	case "crash":
		r := tc.replica(d)
		r.driver.Stop(nil)
		r.up = false
		kept := tc.net[:0]
		for _, f := range tc.net {
			if f.to != r.id {
				kept = append(kept, f)
			}
		}
		tc.net = kept
		fmt.Fprintf(&tc.out, "r%d crashed: durable view=%d log_view=%d commit=%d, journal %s\n", r.id, r.durable.View, r.durable.LogView, r.durable.CommitMax, r.journal())
	case "restart":
		r := tc.replica(d)
		if r.durable.View < r.lastDurableView {
			tc.violation("r%d restarts in durable view %d after view %d", r.id, r.durable.View, r.lastDurableView)
		}
		r.boot(true)
		fmt.Fprintf(&tc.out, "r%d restarted: %s\n", r.id, r.line())
	case "status":
		tc.status()
	case "check":
		tc.check(d)
	default:
		d.Fatalf(t, "unknown command %s", d.Cmd)
	}
}

func (f *traceFrame) matches(from, to int, cmd string) bool {
	return (from < 0 || f.from == from) && (to < 0 || f.to == to) && (cmd == "" || f.header.Command.String() == cmd)
}

// deliver delivers the queued frames that match, in order, with what each causes
// (the frames it causes join the queue), until none matches or n are delivered.
func (tc *traceCluster) deliver(from, to int, cmd string, n int) int {
	delivered := 0
	for limit := 0; n < 0 || delivered < n; limit++ {
		if limit == 10000 {
			tc.t.Fatalf("%s: still delivering after 10000 frames", tc.pos)
		}
		k := slices.IndexFunc(tc.net, func(f traceFrame) bool { return f.matches(from, to, cmd) })
		if k < 0 {
			break
		}
		f := tc.net[k]
		tc.net = slices.Delete(tc.net, k, k+1)
		delivered++
		r := tc.replicas[f.to]
		fmt.Fprintf(&tc.out, "r%d -> r%d %s\n", f.from, f.to, describe(&f.header, f.body))
		if !r.up || tc.cut[[2]int{f.from, f.to}] {
			fmt.Fprintf(&tc.out, "  lost: r%d is down or cut off\n", f.to)
			continue
		}
		r.step(&f)
	}
	return delivered
}

// step gives r a frame and prints what it did, or why it dropped it.
func (r *traceReplica) step(f *traceFrame) {
	frame := make([]byte, wire.HeaderSize+len(f.body)+wire.HeaderAlignment)
	off := (wire.HeaderAlignment - int(uintptr(unsafe.Pointer(&frame[0]))%wire.HeaderAlignment)) % wire.HeaderAlignment
	frame = frame[off : off+wire.HeaderSize+len(f.body)]
	f.header.Put(frame)
	copy(frame[wire.HeaderSize:], f.body)
	h, err := wire.DecodeReplicaHeader(frame, 1<<20)
	if err != nil {
		r.tc.t.Fatalf("%s: r%d sent a frame the decoder refuses: %v", r.tc.pos, f.from, err)
	}
	before := r.core.Drops()
	r.indent = "  "
	err = r.driver.Step(h, frame[wire.HeaderSize:])
	r.indent = ""
	if err != nil {
		fmt.Fprintf(&r.tc.out, "  r%d refuses it: %v\n", r.id, err)
	}
	after := r.core.Drops()
	for reason := range after {
		if after[reason] > before[reason] {
			fmt.Fprintf(&r.tc.out, "  r%d drops it: %v\n", r.id, DropReason(reason))
		}
	}
}

// preflight prints r's client table's verdict on client's request.
func (r *traceReplica) preflight(client, request uint64) {
	id := wire.Uint128{Lo: client}
	body := []byte(fmt.Sprintf("c%d#%d", client, request))
	session, _, _ := r.table.Session(id)
	verdict, reply := r.table.Preflight(id, session, request, wire.RequestChecksum(body))
	if verdict == PreflightReplay {
		var rh wire.ReplyHeader
		copy(wire.HeaderBytes(&rh)[:], reply)
		fmt.Fprintf(&r.tc.out, "r%d client table: c%d session %d, request %d: Replay, the reply of op %d\n", r.id, client, session, request, rh.Op)
		return
	}
	fmt.Fprintf(&r.tc.out, "r%d client table: c%d session %d, request %d: %v\n", r.id, client, session, request, verdict)
}

// request is a client's request at r: the client table's verdict, then the
// proposal when the request is new.
func (r *traceReplica) request(client, request uint64) {
	id := wire.Uint128{Lo: client}
	body := []byte(fmt.Sprintf("c%d#%d", client, request))
	checksum := wire.RequestChecksum(body)
	session, _, _ := r.table.Session(id)
	verdict, reply := r.table.Preflight(id, session, request, checksum)
	switch {
	case !r.core.IsPrimary():
		fmt.Fprintf(&r.tc.out, "r%d is not the primary: refused (58)\n", r.id)
	case verdict == PreflightReplay:
		var rh wire.ReplyHeader
		copy(wire.HeaderBytes(&rh)[:], reply)
		fmt.Fprintf(&r.tc.out, "r%d answers from the reply cache: the reply of op %d (request %d); nothing proposed\n", r.id, rh.Op, rh.Request)
	case verdict != PreflightExecute:
		fmt.Fprintf(&r.tc.out, "r%d client table: %v; nothing proposed\n", r.id, verdict)
	case r.core.InPipeline(id):
		fmt.Fprintf(&r.tc.out, "r%d: c%d has a request in the pipeline; nothing proposed\n", r.id, client)
	default:
		r.propose(Proposal{Client: id, Request: request, RequestChecksum: checksum, Operation: wire.OperationCreateStream, UserID: 1}, body)
	}
}

func (r *traceReplica) propose(p Proposal, body []byte) {
	r.tc.token++
	r.proposing = testProposal{p: p, body: body, now: r.tc.token}
	r.proposedOp, r.proposedErr = 0, nil
	if err := r.driver.Propose(r.tc.token); err != nil {
		fmt.Fprintf(&r.tc.out, "r%d refuses the proposal: %v\n", r.id, err)
	}
}

func (r *traceReplica) journal() string {
	var hs []wire.PrepareHeader
	for _, h := range r.storage.headers {
		if h.Op != 0 {
			hs = append(hs, h)
		}
	}
	return opRange(hs)
}

func (r *traceReplica) line() string {
	if !r.up {
		return fmt.Sprintf("r%d down", r.id)
	}
	c := r.core
	role := "backup"
	if c.IsPrimary() {
		role = "primary"
	}
	return fmt.Sprintf("r%d %v view %d %s: op %d, commit %d, applied %d", r.id, c.Status(), c.View(), role, c.Op(), c.CommitMax(), c.CommitMin())
}

func (tc *traceCluster) status() {
	for _, r := range tc.replicas {
		fmt.Fprintf(&tc.out, "%s\n", r.line())
	}
}

// check fails the test unless every replica up (or r) has the state asked for.
func (tc *traceCluster) check(d *datadriven.TestData) {
	only := intArg(tc.t, d, "r", -1)
	checked := 0
	if strings.Contains(d.Expected, "FAILED") {
		tc.t.Errorf("%s: a script's expected output holds a failed check", d.Pos)
	}
	for _, r := range tc.replicas {
		if !r.up || only >= 0 && r.id != only {
			continue
		}
		checked++
		c := r.core
		want := func(key string, got int) {
			if v := intArg(tc.t, d, key, -1); v >= 0 && v != got {
				tc.failed("r%d %s %d, want %d", r.id, key, got, v)
			}
		}
		want("view", int(c.View()))
		want("op", int(c.Op()))
		want("commit", int(c.CommitMax()))
		want("applied", int(c.CommitMin()))
		want("primary", int(c.Primary()))
		status := ""
		if d.MaybeScanArgs(tc.t, "status", &status); status != "" && status != c.Status().String() {
			tc.failed("r%d is %v, want %s", r.id, c.Status(), status)
		}
	}
	if checked == 0 {
		tc.failed("no replica up")
	}
	fmt.Fprintf(&tc.out, "ok: %d replicas checked\n", checked)
}

// checkInvariants runs after every command (see TestTraces).
func (tc *traceCluster) checkInvariants() {
	for _, r := range tc.replicas {
		if !r.up {
			continue
		}
		c := r.core
		if c.CommitMax() < r.lastCommitMax || c.CommitMin() < r.lastCommitMin {
			tc.violation("r%d commit went back from %d/%d to %d/%d", r.id, r.lastCommitMin, r.lastCommitMax, c.CommitMin(), c.CommitMax())
		}
		r.lastCommitMax, r.lastCommitMin = c.CommitMax(), c.CommitMin()
		r.lastDurableView = max(r.lastDurableView, r.durable.View)
		if c.IsPrimary() {
			if other, ok := tc.primaries[c.View()]; ok && other != r.id {
				tc.violation("view %d has two primaries: r%d and r%d", c.View(), other, r.id)
			}
			tc.primaries[c.View()] = r.id
		}
		for op := c.CommitMin(); op >= 1 && op+uint64(tc.slots) > c.CommitMin(); op-- {
			h, ok := c.Header(op)
			if !ok {
				break
			}
			if want, seen := tc.committed[op]; seen && want != h.Checksum {
				tc.violation("r%d holds op %d as %x, committed as %x", r.id, op, h.Checksum.Lo, want.Lo)
			}
		}
	}
}
