package clustertest

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestClusterStaggeredStartKeepsViewZero starts replica 0 a moment before its peers,
// with the production timings (heartbeat timeout and reconnect period 5 s), as a
// user's nodes come up one by one. Replica 0's first dials are refused; it redials
// within a few hundred milliseconds (shard/replica_redial.go), so the first write
// commits well before a backup's heartbeat timeout and the cluster stays in view 0.
// Redialing only after the reconnect period, the first write would wait ~5 s and
// the backups, silent that long, would change view.
func TestClusterStaggeredStartKeepsViewZero(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := newCluster(t, 3)
	c.productionTimings = true
	first := c.nodes[0]
	first.start()
	refused := func() bool { return strings.Contains(first.logText(), "dial failed") }
	for !refused() {
		if err := first.checkAlive(); err != nil {
			t.Fatal(err)
		}
		if !waitCtx(ctx, 10*time.Millisecond) {
			t.Fatalf("replica 0 never dialed its peers\n%s", first.logTail(4096))
		}
	}
	peersStarted := time.Now()
	for _, n := range c.nodes[1:] {
		n.start()
	}
	const firstWriteWithin = 3 * time.Second // the heartbeat timeout is 5 s
	for {
		attempt, cancelAttempt := context.WithTimeout(ctx, time.Second)
		err := createStreamAt(attempt, first)
		cancelAttempt()
		if err == nil {
			break
		}
		if time.Since(peersStarted) > firstWriteWithin {
			t.Fatalf("no write committed %v after the peers started: %v", firstWriteWithin, err)
		}
		if !waitCtx(ctx, 50*time.Millisecond) {
			t.Fatal(err)
		}
	}
	t.Logf("first write committed %v after the peers started", time.Since(peersStarted).Round(time.Millisecond))
	if leader := c.awaitLeader(ctx, c.nodes); leader != first {
		t.Fatalf("leader is node %d, want node 0 (view 0)", leader.id)
	}
	otherView := regexp.MustCompile(`msg="metadata group"[^\n]* view=[1-9]`)
	for _, n := range c.nodes {
		if line := otherView.FindString(n.logText()); line != "" {
			t.Fatalf("node %d changed view: %s", n.id, line)
		}
	}
}

// createStreamAt creates a stream through n, following a leader redirection.
func createStreamAt(ctx context.Context, n *node) error {
	cl, err := n.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	_, err = cl.CreateStream(ctx, "staggered")
	return err
}
