package server

import (
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/wire"
)

// cuttableLink forwards one node's replica connections to a peer, until cut: then
// it drops them and every new one, until healed.
type cuttableLink struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	isCut  bool
	conns  []net.Conn
}

func newCuttableLink(t *testing.T, target string) *cuttableLink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &cuttableLink{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); l.cut() })
	go l.serve()
	return l
}

func (l *cuttableLink) port() int { return l.ln.Addr().(*net.TCPAddr).Port }

func (l *cuttableLink) serve() {
	for {
		in, err := l.ln.Accept()
		if err != nil {
			return
		}
		l.mu.Lock()
		if l.isCut {
			l.mu.Unlock()
			in.Close()
			continue
		}
		out, err := net.Dial("tcp", l.target)
		if err != nil {
			l.mu.Unlock()
			in.Close()
			continue
		}
		l.conns = append(l.conns, in, out)
		l.mu.Unlock()
		go func() { io.Copy(out, in); out.Close() }()
		go func() { io.Copy(in, out); in.Close() }()
	}
}

func (l *cuttableLink) cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.isCut = true
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

func (l *cuttableLink) heal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.isCut = false
}

// A primary cut off from its backups mid-send holds the send's prepare alone; the
// backups elect a new primary, and when the old one hears them again the new
// view's log truncates the prepare. Its send is answered 57 TransientNotCommitted
// (it was 4006, "the partition's storage failed", which the SDKs do not replay),
// and the replay of the same batch at the new primary is stored once.
func TestClusterSendCutByAFailoverIsAnswered57AndReplayedOnce(t *testing.T) {
	cfgs := clusterConfigs(t, 3, testClusterSecret)
	// Node 0 dials the others (lower ids dial higher ones) through links the test
	// can cut.
	nodes := append([]config.ClusterNode(nil), cfgs[0].Cluster.Nodes...)
	var links []*cuttableLink
	for i := 1; i < len(nodes); i++ {
		l := newCuttableLink(t, net.JoinHostPort(nodes[i].IP, strconv.Itoa(int(nodes[i].Ports.TCPReplica))))
		nodes[i].Ports.TCPReplica = uint16(l.port())
		links = append(links, l)
	}
	cfgs[0].Cluster.Nodes = nodes
	servers := startCluster(t, cfgs)
	ctx := testContext(t)
	c := dialCluster(t, servers[0])
	_, err := c.CreateStream(ctx, "orders")
	mustOK(t, "CreateStream", err)
	_, err = c.CreateTopic(ctx, client.NameID("orders"), "events", 1, nil)
	mustOK(t, "CreateTopic", err)
	sendTo(t, c, "orders", "events", 0, messages(1, "before"))

	// A client that does not replay, so the test sees the answer.
	raw, err := client.Dial(ctx, servers[0].Addr().String(), client.WithCredentials("iggy", "iggy"), client.WithLeaderRedirection(false),
		client.WithRequestTimeout(client.DefaultRequestTimeout), client.WithTransientRetry(client.TransientRetry{}))
	mustOK(t, "Dial", err)
	t.Cleanup(func() { raw.Close() })
	for _, l := range links {
		l.cut()
	}
	answered := make(chan error, 1)
	go func() {
		_, err := raw.SendMessages(ctx, client.NameID("orders"), client.NameID("events"),
			wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: 0}, messages(1, "cut"))
		answered <- err
	}()
	survivors := servers[1:]
	waitUntil(t, "the survivors elect a primary", func() bool { l, ok := agreedLeader(survivors); return ok && l != 0 })
	select {
	case err := <-answered:
		t.Fatalf("the cut-off primary answered its send before it heard the new view: %v", err)
	default:
	}
	for _, l := range links {
		l.heal()
	}
	var sendErr error
	select {
	case sendErr = <-answered:
	case <-time.After(clusterWait):
		t.Fatal("the cut-off primary's send is never answered")
	}
	if code := wire.ErrorCode(0); !errors.As(sendErr, &code) || code != wire.ErrTransientNotCommitted {
		t.Fatalf("the cut-off primary's send was answered %v, want 57 %v", sendErr, wire.ErrTransientNotCommitted)
	}
	leader, _ := agreedLeader(survivors)
	replay := dialCluster(t, servers[leader])
	sendTo(t, replay, "orders", "events", 0, messages(1, "cut"))
	polled, err := replay.PollMessages(ctx, &wire.PollMessages{Consumer: client.SingleConsumer(client.ID(1)),
		StreamID: client.NameID("orders"), TopicID: client.NameID("events"), Partition: wire.SomePartition(0),
		Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 10})
	mustOK(t, "PollMessages", err)
	var got []string
	for it := polled.Messages(); it.Next(); {
		m := it.Message()
		got = append(got, string(m.Frame.Payload()))
	}
	if len(got) != 2 || got[0] != "before 0" || got[1] != "cut 0" {
		t.Fatalf("the partition holds %q, want the first batch and the replay once", got)
	}
}
