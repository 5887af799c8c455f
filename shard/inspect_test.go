package shard

import (
	"context"
	"testing"
	"time"
)

// TestInspectCopiesEveryShardsStats: Runtime.Inspect runs on every shard's goroutine
// and sees the counters move as requests are served.
func TestInspectCopiesEveryShardsStats(t *testing.T) {
	rt := startTestRuntime(t, Config{ShardCount: 2})
	collect := func() []Stats {
		t.Helper()
		got := make([]Stats, rt.ShardCount())
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := rt.Inspect(ctx, func(s *Shard) { got[s.Index()] = s.Stats() }); err != nil {
			t.Fatal(err)
		}
		return got
	}
	before := collect()
	c := dial(t, rt)
	for r := range uint64(10) {
		c.ping(r)
	}
	after := collect()
	var served, received, sent uint64
	connections := 0
	for i := range after {
		if after[i].Shard != i {
			t.Fatalf("stats of shard %d copied as shard %d", i, after[i].Shard)
		}
		served += after[i].RequestsServed - before[i].RequestsServed
		received += after[i].BytesReceived - before[i].BytesReceived
		sent += after[i].BytesSent - before[i].BytesSent
		connections += after[i].Connections
		if after[i].CQEsReaped == 0 || after[i].SQEsPrepared == 0 {
			t.Fatalf("shard %d: %+v: no ring activity counted", i, after[i])
		}
	}
	if served != 10 || received != 10*256 || sent != 10*256 || connections != 1 {
		t.Fatalf("served %d, received %d B, sent %d B over %d connections; want 10, 2560, 2560, 1", served, received, sent, connections)
	}
}
