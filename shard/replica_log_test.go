package shard

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A partition group's frame refused for a full queue is back-pressure: logged at
// INFO at most once a minute, the next line saying how many were left out; a
// control frame refused so is logged at WARN at most once a second. The classes do
// not share their budget.
func TestQueueFullLoggedByClass(t *testing.T) {
	var out bytes.Buffer
	s := &Shard{log: slog.New(slog.NewTextHandler(&out, nil)), clock: loopClock{nowNs: 5e9}, replica: &replicaShard{},
		rt: &Runtime{replica: &replicaRuntime{capacity: [replicaClassCount]int{ReplicaControl: 256, ReplicaPartition: 1024}}}}
	for range 100 {
		s.refuseQueueFull(1, ReplicaPartition)
		s.refuseQueueFull(1, ReplicaControl)
	}
	s.clock.nowNs += int64(time.Second)
	s.refuseQueueFull(1, ReplicaPartition)
	s.refuseQueueFull(1, ReplicaControl)
	s.clock.nowNs += int64(time.Minute)
	s.refuseQueueFull(1, ReplicaPartition)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{
		"level=INFO .* class=partition capacity=1024$",
		"level=WARN .* class=control capacity=256$",
		"level=WARN .* class=control capacity=256 like_it_since_the_last_line=99$",
		"level=INFO .* class=partition capacity=1024 like_it_since_the_last_line=100$",
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, line := range lines {
		level, rest, _ := strings.Cut(want[i], " .* ")
		if !strings.Contains(line, level) || !strings.HasSuffix(line, strings.TrimSuffix(rest, "$")) {
			t.Fatalf("line %d: %q, want %q", i, line, want[i])
		}
	}
	st := &s.counters.replica.classes
	if st[ReplicaPartition].queueFull.Load() != 102 || st[ReplicaControl].queueFull.Load() != 101 {
		t.Fatalf("queue-full counts: partition %d, control %d", st[ReplicaPartition].queueFull.Load(), st[ReplicaControl].queueFull.Load())
	}
}
