package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/metaplane"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/wire"
)

// benchMetadataPrimary starts a single node, or a loopback cluster of nodes at
// the production defaults (the cluster tests' short timings aside), and returns
// the metadata primary with a root client logged in there.
func benchMetadataPrimary(b *testing.B, nodes int) (*Server, *client.Client) {
	return benchMetadataPrimaryWith(b, nodes, func(*setup) {})
}

// benchMetadataPrimaryWith is benchMetadataPrimary with every node's
// configuration adjusted.
func benchMetadataPrimaryWith(b *testing.B, nodes int, adjust func(*setup)) (*Server, *client.Client) {
	if nodes == 1 {
		return benchServerWith(b, adjust)
	}
	cfgs := clusterConfigs(b, nodes, testClusterSecret)
	servers := make([]*Server, nodes)
	for i := range cfgs {
		cfgs[i].SnapshotIntervalOps = defaultSetup().SnapshotIntervalOps
		adjust(&cfgs[i])
		s, err := start(cfgs[i], slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			b.Fatal(err)
		}
		servers[i] = s
		b.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s.Shutdown(ctx)
		})
	}
	var primary *Server
	for deadline := time.Now().Add(clusterWait); primary == nil; time.Sleep(10 * time.Millisecond) {
		if l, ok := agreedLeader(servers); ok {
			primary = servers[l]
		} else if time.Now().After(deadline) {
			b.Fatal("the cluster did not form")
		}
	}
	c, err := client.Dial(context.Background(), primary.Addr().String(), client.WithCredentials("iggy", "iggy"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return primary, c
}

// latencies collects one duration per commit (or login) and reports the rate
// and the p50 and p99.
type latencies struct{ all []time.Duration }

func (l *latencies) report(b *testing.B, elapsed time.Duration, unit string) {
	slices.Sort(l.all)
	b.ReportMetric(float64(len(l.all))/elapsed.Seconds(), unit+"/s")
	b.ReportMetric(float64(l.all[len(l.all)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(l.all[len(l.all)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkClusterMetadataWrites is one client's metadata commits at the metadata
// primary of a 3-node loopback cluster, beside a single node in the same run: the
// cost of the replication round (the prepare to a backup and its PrepareOk after
// its own fdatasync) over the primary's own append and fdatasync. op=update is
// UpdateStream, one at a time (commits/s, p50, p99); op=create-delete is
// CreateStream then DeleteStream (the partitions' shards make and remove the
// stream's directory before the reply), each a commit; op=pat-login is a login
// with a personal access token on a logged-in client, a logout and a register,
// two commits (logins/s).
//
//	go test ./server -run '^$' -bench BenchmarkClusterMetadataWrites -benchtime 2000x
func BenchmarkClusterMetadataWrites(b *testing.B) {
	for _, op := range []string{"update", "create-delete", "pat-login"} {
		for _, nodes := range []int{1, 3} {
			b.Run(fmt.Sprintf("op=%s/nodes=%d", op, nodes), func(b *testing.B) {
				_, c := benchMetadataPrimary(b, nodes)
				ctx := context.Background()
				st, err := c.CreateStream(ctx, "bench")
				if err != nil {
					b.Fatal(err)
				}
				id := wire.NumericIdentifier(st.ID)
				token, err := c.CreatePersonalAccessToken(ctx, "bench", 0)
				if err != nil {
					b.Fatal(err)
				}
				l := latencies{all: make([]time.Duration, 0, 2*b.N)}
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				for k := range b.N {
					t0 := time.Now()
					switch op {
					case "update":
						err = c.UpdateStream(ctx, id, fmt.Sprintf("bench-%d", k))
					case "create-delete":
						var s *wire.StreamDetails
						if s, err = c.CreateStream(ctx, fmt.Sprintf("bench-%d", k)); err == nil {
							l.all = append(l.all, time.Since(t0))
							t0 = time.Now()
							err = c.DeleteStream(ctx, wire.NumericIdentifier(s.ID))
						}
					case "pat-login":
						_, err = c.LoginWithPersonalAccessToken(ctx, token)
					}
					if err != nil {
						b.Fatal(err)
					}
					l.all = append(l.all, time.Since(t0))
				}
				elapsed := time.Since(start)
				b.StopTimer()
				unit := "commits"
				if op == "pat-login" {
					unit = "logins"
				}
				l.report(b, elapsed, unit)
			})
		}
	}
}

// BenchmarkClusterPasswordLogin is a leader-aware client's password login (one
// argon2id check at the node that verifies it) at the metadata primary, and at a
// follower, which verifies it, forwards the session to the primary and answers
// once it applied the Register, after which the client moves to the primary and
// logs in there again: one argon2id check more. The cluster runs the production
// timings (a commit broadcast every 500 ms).
//
//	go test ./server -run '^$' -bench BenchmarkClusterPasswordLogin -benchtime 20x
func BenchmarkClusterPasswordLogin(b *testing.B) {
	cfgs := clusterConfigs(b, 3, testClusterSecret)
	servers := make([]*Server, len(cfgs))
	for i := range cfgs {
		cfgs[i].clusterTiming = nil
		s, err := start(cfgs[i], slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			b.Fatal(err)
		}
		servers[i] = s
		b.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s.Shutdown(ctx)
		})
	}
	for deadline := time.Now().Add(clusterWait); ; time.Sleep(10 * time.Millisecond) {
		if l, ok := agreedLeader(servers); ok && l == 0 {
			break
		} else if time.Now().After(deadline) {
			b.Fatal("the cluster did not form")
		}
	}
	for _, at := range []int{0, 1} {
		name := map[int]string{0: "at=primary", 1: "at=follower"}[at]
		b.Run(name, func(b *testing.B) {
			l := latencies{all: make([]time.Duration, 0, b.N)}
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				t0 := time.Now()
				c, err := client.Dial(context.Background(), servers[at].Addr().String(), client.WithCredentials("iggy", "iggy"))
				if err != nil {
					b.Fatal(err)
				}
				l.all = append(l.all, time.Since(t0))
				c.Close()
			}
			elapsed := time.Since(start)
			b.StopTimer()
			l.report(b, elapsed, "logins")
		})
	}
}

// BenchmarkClusterSessionChurn is what a session's end through the log costs under
// connection churn: 16 clients that each connect, log in with a personal access
// token and close the connection at once, b.N times in all, at a single node and
// at the metadata primary of a 3-node loopback cluster. mode=end-op is the server:
// each close ends its session by an EndSessions op at the node that held it
// (batched with the closes that came meanwhile); mode=local is the server before
// that op (metaplane.MutationDropSessionOnClose: the entry removed at once on the
// node that held the connection, nothing proposed, the replicas' tables drift);
// mode=hold closes nothing until the timing ends. logins/s counts the logins;
// ends/s the sessions ended, up to the moment the primary's client table is back
// to what it held before; ends/op how many sessions an EndSessions op carried.
//
//	go test ./server -run '^$' -bench BenchmarkClusterSessionChurn -benchtime 4000x
func BenchmarkClusterSessionChurn(b *testing.B) {
	for _, nodes := range []int{1, 3} {
		for _, mode := range []string{"end-op", "local", "hold"} {
			b.Run(fmt.Sprintf("nodes=%d/mode=%s", nodes, mode), func(b *testing.B) {
				adjust := func(*setup) {}
				if mode == "local" {
					adjust = func(cfg *setup) { cfg.metaMutation = metaplane.MutationDropSessionOnClose }
				}
				primary, c := benchMetadataPrimaryWith(b, nodes, adjust)
				ctx := context.Background()
				token, err := c.CreatePersonalAccessToken(ctx, "churn", 0)
				if err != nil {
					b.Fatal(err)
				}
				tableLen := func() int {
					n := -1
					if err := primary.rt.Inspect(ctx, func(sh *shard.Shard) {
						if sh.Index() == 0 {
							n = primary.meta.Table().Len()
						}
					}); err != nil {
						b.Fatal(err)
					}
					return n
				}
				const workers = 16
				held := make([][]*client.Client, workers)
				sessionsBefore := tableLen()
				opsBefore, endsBefore := primary.meta.EndSessionOps(), primary.meta.SessionEndsProposed()
				var failed atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				start := time.Now()
				for w := range workers {
					wg.Go(func() {
						for i := w; i < b.N; i += workers {
							cl, err := client.Dial(ctx, primary.Addr().String(), client.WithPersonalAccessToken(token), client.WithLeaderRedirection(false))
							if err != nil {
								failed.Add(1)
								continue
							}
							if mode == "hold" {
								held[w] = append(held[w], cl)
							} else {
								cl.Close()
							}
						}
					})
				}
				wg.Wait()
				loggedIn := time.Since(start)
				ended := loggedIn
				if mode != "hold" {
					// The closes' ends may still be on their way (an EndSessions op
					// proposed, committed, applied): time them to the last.
					deadline := time.Now().Add(clusterWait)
					for tableLen() > sessionsBefore && time.Now().Before(deadline) {
						time.Sleep(time.Millisecond)
					}
					ended = time.Since(start)
				}
				b.StopTimer()
				ops, ends := primary.meta.EndSessionOps()-opsBefore, primary.meta.SessionEndsProposed()-endsBefore
				for _, cls := range held {
					for _, cl := range cls {
						cl.Close()
					}
				}
				if failed.Load() > 0 {
					b.Fatalf("%d logins failed", failed.Load())
				}
				if n := tableLen(); mode != "hold" && n > sessionsBefore {
					b.Fatalf("the primary's table holds %d sessions %v after the closes, %d before", n, clusterWait, sessionsBefore)
				}
				b.ReportMetric(float64(b.N)/loggedIn.Seconds(), "logins/s")
				if mode != "hold" {
					b.ReportMetric(float64(b.N)/ended.Seconds(), "ends/s")
				}
				if mode == "end-op" && ops > 0 {
					b.ReportMetric(float64(ends)/float64(ops), "ends/op")
				}
			})
		}
	}
}
