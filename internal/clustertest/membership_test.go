package clustertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// A client dialed at a follower ends up writing to the leader: its login follows the
// leader, a pipelined producer's too; without redirection the follower refuses the
// write with 58 TransientNotAccepted.
func TestClientOnFollowerWritesToLeader(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := newCluster(t, 3)
	c.startAll()
	leader := c.awaitLeader(ctx, c.nodes)
	follower := c.others(leader)[0]

	cl, err := follower.dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if cl.Addr() != leader.addr() {
		t.Fatalf("client dialed at follower node %d is on %s, the leader is node %d at %s", follower.id, cl.Addr(), leader.id, leader.addr())
	}
	if _, err := cl.CreateStream(ctx, loadStream); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateTopic(ctx, client.NameID(loadStream), loadTopic, 1, nil); err != nil {
		t.Fatal(err)
	}

	p, err := client.DialPipelinedProducer(ctx, follower.addr(), client.NameID(loadStream), client.NameID(loadTopic),
		wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: 0}, client.PipelineOptions{},
		client.WithCredentials(rootUsername, rootPassword))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Addr() != leader.addr() {
		t.Fatalf("pipelined producer dialed at follower node %d sends to %s, the leader is at %s", follower.id, p.Addr(), leader.addr())
	}
	msgs := make([]client.Message, batchMessages)
	fillBatch(msgs, 0, 0)
	pending, err := p.Send(ctx, msgs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pending.Wait(ctx); err != nil {
		t.Fatal(err)
	}

	stuck, err := follower.dial(ctx, client.WithLeaderRedirection(false),
		client.WithTransientRetry(client.TransientRetry{Interval: 50 * time.Millisecond, NotCommittedWindow: 5 * time.Second, NotAcceptedWindow: 300 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	if _, err := stuck.CreateStream(ctx, "refused"); !errors.Is(err, wire.ErrTransientNotAccepted) {
		t.Fatalf("a write at follower node %d without redirection: %v, want 58 TransientNotAccepted", follower.id, err)
	}
}

// A node whose shared secret is wrong never joins: the others refuse its replica
// connections, keep their leader and serve on; it serves none of their data. Given
// the right secret, it joins with the data directory it had, catches up and holds
// the same bytes.
func TestWrongSharedSecretNeverJoins(t *testing.T) {
	runOutsider(t, func(n *node) { n.secret = "another-shared-secret-at-least-32-bytes-long" }, true)
}

// A node of another cluster name never joins either. Its name is stamped into its
// data on the first start, so it joins afterwards from an empty directory.
func TestOtherClusterNameNeverJoins(t *testing.T) {
	runOutsider(t, func(n *node) { n.name = "another-cluster" }, false)
}

func runOutsider(t *testing.T, spoil func(*node), keepsItsData bool) { // the outsider, let in, must catch up
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := newCluster(t, 3)
	insiders, outsider := c.nodes[:2], c.nodes[2]
	spoil(outsider)
	for _, n := range insiders {
		n.start()
	}
	stops := c.watchStops(insiders)
	leader := c.awaitLeader(ctx, insiders)
	setupLoad(ctx, t, leader, 1)
	log := newPartitionLog(0)
	w := newWriters()
	w.syncWriter(ctx, insiders, log)
	halted := false
	defer func() {
		if !halted {
			w.halt()
		}
	}()
	if err := log.awaitAcked(ctx, progressBatches); err != nil {
		t.Fatal(err)
	}

	outsider.start()
	if err := awaitLogLine(ctx, []*node{outsider}, func(line string) bool { return strings.Contains(line, "msg=listening") }); err != nil {
		t.Fatalf("the outsider: %v", err)
	}
	// A handshake refused, on either side: not a dial that found no listener.
	handshakeRefused := func(line string) bool {
		return strings.Contains(line, `msg="replica connection refused"`) && !strings.Contains(line, `reason="dial failed`)
	}
	if err := awaitLogLine(ctx, c.nodes, handshakeRefused); err != nil {
		t.Fatal(err)
	}
	if err := log.awaitAcked(ctx, log.ackedCount()+progressBatches); err != nil {
		t.Fatalf("the cluster stopped serving while the outsider ran: %v", err)
	}
	// The insiders keep their leader. A stall of one of them (a harness freezing
	// nodes) may move it, rightly: then they must still lead among themselves,
	// and never in a view the outsider leads.
	if now := c.awaitLeader(ctx, insiders); now != leader {
		if stopped := stops.seen(); stopped != "" {
			t.Logf("the leadership moved from node %d to node %d while the outsider ran, with node(s) %s stopped by a signal", leader.id, now.id, stopped)
		} else {
			t.Errorf("the leadership moved from node %d to node %d while the outsider ran", leader.id, now.id)
		}
	}
	ledByOutsider := fmt.Sprintf("status=Normal primary=%d ", outsider.id)
	for _, n := range insiders {
		if lines := grepLines(n.logText(), `msg="metadata group"`); strings.Contains(lines, ledByOutsider) {
			t.Errorf("node %d followed the outsider, node %d:\n%s", n.id, outsider.id, lines)
		}
	}
	for _, n := range insiders {
		m, err := n.metadata(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, entry := range m.Nodes {
			if int(entry.TCPPort) == outsider.tcpPort && entry.Role == wire.ClusterRoleLeader {
				t.Errorf("node %d lists the outsider as leader", n.id)
			}
		}
	}
	// The outsider has no leader to forward a login to; if it lets one in, it
	// holds none of the cluster's streams.
	attempt, cancelAttempt := context.WithTimeout(ctx, 3*time.Second)
	if probe, err := outsider.dial(attempt, client.WithLeaderRedirection(false)); err == nil {
		streams, err := probe.GetStreams(attempt)
		for _, s := range streams {
			if string(s.Name) == loadStream {
				t.Errorf("the outsider serves the cluster's stream %q", loadStream)
			}
		}
		t.Logf("the outsider let a login in; GetStreams: %d streams, %v", len(streams), err)
		probe.Close()
	} else {
		t.Logf("a login at the outsider failed, as it should: %v", err)
	}
	cancelAttempt()
	if err := outsider.checkAlive(); err != nil {
		t.Logf("the outsider stopped by itself: %v", err)
	}

	outsider.kill()
	outsider.secret, outsider.name = sharedSecret, clusterName
	if !keepsItsData {
		outsider.dir = t.TempDir()
	}
	outsider.start()
	acked, _ := log.snapshot()
	if _, err := awaitCaughtUp(ctx, outsider, log, acked); err != nil {
		t.Fatalf("the outsider, given the cluster's settings: %v", err)
	}
	w.halt()
	halted = true
	if err := awaitIdentical(ctx, c.nodes, log); err != nil {
		t.Fatal(err)
	}
}

// awaitLogLine waits (bounded by ctx and 20 s) until one of nodes has logged a line
// that match accepts.
func awaitLogLine(ctx context.Context, nodes []*node, match func(line string) bool) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		for _, n := range nodes {
			for _, line := range strings.Split(n.logText(), "\n") {
				if match(line) {
					return nil
				}
			}
		}
		if !waitCtx(ctx, 100*time.Millisecond) {
			return errors.New("no node logged the line awaited")
		}
	}
}
