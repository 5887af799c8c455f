package server

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/wire"
)

// spliceTotals sums the node's splice figures: the shards' and their stores'.
type spliceTotals struct {
	spliced, pipeWaits, pipesCreated uint64
	pipesLent                        int
	plansHeld                        int64
	plansFull                        uint64
}

func spliceFigures(t *testing.T, s *Server) spliceTotals {
	t.Helper()
	var mu sync.Mutex
	var tot spliceTotals
	err := s.rt.Inspect(testContext(t), func(sh *shard.Shard) {
		st := sh.Stats()
		ps := s.handlers[sh.Index()].owned.Store.PlanStats()
		mu.Lock()
		defer mu.Unlock()
		tot.spliced += st.SplicedReplies
		tot.pipeWaits += st.PipeWaits
		tot.pipesCreated += st.PipesCreated
		tot.pipesLent += st.PipesLent
		tot.plansHeld += ps.Held
		tot.plansFull += ps.Full
	})
	mustOK(t, "inspect", err)
	return tot
}

// awaitPlansReleased waits (bounded) until no plan is held and no pipe lent.
func awaitPlansReleased(t *testing.T, s *Server) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		f := spliceFigures(t, s)
		if f.plansHeld == 0 && f.pipesLent == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d plans still held and %d pipes lent", f.plansHeld, f.pipesLent)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// rawPollConn is a raw connection logged in with a token, for polls whose
// replies the test reads (or does not) byte by byte.
type rawPollConn struct {
	*rawConn
	client  wire.Uint128
	session uint64
	request uint64
}

// dialRawPoller connects with a receive buffer of rcvBytes (so that a reply
// it does not read stalls in the server) and logs in with token.
func dialRawPoller(t *testing.T, s *Server, token string, id uint64, rcvBytes int) *rawPollConn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second}
	conn, err := d.Dial("tcp", s.Addr().String())
	mustOK(t, "dial", err)
	t.Cleanup(func() { conn.Close() })
	mustOK(t, "SO_RCVBUF", conn.(*net.TCPConn).SetReadBuffer(rcvBytes))
	r := &rawPollConn{rawConn: &rawConn{t: t, conn: conn}, client: wire.Uint128{Lo: id, Hi: 0x5911}}
	login, err := (&wire.LoginRegisterWithPAT{
		Version: wire.ClientVersionInfo{ProtocolVersion: wire.ServerProtocolVersion, SDKName: []byte("raw-test"), SDKVersion: []byte("1")},
		Token:   []byte(token),
	}).Append(nil)
	mustOK(t, "login body", err)
	r.send(rawRequest{client: r.client, op: wire.OperationRegister, body: login})
	h, body := r.reply()
	payload, result, err := wire.SplitResult(body)
	var reply wire.LoginRegisterReply
	if h.Status != 0 || err != nil || result != 0 || reply.Decode(payload) != nil {
		t.Fatalf("token login %d: status %d result %d (%v)", id, h.Status, result, err)
	}
	r.session = reply.Session
	return r
}

func (r *rawPollConn) sendPoll(req *wire.PollMessages) {
	r.t.Helper()
	body, err := req.Append(nil)
	mustOK(r.t, "poll body", err)
	r.request++
	r.send(rawRequest{client: r.client, request: r.request, session: r.session,
		op: wire.OperationNonReplicated, code: wire.CodePollMessages, body: body})
}

// pollReply reads a whole poll reply and decodes it.
func (r *rawPollConn) pollReply() (wire.PolledMessages, error) {
	r.conn.SetDeadline(time.Now().Add(30 * time.Second))
	var head [wire.HeaderSize]byte
	if _, err := io.ReadFull(r.conn, head[:]); err != nil {
		return wire.PolledMessages{}, err
	}
	h, err := wire.DecodeReplyHeader(head[:], 1<<30)
	if err != nil {
		return wire.PolledMessages{}, err
	}
	body := make([]byte, h.BodySizeBytes())
	if _, err := io.ReadFull(r.conn, body); err != nil {
		return wire.PolledMessages{}, err
	}
	if h.Status != 0 {
		return wire.PolledMessages{}, wire.ErrorCode(binary.LittleEndian.Uint32(head[216:]))
	}
	var m wire.PolledMessages
	if err := m.Decode(body); err != nil {
		return m, err
	}
	return m, m.Verify()
}

// pollSetup is a server whose polls are planned from any size, with a topic
// "s"/"t" of one partition holding batches of 1000 messages of 1000 bytes
// (durable once acknowledged), and a token for raw connections.
func pollSetup(t *testing.T, batches int) (*Server, *client.Client, string) {
	t.Helper()
	s, c := spliceServer(t, 1, true)
	ctx := testContext(t)
	sendSpliceBatches(t, ctx, c, batches, 1000, 1000)
	token, err := c.CreatePersonalAccessToken(ctx, "polls", 0)
	mustOK(t, "token", err)
	return s, c, token
}

// TestSplicedPollConsumerDisconnects: a consumer that closes its connection in
// the middle of a spliced reply leaves nothing behind: its plan is released and
// its pipe given back, and the next consumer is spliced the same reply whole.
func TestSplicedPollConsumerDisconnects(t *testing.T) {
	const batches = 8 // an 8 MB reply: more than the socket buffers hold
	s, c, token := pollSetup(t, batches)
	for i := range 4 {
		r := dialRawPoller(t, s, token, uint64(i+1), 64<<10)
		r.sendPoll(pollFrom(0, batches*1000))
		r.conn.SetDeadline(time.Now().Add(10 * time.Second))
		var some [64 << 10]byte
		if _, err := io.ReadFull(r.conn, some[:]); err != nil {
			t.Fatalf("the reply's first bytes: %v", err)
		}
		r.conn.Close()
	}
	awaitPlansReleased(t, s)
	before := spliceFigures(t, s).spliced
	m, err := c.PollMessagesCopy(testContext(t), pollFrom(0, batches*1000), nil)
	mustOK(t, "poll after the disconnects", err)
	mustOK(t, "checksums", m.Verify())
	if m.MessagesCount != batches*1000 || spliceFigures(t, s).spliced != before+1 {
		t.Fatalf("polled %d messages, %d spliced replies more; want %d and 1", m.MessagesCount, spliceFigures(t, s).spliced-before, batches*1000)
	}
	awaitPlansReleased(t, s)
}

// TestSplicedPollsExhaustThePipes: more consumers than the node has pipes (32
// a shard) each ask for a spliced reply larger than its socket buffers and
// read nothing until a shard's pipes are all lent and the owner's plans at
// their bound (64); then each reads its whole reply. The replies past the
// pipes wait in line, those past the plans are copied, every one arrives
// whole, and nothing is held after.
func TestSplicedPollsExhaustThePipes(t *testing.T) {
	const (
		consumers = 80
		batches   = 8
	)
	s, _, token := pollSetup(t, batches)
	conns := make([]*rawPollConn, consumers)
	for i := range conns {
		conns[i] = dialRawPoller(t, s, token, uint64(i+1), 64<<10)
	}
	for _, r := range conns {
		r.sendPoll(pollFrom(0, batches*1000))
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		f := spliceFigures(t, s)
		// A shard's pool was empty (a reply waits in line) and the owner's
		// plans at their bound (polls copied).
		if f.pipeWaits > 0 && f.plansFull > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pipes and plans were not exhausted: %+v", f)
		}
		time.Sleep(5 * time.Millisecond)
	}
	var wg sync.WaitGroup
	var bad atomic.Int64
	for i, r := range conns {
		wg.Go(func() {
			m, err := r.pollReply()
			if err != nil || m.MessagesCount != batches*1000 {
				bad.Add(1)
				t.Errorf("consumer %d: %d messages, %v", i, m.MessagesCount, err)
			}
		})
	}
	wg.Wait()
	awaitPlansReleased(t, s)
	f := spliceFigures(t, s)
	if f.pipesCreated > 2*shard.PipesPerShardMaxDefault {
		t.Fatalf("%d pipes made, past the bound of %d", f.pipesCreated, 2*shard.PipesPerShardMaxDefault)
	}
	t.Logf("%d replies spliced, %d waited for a pipe, %d copied past the plans' bound", f.spliced, f.pipeWaits, f.plansFull)
}

// TestSplicedPollsDuringRetentionRolloverAndDeletion: consumers poll spliced
// replies across segments while a producer rolls segments over, the oldest
// segments are deleted, the topic is purged and finally deleted: every reply
// is whole batches whose checksums hold, or a clean error.
func TestSplicedPollsDuringRetentionRolloverAndDeletion(t *testing.T) {
	s, c := spliceServer(t, 1, true)
	ctx := testContext(t)
	// A topic of 1 MiB segments (the protocol's least), durable at once.
	opts, err := wire.AppendOption(nil, "enforce_fsync", wire.HeaderBool, []byte{1})
	mustOK(t, "options", err)
	opts, err = wire.AppendOption(opts, "segment_size", wire.HeaderUint64, binary.LittleEndian.AppendUint64(nil, 1<<20))
	mustOK(t, "options", err)
	_, err = c.CreateTopic(ctx, client.NameID("s"), "roll", 1, opts)
	mustOK(t, "create topic", err)
	roll := client.NameID("roll")
	send := func() error {
		batch := make([]client.Message, 100)
		for i := range batch {
			batch[i] = client.Message{Payload: make([]byte, 1000)}
			batch[i].Payload[0] = byte(i)
		}
		_, err := c.SendMessages(ctx, client.NameID("s"), roll, wire.Partitioning{Kind: wire.PartitioningPartitionID}, batch)
		return err
	}
	for range 30 {
		mustOK(t, "send", send())
	}
	var deleted atomic.Bool
	var consumers sync.WaitGroup
	var polls, whole, refused atomic.Int64
	for i := range 3 {
		cc := dialRoot(t, s)
		consumers.Go(func() {
			// Until the topic's deletion refuses a poll.
			for k := 0; k < 100_000; k++ {
				gone := deleted.Load()
				m, err := cc.PollMessagesCopy(ctx, &wire.PollMessages{Consumer: client.SingleConsumer(client.ID(uint32(i + 1))),
					StreamID: client.NameID("s"), TopicID: roll, Partition: wire.SomePartition(0),
					Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 2000}, nil)
				polls.Add(1)
				var code wire.ErrorCode
				switch {
				case errors.As(err, &code):
					refused.Add(1)
					if gone {
						return
					}
				case err != nil:
					t.Errorf("consumer %d: %v", i, err)
					return
				default:
					if err := m.Verify(); err != nil {
						t.Errorf("consumer %d: a reply of %d messages: %v", i, m.MessagesCount, err)
						return
					}
					whole.Add(1)
				}
			}
		})
	}
	for round := range 40 {
		mustOK(t, "send", send())
		switch round % 10 {
		case 3:
			if err := c.DeleteSegments(ctx, client.NameID("s"), roll, 0, 1); err != nil {
				t.Logf("delete segments: %v", err)
			}
		case 7:
			if round == 17 {
				mustOK(t, "purge", c.PurgeTopic(ctx, client.NameID("s"), roll))
			}
		}
	}
	mustOK(t, "delete topic", c.DeleteTopic(ctx, client.NameID("s"), roll))
	deleted.Store(true)
	consumers.Wait()
	awaitPlansReleased(t, s)
	f := spliceFigures(t, s)
	t.Logf("%d polls: %d whole, %d refused; %d replies spliced", polls.Load(), whole.Load(), refused.Load(), f.spliced)
	if f.spliced == 0 {
		t.Fatal("no reply was spliced")
	}
}
