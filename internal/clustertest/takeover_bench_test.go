package clustertest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// takeoverPartitions is the topic BenchmarkFailoverTakeover writes to.
const takeoverPartitions = 100

// takeoverRuns is how many primaries one op of BenchmarkFailoverTakeover kills,
// each in a fresh cluster.
const takeoverRuns = 3

// BenchmarkFailoverTakeover kills the metadata primary of a three-node cluster
// (every node --shards 1, busy polling off, the tests' heartbeat_timeout of 2 s)
// with SIGKILL, after one batch was written to each of the 100 partitions of a
// topic, and splits the time until all 100 take a send again:
//
//   - detect: from the kill to the first survivor's log line that its metadata
//     group left normal status (the heartbeat timeout, give or take a tick);
//   - view-change: from there to the new primary's line that it leads in normal
//     status (its first commit in the new view follows at once: the log suffix it
//     collected);
//   - leader-seen: from there until both survivors' GetClusterMetadata name the
//     new leader (asked every 10 ms);
//   - takeover: from the view change until every partition has acknowledged a send made
//     through a client already logged in at the new leader (partition 0 first, on
//     in order; the client replays a transient refusal every 10 ms), beside the
//     same 100 sends made before the kill (sends-before-kill: the part of the
//     takeover that is the sends' own round trips);
//   - total: from the kill to the last acknowledgement;
//   - redirect (after the above, so as not to load the nodes meanwhile): what a
//     client new to the cluster adds, as an SDK's after its connection to the dead
//     primary broke: a dial and login at the survivor that is not the leader, its
//     GetClusterMetadata, the move to the leader and the login there (a password
//     hash each), and a send to partition 0.
//
// The log lines carry the nodes' clock in milliseconds, the same clock as the
// benchmark's on this machine. Run it with -benchtime 1x; it reports the median
// and max over takeoverRuns kills.
func BenchmarkFailoverTakeover(b *testing.B) {
	// active: the kill follows the writes at once; idle: two heartbeat timeouts
	// later, when the groups have parked off the timers (partition/activity.go).
	b.Run("groups=active", func(b *testing.B) { benchTakeover(b, 0) })
	b.Run("groups=idle", func(b *testing.B) { benchTakeover(b, 2*takeoverHeartbeatTimeout) })
}

// takeoverHeartbeatTimeout is timingsTOML's heartbeat_timeout.
const takeoverHeartbeatTimeout = 2 * time.Second

func benchTakeover(b *testing.B, idleFor time.Duration) {
	for range b.N {
		var detect, viewChange, leaderSeen, takeover, firstAccept, total, redirect, baseline []time.Duration
		for run := range takeoverRuns {
			r := measureTakeover(b, idleFor)
			b.Logf("run %d: detect %v, view change %v; after it the survivors' rosters name the leader %v, the first partition accepts %v, all %d %v (the same sends before the kill: %v); total %v; a new client's redirect and send %v",
				run, r.detect, r.viewChange, r.leaderSeen, r.firstAccept, takeoverPartitions, r.takeover, r.baseline, r.total, r.redirect)
			detect = append(detect, r.detect)
			viewChange = append(viewChange, r.viewChange)
			leaderSeen = append(leaderSeen, r.leaderSeen)
			firstAccept = append(firstAccept, r.firstAccept)
			takeover = append(takeover, r.takeover)
			total = append(total, r.total)
			redirect = append(redirect, r.redirect)
			baseline = append(baseline, r.baseline)
		}
		for _, m := range []struct {
			name string
			d    []time.Duration
		}{{"detect", detect}, {"viewchange", viewChange}, {"leader-seen", leaderSeen}, {"first-accept", firstAccept}, {"takeover", takeover}, {"total", total}, {"redirect", redirect}, {"sends-before-kill", baseline}} {
			b.ReportMetric(median(m.d).Seconds()*1e3, m.name+"-p50-ms")
			b.ReportMetric(slices.Max(m.d).Seconds()*1e3, m.name+"-max-ms")
		}
	}
}

type takeoverResult struct {
	detect, viewChange, leaderSeen, firstAccept, takeover, total, redirect time.Duration
	// baseline is the takeover's sends with no failover.
	baseline time.Duration
}

func measureTakeover(b *testing.B, idleFor time.Duration) takeoverResult {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := newCluster(b, 3)
	c.shards = 1
	c.startAll()
	defer c.stop()
	leader := c.awaitLeader(ctx, c.nodes)
	writer, err := leader.dial(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer writer.Close()
	if _, err := writer.CreateStream(ctx, loadStream); err != nil {
		b.Fatal(err)
	}
	if _, err := writer.CreateTopic(ctx, client.NameID(loadStream), loadTopic, takeoverPartitions, nil); err != nil {
		b.Fatal(err)
	}
	msgs := []client.Message{{Payload: make([]byte, payloadBytes)}}
	send := func(cl *client.Client, p int) error {
		target := wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: uint32(p)}
		_, err := cl.SendMessages(ctx, client.NameID(loadStream), client.NameID(loadTopic), target, msgs)
		return err
	}
	for p := range takeoverPartitions {
		if err := send(writer, p); err != nil {
			b.Fatal(err)
		}
	}
	// The same sends again, to partitions that took one already: what the
	// takeover's sends cost with no failover (the baseline).
	baselineFrom := time.Now()
	for p := range takeoverPartitions {
		if err := send(writer, p); err != nil {
			b.Fatal(err)
		}
	}
	baseline := time.Since(baselineFrom)
	// A logged-in client on each survivor, so that the takeover counts no login
	// (a password hash) and no redirect: the leader's is used once it is known.
	survivors := c.others(leader)
	clients := map[*node]*client.Client{}
	logFrom := map[*node]int{}
	for _, n := range survivors {
		cl, err := n.dial(ctx, client.WithLeaderRedirection(false), client.WithRequestTimeout(60*time.Second),
			client.WithTransientRetry(client.TransientRetry{Interval: 10 * time.Millisecond,
				NotCommittedWindow: 60 * time.Second, NotAcceptedWindow: 60 * time.Second}))
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		clients[n] = cl
		logFrom[n] = len(n.logText())
	}
	if idleFor > 0 {
		time.Sleep(idleFor) // the workload's shape (an idle topic), not a wait for an event
	}
	killedAt, exitedAt := leader.kill()
	if exitedAt.IsZero() {
		b.Fatalf("node %d did not exit after SIGKILL", leader.id)
	}
	newLeader := awaitLeaderQuickly(ctx, b, c, survivors)
	leaderSeenAt := time.Now()
	var acceptedAt []time.Time
	for p := range takeoverPartitions {
		if err := send(clients[newLeader], p); err != nil {
			b.Fatalf("partition %d at the new leader, node %d: %v", p, newLeader.id, err)
		}
		acceptedAt = append(acceptedAt, time.Now())
	}
	for _, n := range survivors {
		b.Logf("node %d after the takeover: %s", n.id, replicaDrops(ctx, n))
	}
	redirectFrom := time.Now()
	newcomer, err := c.others(leader, newLeader)[0].dial(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer newcomer.Close()
	if err := send(newcomer, 0); err != nil {
		b.Fatalf("a new client's send through node %d: %v", c.others(leader, newLeader)[0].id, err)
	}
	redirect := time.Since(redirectFrom)
	detectedAt := time.Time{}
	for _, n := range survivors {
		at, ok := logLineAt(n.logText()[logFrom[n]:], `msg="metadata group"`, "status=ViewChange")
		if ok && (detectedAt.IsZero() || at.Before(detectedAt)) {
			detectedAt = at
		}
	}
	normalAt, ok := logLineAt(newLeader.logText()[logFrom[newLeader]:], `msg="metadata group"`, "status=Normal",
		fmt.Sprintf("primary=%d", newLeader.id))
	if detectedAt.IsZero() || !ok {
		b.Fatalf("the survivors' logs do not show the view change:\n%s", newLeader.logTail(4096))
	}
	return takeoverResult{
		detect:      detectedAt.Sub(killedAt),
		viewChange:  normalAt.Sub(detectedAt),
		leaderSeen:  leaderSeenAt.Sub(normalAt),
		firstAccept: acceptedAt[0].Sub(normalAt),
		takeover:    acceptedAt[len(acceptedAt)-1].Sub(normalAt),
		total:       acceptedAt[len(acceptedAt)-1].Sub(killedAt),
		redirect:    redirect,
		baseline:    baseline,
	}
}

// awaitLeaderQuickly is awaitLeader polled every 10 ms (its 100 ms would count in
// the takeover).
func awaitLeaderQuickly(ctx context.Context, b *testing.B, c *cluster, among []*node) *node {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		leader, err := c.agreedLeader(ctx, among)
		if err == nil {
			return leader
		}
		if !waitCtx(ctx, 10*time.Millisecond) {
			b.Fatalf("no agreed leader among nodes %v: %v", ids(among), err)
		}
	}
}

// replicaDrops is a node's /metrics lines of the replica frames it dropped (those
// to the dead node among them: 100 groups each tell it of their view change) or
// found their queue full for (a view change of many groups at once sends many): a
// frame to a live peer lost so waits for a retransmit interval.
func replicaDrops(ctx context.Context, n *node) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		"http://"+net.JoinHostPort("127.0.0.1", strconv.Itoa(n.metricsPort))+"/metrics", nil)
	if err != nil {
		return err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err.Error()
	}
	var out []string
	for line := range strings.Lines(string(body)) {
		if (strings.Contains(line, "replica_frames_dropped_total") || strings.Contains(line, "replica_frames_queue_full_total")) &&
			!strings.HasPrefix(line, "#") && !strings.HasSuffix(strings.TrimSpace(line), " 0") {
			out = append(out, strings.TrimSpace(line))
		}
	}
	if len(out) == 0 {
		return "no replica frame dropped"
	}
	return strings.Join(out, "; ")
}

// logLineAt is the time of the first line of a node's log (slog's text format)
// that holds every one of parts.
func logLineAt(log string, parts ...string) (time.Time, bool) {
	for line := range strings.Lines(log) {
		matches := true
		for _, p := range parts {
			if !strings.Contains(line, p) {
				matches = false
				break
			}
		}
		if !matches {
			continue
		}
		field, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
		at, err := time.Parse(time.RFC3339Nano, field)
		if err == nil {
			return at, true
		}
	}
	return time.Time{}, false
}
