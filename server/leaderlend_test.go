package server

import (
	"bytes"
	"flag"
	"fmt"
	"hash/crc32"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/request"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// TestMain: every server test poisons the request frames of sends as they go
// back to the arena (leaderlend.go): a prepare lent from one and still sent
// afterwards carries the poison to its backup, whose batch checks refuse it.
// Benchmarks do not, nor do the server processes they start: the fill is a byte
// loop over every 1 MB batch, which they would measure as the server's work (it
// cost BenchmarkTransport's producer 40% of its throughput).
func TestMain(m *testing.M) {
	flag.Parse()
	poisonReleasedFrames = !benchmarking()
	os.Exit(m.Run())
}

// benchmarking reports whether this process runs benchmarks, or is a server a
// benchmark started (tls_bench_test.go, tlsceiling_bench_test.go).
func benchmarking() bool {
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
		return true
	}
	return os.Getenv(envBenchServerPath) != "" || os.Getenv(envCeilingServerMode) != ""
}

// fakeLentSends stands in for the shard's replica queue: it keeps each lent send
// until the test completes it, checking that the body it sends is still the one
// it was lent.
type fakeLentSends struct {
	t     *testing.T
	sends []fakeLentSend
	// refuse, when set, is the error a send to that peer meets.
	refuse map[uint8]error
}

type fakeLentSend struct {
	peer uint8
	body []byte
	want []byte // the body's bytes when lent
	done shard.Releaser
}

func (f *fakeLentSends) send(peer uint8, header, body []byte, done shard.Releaser) error {
	if len(header) != wire.HeaderSize {
		f.t.Fatalf("a lent header of %d bytes", len(header))
	}
	if err := f.refuse[peer]; err != nil {
		return err
	}
	f.sends = append(f.sends, fakeLentSend{peer: peer, body: body, want: bytes.Clone(body), done: done})
	return nil
}

// complete completes the send to peer as the kernel would: its bytes read
// (unchanged since lent), then released.
func (f *fakeLentSends) complete(peer uint8) {
	f.t.Helper()
	for i, s := range f.sends {
		if s.peer != peer {
			continue
		}
		if !bytes.Equal(s.body, s.want) {
			f.t.Fatalf("the prepare lent to peer %d changed before its send completed: its frame went back too early", peer)
		}
		f.sends = append(f.sends[:i], f.sends[i+1:]...)
		s.done.Release()
		return
	}
	f.t.Fatalf("no lent send to peer %d", peer)
}

// newTestLender is a shard's leaderLender with the replica queue faked; recycled
// counts the jobs it recycled, which poisons their frames as the server's does.
func newTestLender(t *testing.T) (*leaderLender, *fakeLentSends, map[*job]int) {
	return newTestLenderOf(t, 0, make(map[*job]int))
}

// newTestLenderOf is newTestLender for shard index, counting in recycled; its
// msgLentDone posts go nowhere until the test sets tellHome.
func newTestLenderOf(t *testing.T, index int, recycled map[*job]int) (*leaderLender, *fakeLentSends, map[*job]int) {
	h := &handler{index: index}
	sends := &fakeLentSends{t: t}
	l := &h.leader
	l.h = h
	l.frames = make(map[*job]*lentFrame)
	l.awaiting = make(map[*job]loanWait)
	l.sendLent = sends.send
	l.recycleJob = func(j *job) {
		recycled[j]++
		poison(j.Frame.Body)
	}
	l.tellHome = func(*job) { t.Fatal("msgLentDone posted") }
	return l, sends, recycled
}

// sendJob is a connection's send job on shard 0 whose frame holds a batch of n
// bytes, and the prepare of it.
func sendJob(n int) (*job, *vsr.Message) {
	j := &job{Kind: request.KindSend}
	j.Frame.Body = make([]byte, 64+n)
	for i := range j.Frame.Body {
		j.Frame.Body[i] = byte(i)
	}
	m := &vsr.Message{Body: j.Frame.Body[64:]}
	m.Header.Command = wire.CommandPrepare
	return j, m
}

// recycleOf does what handler.recycle does with a job whose own use of its
// frame is over.
func recycleOf(l *leaderLender, j *job) {
	if !l.holds(j) && !l.awaitsLoan(j) {
		l.recycleJob(j)
	}
}

// TestLeaderLendReleasesAfterTheLastSend: a prepare lent to both backups from its
// client's frame keeps the frame until the second send completes, whether the
// job is done with it before, between or after the sends; the frame is
// recycled exactly once.
func TestLeaderLendReleasesAfterTheLastSend(t *testing.T) {
	for _, recycleAfter := range []int{0, 1, 2} {
		t.Run(fmt.Sprintf("recycled-after-%d-sends", recycleAfter), func(t *testing.T) {
			l, sends, recycled := newTestLender(t)
			j, m := sendJob(prepareLendMinBytes)
			for _, peer := range []uint8{1, 2} {
				m.To = peer
				if !l.lend(j, m) {
					t.Fatalf("the prepare to peer %d was not lent", peer)
				}
			}
			if out := l.LentPrepares().out; out != 2 {
				t.Fatalf("%d lent sends out, want 2", out)
			}
			for done := range 3 {
				if done == recycleAfter {
					recycleOf(l, j)
				}
				if done == 2 {
					break
				}
				if recycled[j] != 0 {
					t.Fatalf("the frame was recycled with %d of 2 sends done", done)
				}
				sends.complete(uint8(done + 1))
			}
			if recycled[j] != 1 {
				t.Fatalf("the frame was recycled %d times, want once", recycled[j])
			}
			if got := l.LentPrepares(); got.lent != 2 || got.out != 0 || len(l.frames) != 0 {
				t.Fatalf("lent %d, out %d, frames held %d; want 2, 0, 0", got.lent, got.out, len(l.frames))
			}
			want := uint64(0) // recycled after both sends: nothing outlived it
			if recycleAfter < 2 {
				want = 1
			}
			if l.LentPrepares().outlived != want {
				t.Fatalf("%d jobs outlived by their sends, want %d", l.LentPrepares().outlived, want)
			}
		})
	}
}

// TestLeaderLendFallsBack: a prepare is copied where lending cannot hold (small,
// not in the job's frame, a call's request, past the bound), and one refused for a peer down or a full queue is dropped, as a copy
// would be, holding nothing.
func TestLeaderLendFallsBack(t *testing.T) {
	l, sends, recycled := newTestLender(t)
	small, ms := sendJob(prepareLendMinBytes - 1)
	if l.lend(small, ms) {
		t.Fatal("a prepare below prepareLendMinBytes was lent")
	}
	j, m := sendJob(prepareLendMinBytes)
	elsewhere := *m
	elsewhere.Body = bytes.Clone(m.Body)
	if l.lend(j, &elsewhere) {
		t.Fatal("a body outside the job's frame was lent")
	}
	call := *j
	call.Call = &request.Call{}
	if l.lend(&call, m) {
		t.Fatal("a call's request was lent")
	}

	sends.refuse = map[uint8]error{1: shard.ErrReplicaPeerDown, 2: shard.ErrReplicaQueueFull}
	for _, peer := range []uint8{1, 2} {
		m.To = peer
		if !l.lend(j, m) {
			t.Fatalf("a prepare to peer %d refused by the queue was copied, want dropped", peer)
		}
	}
	if out := l.LentPrepares().out; out != 0 || len(l.frames) != 0 {
		t.Fatalf("refused sends hold %d sends, %d frames", out, len(l.frames))
	}
	recycleOf(l, j)
	if recycled[j] != 1 {
		t.Fatalf("a job whose sends were all refused was recycled %d times", recycled[j])
	}

	sends.refuse = nil
	jobs := make([]*job, prepareLendSendsMax+1)
	for i := range jobs {
		var mi *vsr.Message
		jobs[i], mi = sendJob(prepareLendMinBytes)
		mi.To = 1
		if lent := l.lend(jobs[i], mi); lent != (i < prepareLendSendsMax) {
			t.Fatalf("send %d lent %v with %d out (bound %d)", i, lent, i, prepareLendSendsMax)
		}
	}
	for _, jb := range jobs {
		recycleOf(l, jb)
	}
	for range prepareLendSendsMax {
		sends.complete(1)
	}
	for i, jb := range jobs {
		if recycled[jb] != 1 {
			t.Fatalf("job %d recycled %d times", i, recycled[jb])
		}
	}
}

// TestLeaderLendAcrossShards: a job whose home is another shard than the
// partition's owner is answered with msgReplyLent while its prepare's sends are
// out, and its home recycles it once both its own use and the sends are done
// (msgLentDone), whichever comes first; exactly once.
func TestLeaderLendAcrossShards(t *testing.T) {
	for _, recycleFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("recycled-first=%v", recycleFirst), func(t *testing.T) {
			recycled := make(map[*job]int)
			owner, sends, _ := newTestLenderOf(t, 0, recycled)
			home, _, _ := newTestLenderOf(t, 1, recycled)
			var told []*job // msgLentDone in the queue from the owner to the home
			owner.tellHome = func(j *job) { told = append(told, j) }
			j, m := sendJob(prepareLendMinBytes)
			j.Conn = shard.ConnID(1) << 48
			for _, peer := range []uint8{1, 2} {
				m.To = peer
				if !owner.lend(j, m) {
					t.Fatalf("the prepare to peer %d was not lent", peer)
				}
			}
			if !owner.replyingLent(j) {
				t.Fatal("a job whose frame lent sends read was answered by msgReply")
			}
			home.awaitLoan(j) // msgReplyLent served
			if recycleFirst {
				recycleOf(home, j)
			}
			sends.complete(1)
			if len(told) != 0 || recycled[j] != 0 {
				t.Fatalf("with a send out: %d msgLentDone, recycled %d times", len(told), recycled[j])
			}
			sends.complete(2)
			if len(told) != 1 {
				t.Fatalf("%d msgLentDone after the last send, want 1", len(told))
			}
			home.loanDone(told[0])
			if !recycleFirst {
				if recycled[j] != 0 {
					t.Fatal("the frame was recycled before its job was done with it")
				}
				recycleOf(home, j)
			}
			if recycled[j] != 1 || len(home.awaiting) != 0 || len(owner.frames) != 0 {
				t.Fatalf("recycled %d times, %d jobs awaiting, %d frames held; want 1, 0, 0", recycled[j], len(home.awaiting), len(owner.frames))
			}
		})
	}
}

// leaderLends sums what a node's shards' lenders did.
func leaderLends(t *testing.T, s *Server) lentPrepares {
	t.Helper()
	var mu sync.Mutex
	var sum lentPrepares
	err := s.rt.Inspect(testContext(t), func(sh *shard.Shard) {
		l := s.handlers[sh.Index()].leader.LentPrepares()
		mu.Lock()
		sum.lent, sum.copied, sum.outlived, sum.out = sum.lent+l.lent, sum.copied+l.copied, sum.outlived+l.outlived, sum.out+l.out
		mu.Unlock()
	})
	mustOK(t, "inspect", err)
	return sum
}

// ingressBindingDrops sums the prepares a node's backups refused for a body that
// is not the batch its header binds.
func ingressBindingDrops(t *testing.T, s *Server) uint64 {
	t.Helper()
	var mu sync.Mutex
	var n uint64
	err := s.rt.Inspect(testContext(t), func(sh *shard.Shard) {
		d := s.handlers[sh.Index()].owned.Store.IngressDrops()
		mu.Lock()
		n += d[partition.IngressBinding]
		mu.Unlock()
	})
	mustOK(t, "inspect", err)
	return n
}

// TestClusterPrimaryLendsPrepares: the primary of a 3-node cluster sends the
// prepares of 1000-message batches from its clients' request frames (poisoned as
// they go back), through a backup stopped and started again mid-stream (its
// queued sends released as its connection closes); every send is released at
// the end, no backup refused a prepare's body, and the backups hold the same
// messages, checksums intact. On a primary of two shards a partition's owner is
// not always the owner of a backup's connection: its prepares are lent through
// the other shard, released back on it. The backups run on as many shards: a
// backup of two stopped mid-stream gives back, as its partitions close, the
// prepares' frames one of its shards received for the other's partitions.
func TestClusterPrimaryLendsPrepares(t *testing.T) {
	for _, shards := range []int{1, 2} {
		t.Run(fmt.Sprintf("primary-shards=%d", shards), func(t *testing.T) { testPrimaryLendsPrepares(t, shards) })
	}
}

func testPrimaryLendsPrepares(t *testing.T, shards int) {
	servers := replicateThroughARestart(t, shards, "lead")
	waitUntil(t, "the primary's lent sends are released", func() bool { return leaderLends(t, servers[0]).out == 0 })
	l := leaderLends(t, servers[0])
	across := servers[0].rt.ReplicaStats().FramesLentAcross
	t.Logf("primary: %d prepares lent (%d through another shard's connection), %d copied, %d jobs outlived by their sends",
		l.lent, across, l.copied, l.outlived)
	if l.lent == 0 {
		t.Fatal("the primary lent no prepare")
	}
	if shards > 1 && across == 0 {
		t.Fatal("no prepare was lent through another shard's connection")
	}
	for i, s := range servers[1:] {
		if n := ingressBindingDrops(t, s); n != 0 {
			t.Fatalf("node %d refused %d prepares whose body did not bind", i+1, n)
		}
	}
}

// replicateThroughARestart starts a 3-node cluster of shards shards a node and
// sends, through node 0, 12 batches of 1000 messages to each of 2*shards
// partitions of a topic of stream, with node 2 stopped after the first third and
// started again after the second; it returns once both backups hold every
// message, checksums intact.
func replicateThroughARestart(t *testing.T, shards int, stream string) []*Server {
	t.Helper()
	cfgs := clusterConfigs(t, 3, testClusterSecret)
	for i := range cfgs {
		cfgs[i].ShardCount = shards
	}
	servers := startCluster(t, cfgs)
	pc := dialCluster(t, servers[0])
	ctx := testContext(t)
	_, err := pc.CreateStream(ctx, stream)
	mustOK(t, "create stream", err)
	const batches, perBatch = 12, 1000
	partitions := 2 * shards
	_, err = pc.CreateTopic(ctx, client.NameID(stream), "t", uint32(partitions), nil)
	mustOK(t, "create topic", err)
	for b := range batches {
		if b == batches/3 {
			stopServer(t, servers[2])
		}
		if b == 2*batches/3 {
			servers[2] = startTestServer(t, cfgs[2])
		}
		for p := range uint32(partitions) {
			_, err := pc.SendMessages(ctx, client.NameID(stream), client.NameID("t"),
				wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: p}, messagesOf(perBatch, 1000, fmt.Sprintf("p%d-b%d-", p, b)))
			mustOK(t, "send", err)
		}
	}
	for i, s := range servers[1:] {
		c := dialCluster(t, s)
		for p := range uint32(partitions) {
			var m wire.PolledMessages
			waitUntil(t, fmt.Sprintf("node %d holds partition %d", i+1, p), func() bool {
				m, err = c.PollMessagesCopy(ctx, &wire.PollMessages{Consumer: client.SingleConsumer(client.ID(1)), StreamID: client.NameID(stream),
					TopicID: client.NameID("t"), Partition: wire.SomePartition(p), Strategy: wire.PollingStrategy{Kind: wire.PollingFirst},
					Count: batches * perBatch}, nil)
				return err == nil && m.MessagesCount == batches*perBatch
			})
			mustOK(t, "checksums at a backup", m.Verify())
		}
	}
	return servers
}

// heldSends keeps a shard's lent sends' releases from its lender after the
// kernel is done with them, to be given later (on the shard's goroutine), each
// with a checksum of the body as lent. tid is the shard's thread (its loop is
// locked to it): a release that reaches the lender on another counts in
// offShard. crossed counts the sends lent to a peer whose replica connection
// another shard owns.
type heldSends struct {
	sends    []*heldSend
	released int
	tid      int
	offShard atomic.Int64
	crossed  int
}

type heldSend struct {
	held *heldSends
	body []byte
	sum  uint32
	done shard.Releaser
}

func (s *heldSend) Release() {
	if unix.Gettid() != s.held.tid {
		s.held.offShard.Add(1)
		return
	}
	s.held.sends = append(s.held.sends, s)
}

// TestClusterPrimaryFrameOutlivesItsReply: a request frame whose prepare's sends
// are still out when its send is answered stays unchanged, and unrecycled,
// until the last of them is released, however late: the test holds each
// release back past the send's acknowledgement (and, on one shard, past its
// job's recycle; frames are poisoned then), checks the body against its
// checksum when lent, and releases it. On two shards a job's home is not
// always the partition's owner (msgReplyLent, msgLentDone), nor the partition's
// owner always the owner of the backup's connection: its prepares are lent all
// the same, not copied, and released on their lender. (Held for good, the
// frames would stop the client's connection: a connection reads no more while
// its retained frames are over its bound.)
func TestClusterPrimaryFrameOutlivesItsReply(t *testing.T) {
	for _, shards := range []int{1, 2} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) { testFrameOutlivesItsReply(t, shards) })
	}
}

func testFrameOutlivesItsReply(t *testing.T, shards int) {
	cfgs := clusterConfigs(t, 3, testClusterSecret)
	for i := range cfgs {
		cfgs[i].ShardCount = shards
	}
	servers := startCluster(t, cfgs)
	primary := servers[0]
	held := make([]*heldSends, shards) // each touched on its shard only
	mustOK(t, "inspect", primary.rt.Inspect(testContext(t), func(sh *shard.Shard) {
		hs := &heldSends{tid: unix.Gettid()}
		held[sh.Index()] = hs
		l := &primary.handlers[sh.Index()].leader
		send := l.sendLent
		l.sendLent = func(peer uint8, header, body []byte, done shard.Releaser) error {
			err := send(peer, header, body, &heldSend{held: hs, body: body, sum: crc32.ChecksumIEEE(body), done: done})
			if owner, _ := sh.ReplicaOwner(peer); err == nil && owner != sh.Index() {
				hs.crossed++
			}
			return err
		}
	}))
	pc := dialCluster(t, primary)
	ctx := testContext(t)
	_, err := pc.CreateStream(ctx, "late")
	mustOK(t, "create stream", err)
	partitions := uint32(2 * shards)
	_, err = pc.CreateTopic(ctx, client.NameID("late"), "t", partitions, nil)
	mustOK(t, "create topic", err)
	batches := 6 * shards
	for b := range batches {
		_, err := pc.SendMessages(ctx, client.NameID("late"), client.NameID("t"),
			wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: uint32(b) % partitions}, messagesOf(1000, 1000, fmt.Sprintf("b%d-", b)))
		mustOK(t, "send", err)
		if shards == 1 {
			waitUntil(t, fmt.Sprintf("send %d's job is recycled, its frame held by its sends", b),
				func() bool { return leaderLends(t, primary).outlived == uint64(b+1) })
		}
		waitUntil(t, fmt.Sprintf("send %d's frame is released", b), func() bool {
			var mu sync.Mutex
			out := 0
			mustOK(t, "inspect", primary.rt.Inspect(testContext(t), func(sh *shard.Shard) {
				hs := held[sh.Index()]
				for _, s := range hs.sends {
					if crc32.ChecksumIEEE(s.body) != s.sum {
						t.Errorf("a lent prepare's body changed before its send was released: its frame went back early")
					}
					s.done.Release()
					hs.released++
				}
				clear(hs.sends)
				hs.sends = hs.sends[:0]
				mu.Lock()
				out += primary.handlers[sh.Index()].leader.LentPrepares().out
				mu.Unlock()
			}))
			return out == 0
		})
	}
	l := leaderLends(t, primary)
	released, crossed := 0, 0
	for i, hs := range held {
		released += hs.released
		crossed += hs.crossed
		if n := hs.offShard.Load(); n != 0 {
			t.Fatalf("shard %d: %d lent sends released off the shard that lent them", i, n)
		}
	}
	t.Logf("primary: %d prepares lent (%d through another shard's connection), %d copied, %d jobs outlived by their sends, %d releases held",
		l.lent, crossed, l.copied, l.outlived, released)
	if uint64(released) != l.lent || l.lent == 0 || l.outlived == 0 {
		t.Fatalf("%d releases held of %d lent, %d jobs outlived by their sends: want every one, and some of each", released, l.lent, l.outlived)
	}
	if l.lent < uint64(batches) || l.copied != 0 {
		t.Fatalf("%d prepares lent and %d copied of %d batches: want each lent", l.lent, l.copied, batches)
	}
	if shards > 1 && crossed == 0 {
		t.Fatal("no prepare was lent through another shard's connection: the test did not cross shards")
	}
	for i := range shards {
		if n := len(primary.handlers[i].leader.awaiting); n != 0 {
			t.Fatalf("shard %d: %d jobs await the end of their loans", i, n)
		}
	}
}
