package server

import (
	"unsafe"

	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// The primary's prepares leave from their clients' request frames. A prepare's
// body on the primary is the batch in the request frame its client sent
// (partition/leaderlend.go), which the job holds until the send is answered and
// recycled. The store tells the outbox whose frame it is (SendPrepareOf), and
// the frame is lent to the replica connection (shard.SendReplicaLentParts)
// instead of copied into an arena buffer per backup: on a primary taking 1 MB
// batches that copy was 5-10% of its CPU (BenchmarkPinnedProduce).
//
// The frame then has two kinds of users: the job (the journal, its file write,
// the log's write and the reply all end before the job is recycled) and each
// lent send (until the kernel no longer reads it: sent, or its connection
// closed). It goes back to the arena when the last of them is done: a pin count
// per frame (lentFrame.sends) and a flag for the job's recycle that came while
// sends were out. A pin count rather than the partition's own bookkeeping: the
// sends end on the runtime's completions, after the journal and the log may
// have let go of the body, and only the server holds the frame.
//
// The partition's owner lends (the lender) and its sends end on the shard that
// owns the peer's replica connection, which may be another: the shard runtime
// passes the lent frame there and gives each send's release back to the lender
// (shard/replica_lend.go), whose pin counts are its own, so every release below
// runs on the lender's shard. The job's home, whose arena the frame is in and
// which releases it, may be a third shard: the lender then answers the job with
// msgReplyLent while sends are out, and tells the home with msgLentDone once the
// last is done (both through the same queue, in order); the home recycles the
// job after both its answer and that. A call's request (HTTP: the caller's
// memory, given back at the answer) is copied as before. So is a small prepare
// (prepareLendMinBytes), and one past the bound on lent sends
// (prepareLendSendsMax). A peer down or a full queue drops the prepare as a
// copy's send would (consensus retransmits). A frame that a slow peer's queue
// holds counts in its connection's retained bytes, so that connection reads no
// more past its bound: the back-pressure a copy's arena buffer would have put on
// every connection, on the one client whose batch it is. A TLS replica link is a
// socketpair to its terminator here, which the kernel copies from as from a
// socket.

// prepareLendMinBytes is the smallest prepare body lent rather than copied. At
// 64 KiB, the smallest frame shard's BenchmarkReplicaThroughput measures, a lent
// send already moves more than a copied one; below it the copy costs little,
// while a lent send is two parts on the wire (header and body) and a frame held
// past its reply.
const prepareLendMinBytes = 64 << 10

// prepareLendSendsMax bounds the sends a shard has lent at once. A lent frame is a
// request frame (in the arena's large class for a default batch) held until its
// sends are done, which the connection's later requests need to be received
// into; past the bound a prepare is copied, as before.
const prepareLendSendsMax = 64

// leaderLender is a shard's lent prepares: the frames they hold, by job, and the
// records of sends and frames free for reuse.
type leaderLender struct {
	h *handler
	// frames are the frames with lent sends out, by their job.
	frames     map[*job]*lentFrame
	freeFrames []*lentFrame
	freeSends  []*lentSend
	sendsOut   int
	// lent counts the prepares sent from their frame, copied those
	// SendPrepareOf copied, outlived the jobs answered or recycled while sends
	// of their frame were out: for tests.
	lent, copied, outlived uint64

	// awaiting are the jobs of this shard answered by msgReplyLent, whose
	// frames another shard's lent sends read, until msgLentDone.
	awaiting map[*job]loanWait

	// sendLent, recycleJob and tellHome are the shard's SendReplicaLentParts,
	// the handler's recycleNow and the post of msgLentDone to a job's home;
	// tests replace them.
	sendLent   func(peer uint8, header, body []byte, done shard.Releaser) error
	recycleJob func(j *job)
	tellHome   func(j *job)
}

// loanWait is what a home shard waits for before it recycles a job answered by
// msgReplyLent: its own recycle, and the end of the loan (msgLentDone).
type loanWait struct {
	recycled, done bool
}

// lentFrame is a job's request frame while lent sends read it.
type lentFrame struct {
	job   *job
	sends int
	// recycled: the job was done with it while sends were out; the last one
	// recycles it. remote: the job was answered to its home on another shard
	// while sends were out; the last one tells it (msgLentDone).
	recycled, remote bool
}

// lentSend is one lent send of a prepare: its own copy of the header, which the
// send seals in place, and the frame whose body it sends. header comes first: a
// record of this size is 16-byte aligned, as the send needs the header to be.
type lentSend struct {
	header wire.GenericHeader
	frame  *lentFrame
	lender *leaderLender
}

func (l *leaderLender) init(h *handler) {
	l.h = h
	l.frames = make(map[*job]*lentFrame)
	l.awaiting = make(map[*job]loanWait)
	l.sendLent = h.shard.SendReplicaLentParts
	l.recycleJob = h.recycleNow
	l.tellHome = func(j *job) { h.post(j.Conn.Shard(), shard.Message{Conn: j.Conn, Kind: msgLentDone, Payload: j}) }
}

// SendPrepareOf implements partition.PrepareOutbox: the prepare leaves from its
// client's request frame when it can (lend), else copied (copyReplica).
func (h *handler) SendPrepareOf(k partition.Key, m *vsr.Message, done partition.SendCompletion, token uint64) {
	if done != partition.SendCompletion(h.owned) {
		h.SendReplica(k, m)
		return
	}
	if j := h.owned.InflightJob(token); j == nil || !h.leader.lend(j, m) {
		h.leader.copied++
		h.copyReplica(m)
	}
}

// lend sends m from j's request frame, and reports whether it did (or dropped it
// as a copy's send would have); false: copy it.
func (l *leaderLender) lend(j *job, m *vsr.Message) bool {
	if len(m.Body) < prepareLendMinBytes || l.sendsOut >= prepareLendSendsMax || j.Call != nil ||
		!within(j.Frame.Body, m.Body) {
		return false
	}
	f := l.frames[j]
	if f == nil {
		f = l.takeFrame(j)
	}
	s := l.takeSend()
	s.header, s.frame = m.Header, f
	err := l.sendLent(m.To, s.header.Bytes()[:], m.Body, s)
	switch err {
	case nil:
		f.sends++
		l.sendsOut++
		l.frames[j] = f
		l.lent++
		return true
	case shard.ErrReplicaPeerDown, shard.ErrReplicaQueueFull:
		l.giveBack(s, f)
		return true // dropped and counted, as SendReplica would have
	default:
		// A frame SendReplica refuses too, and logs.
		l.giveBack(s, f)
		return false
	}
}

// within reports whether inner lies in outer's memory.
func within(outer, inner []byte) bool {
	if len(outer) == 0 || len(inner) == 0 {
		return false
	}
	o, i := uintptr(unsafe.Pointer(unsafe.SliceData(outer))), uintptr(unsafe.Pointer(unsafe.SliceData(inner)))
	return i >= o && i+uintptr(len(inner)) <= o+uintptr(len(outer))
}

func (l *leaderLender) takeFrame(j *job) *lentFrame {
	if n := len(l.freeFrames); n > 0 {
		f := l.freeFrames[n-1]
		l.freeFrames = l.freeFrames[:n-1]
		f.job = j
		return f
	}
	return &lentFrame{job: j}
}

func (l *leaderLender) takeSend() *lentSend {
	if n := len(l.freeSends); n > 0 {
		s := l.freeSends[n-1]
		l.freeSends = l.freeSends[:n-1]
		return s
	}
	return &lentSend{lender: l}
}

// giveBack frees a send record, and its frame's when no send holds the frame.
func (l *leaderLender) giveBack(s *lentSend, f *lentFrame) {
	s.frame = nil
	l.freeSends = append(l.freeSends, s)
	if f.sends > 0 {
		return
	}
	if l.frames[f.job] == f {
		delete(l.frames, f.job)
	}
	*f = lentFrame{}
	l.freeFrames = append(l.freeFrames, f)
}

// Release implements shard.Releaser: the kernel no longer reads the send. It runs
// on the lender's shard, wherever the send went. The last send of a frame whose
// job was recycled meanwhile recycles it now.
func (s *lentSend) Release() {
	l, f := s.lender, s.frame
	if f == nil || f.sends <= 0 {
		panic("server: a lent prepare released twice")
	}
	f.sends--
	l.sendsOut--
	j, recycled, remote := f.job, f.recycled && f.sends == 0, f.remote && f.sends == 0
	l.giveBack(s, f)
	switch {
	case recycled:
		l.recycleJob(j)
	case remote:
		l.tellHome(j)
	}
}

// replyingLent reports whether j, answered now on the partition's owner, goes
// to a home on another shard while lent sends read its frame: it is answered
// by msgReplyLent, and the last send tells its home.
func (l *leaderLender) replyingLent(j *job) bool {
	if len(l.frames) == 0 || j.Conn.Shard() == l.h.index {
		return false
	}
	f := l.frames[j]
	if f == nil {
		return false
	}
	f.remote = true
	l.outlived++
	return true
}

// awaitLoan notes that j, answered by msgReplyLent, waits for msgLentDone.
func (l *leaderLender) awaitLoan(j *job) { l.awaiting[j] = loanWait{} }

// awaitsLoan reports whether j, being recycled, waits for msgLentDone still,
// and if so leaves its recycle to it.
func (l *leaderLender) awaitsLoan(j *job) bool {
	if len(l.awaiting) == 0 {
		return false
	}
	w, ok := l.awaiting[j]
	switch {
	case !ok:
		return false
	case w.recycled:
		panic("server: a job with lent prepares recycled twice")
	case w.done:
		delete(l.awaiting, j)
		return false
	}
	l.awaiting[j] = loanWait{recycled: true}
	return true
}

// loanDone takes msgLentDone: j's frame is its home's alone again, recycled now
// if the job was.
func (l *leaderLender) loanDone(j *job) {
	w, ok := l.awaiting[j]
	switch {
	case !ok:
		panic("server: msgLentDone for a job not answered by msgReplyLent")
	case w.recycled:
		delete(l.awaiting, j)
		l.recycleJob(j)
	default:
		l.awaiting[j] = loanWait{done: true}
	}
}

// holds reports whether lent sends still read j's frame, and if so marks it for
// the last of them to recycle: j's own use of its frame is over.
func (l *leaderLender) holds(j *job) bool {
	if len(l.frames) == 0 {
		return false
	}
	f := l.frames[j]
	if f == nil {
		return false
	}
	if f.recycled {
		panic("server: a job with lent prepares recycled twice")
	}
	f.recycled = true
	l.outlived++
	return true
}

// lentPrepares is what a shard's lender did since it started, and the lent sends
// out now.
type lentPrepares struct {
	lent, copied, outlived uint64
	out                    int
}

// LentPrepares reports what the lender did, for tests.
func (l *leaderLender) LentPrepares() lentPrepares {
	return lentPrepares{lent: l.lent, copied: l.copied, outlived: l.outlived, out: l.sendsOut}
}

// poisonReleasedFrames, set by tests (and a build with the iggypoison tag), fills
// a send's request frame with poisonByte as it goes back to the arena: bytes a
// lent send still reads then fail the backup's batch checks instead of passing
// by chance.
var poisonReleasedFrames bool

const poisonByte = 0xEE

func poison(b []byte) {
	for i := range b {
		b[i] = poisonByte
	}
}
