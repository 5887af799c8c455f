package clustertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// A three-node cluster elects one leader, and every node comes to list the whole
// roster, healthy, with its client address and the leader's role.
func TestClusterElectsOneLeader(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := newCluster(t, 3)
	c.startAll()
	leader := c.awaitLeader(ctx, c.nodes)
	wait, cancelWait := context.WithTimeout(ctx, 15*time.Second)
	defer cancelWait()
	for {
		err := rosterAsExpected(wait, c, leader)
		if err == nil {
			break
		}
		if !waitCtx(wait, 100*time.Millisecond) {
			t.Fatal(err)
		}
	}
}

func rosterAsExpected(ctx context.Context, c *cluster, leader *node) error {
	for _, n := range c.nodes {
		m, err := n.metadata(ctx)
		if err != nil {
			return fmt.Errorf("node %d: %w", n.id, err)
		}
		seen := map[int]bool{}
		for _, entry := range m.Nodes {
			peer := c.byTCPPort(entry.TCPPort)
			if peer == nil {
				return fmt.Errorf("node %d lists port %d, no node's", n.id, entry.TCPPort)
			}
			seen[peer.id] = true
			wantRole := wire.ClusterRoleFollower
			if peer == leader {
				wantRole = wire.ClusterRoleLeader
			}
			if entry.Role != wantRole || entry.Status != wire.ClusterNodeHealthy {
				return fmt.Errorf("node %d lists node %d with role %d status %d, want role %d, healthy", n.id, peer.id, entry.Role, entry.Status, wantRole)
			}
		}
		if len(seen) != len(c.nodes) {
			return fmt.Errorf("node %d lists nodes %v", n.id, seen)
		}
	}
	return nil
}

// setupLoad creates the load's stream and topic through a client at leader.
func setupLoad(ctx context.Context, t *testing.T, leader *node, partitions uint32) {
	t.Helper()
	cl, err := leader.dial(ctx)
	if err != nil {
		t.Fatalf("login at the leader, node %d: %v", leader.id, err)
	}
	defer cl.Close()
	if _, err := cl.CreateStream(ctx, loadStream); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateTopic(ctx, client.NameID(loadStream), loadTopic, partitions, nil); err != nil {
		t.Fatal(err)
	}
}

type victimKind int

const (
	victimPrimary victimKind = iota
	victimBackup
)

func (k victimKind) String() string {
	if k == victimPrimary {
		return "primary"
	}
	return "backup"
}

// The primary is killed with SIGKILL while a Client and a PipelinedProducer write;
// a new primary is elected and serves, the killed node restarts and catches up, and
// every node holds every acknowledged batch, in order, exactly once, byte for byte
// alike.
func TestFailoverPrimaryKilled(t *testing.T) { runFailover(t, victimPrimary) }

// A backup is killed: the primary stays and goes on serving.
func TestFailoverBackupKilled(t *testing.T) { runFailover(t, victimBackup) }

// The primary is killed, restarts and catches up; then the new primary is killed.
// Two nodes are never down at once.
func TestFailoverTwoNodesKilledInTurn(t *testing.T) {
	runFailover(t, victimPrimary, victimPrimary)
}

// progressBatches is how many batches each partition must have acknowledged before
// a kill, and again after it.
const progressBatches = 20

func runFailover(t *testing.T, victims ...victimKind) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := newCluster(t, 3)
	c.startAll()
	leader := c.awaitLeader(ctx, c.nodes)
	setupLoad(ctx, t, leader, 2)
	logs := []*partitionLog{newPartitionLog(0), newPartitionLog(1)}
	w := newWriters()
	w.syncWriter(ctx, c.nodes, logs[0])
	w.pipelinedWriter(ctx, c.nodes, logs[1])
	halted := false
	defer func() {
		if !halted {
			w.halt()
		}
	}()
	for _, l := range logs {
		if err := l.awaitAcked(ctx, progressBatches); err != nil {
			t.Fatal(err)
		}
	}
	for round, kind := range victims {
		victim := leader
		if kind == victimBackup {
			victim = c.others(leader)[0]
		}
		var ackedAtKill [2]int
		for i, l := range logs {
			ackedAtKill[i] = l.ackedCount()
		}
		killedAt, exitedAt := victim.kill()
		newLeader := c.awaitLeader(ctx, c.others(victim))
		if kind == victimBackup && newLeader != leader {
			t.Errorf("round %d: killing backup node %d moved the leadership from node %d to node %d", round, victim.id, leader.id, newLeader.id)
		}
		for i, l := range logs {
			if err := l.awaitAcked(ctx, ackedAtKill[i]+progressBatches); err != nil {
				t.Fatalf("round %d, after the kill of the %v (node %d), new leader node %d: %v", round, kind, victim.id, newLeader.id, err)
			}
		}
		var firstAcks [2]time.Duration
		for i, l := range logs {
			if at, ok := l.firstAckOfSentAfter(exitedAt); ok {
				firstAcks[i] = at.Sub(killedAt)
			}
		}
		t.Logf("round %d: %v node %d killed; leader node %d; first acknowledged write sent after its exit %v (sync) and %v (pipelined) after the kill",
			round, kind, victim.id, newLeader.id, firstAcks[0], firstAcks[1])
		// Every batch acknowledged so far, before the kill or after it, is on
		// every survivor.
		for _, l := range logs {
			acked, _ := l.snapshot()
			for _, n := range c.others(victim) {
				if _, err := awaitCaughtUp(ctx, n, l, acked); err != nil {
					t.Fatalf("round %d: survivor node %d (leader node %d): %v", round, n.id, newLeader.id, err)
				}
			}
		}
		victim.start()
		restartedAt := time.Now()
		for _, l := range logs {
			acked, _ := l.snapshot()
			if _, err := awaitCaughtUp(ctx, victim, l, acked); err != nil {
				t.Fatalf("round %d: restarted node %d: %v", round, victim.id, err)
			}
		}
		t.Logf("round %d: node %d caught up %v after its restart", round, victim.id, time.Since(restartedAt))
		leader = c.awaitLeader(ctx, c.nodes)
	}
	w.halt()
	halted = true
	for _, l := range logs {
		if err := awaitIdentical(ctx, c.nodes, l); err != nil {
			t.Fatal(err)
		}
	}
}

// awaitIdentical waits (bounded by ctx) until every node's copy of the partition
// holds every acknowledged batch and all copies are the same bytes: the last batches,
// whose outcome a failure left unknown, may still be on their way to a follower. A
// copy that breaks the log's rules fails at once.
func awaitIdentical(ctx context.Context, nodes []*node, log *partitionLog) error {
	acked, sent := log.snapshot()
	for {
		err := identical(ctx, nodes, log.partition, acked, sent)
		var wrong *wrongCopyError
		if err == nil || errors.As(err, &wrong) {
			return err
		}
		if !waitCtx(ctx, 100*time.Millisecond) {
			return fmt.Errorf("copies not identical in time: %w", err)
		}
	}
}

// wrongCopyError is a copy that breaks the log's rules: no wait mends it.
type wrongCopyError struct{ err error }

func (e *wrongCopyError) Error() string { return e.err.Error() }

func identical(ctx context.Context, nodes []*node, partition int, acked []int, sent map[int]bool) error {
	var first *partitionRead
	var firstNode *node
	for _, n := range nodes {
		read, err := readPartition(ctx, n, partition)
		if err != nil {
			return err
		}
		if _, err := read.check(partition, acked, sent); err != nil {
			err = fmt.Errorf("node %d partition %d: %w", n.id, partition, err)
			if isMissing(err) {
				return err
			}
			return &wrongCopyError{err}
		}
		if first == nil {
			first, firstNode = read, n
			continue
		}
		if !bytes.Equal(first.records, read.records) {
			return fmt.Errorf("partition %d: nodes %d and %d hold different bytes (%d and %d messages)",
				partition, firstNode.id, n.id, len(first.payloads), len(read.payloads))
		}
	}
	return nil
}
