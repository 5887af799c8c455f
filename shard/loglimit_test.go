package shard

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestLogLimitedOncePerSecondAndKind: a kind of event logs at most one line a
// second per shard; the next line says how many were left out; kinds do not share
// their budget.
func TestLogLimitedOncePerSecondAndKind(t *testing.T) {
	var out bytes.Buffer
	s := &Shard{log: slog.New(slog.NewTextHandler(&out, nil)), clock: loopClock{nowNs: 5e9}}
	for range 100 {
		s.logLimited(logIdleTimeout, slog.LevelInfo, "connection closed: idle timeout")
	}
	s.logLimited(logRepliesNotRead, slog.LevelWarn, "connection closed: replies not read")
	s.clock.nowNs += 1e9
	s.logLimited(logIdleTimeout, slog.LevelInfo, "connection closed: idle timeout")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), out.String())
	}
	if !strings.Contains(lines[2], "like_it_in_the_last_second=99") || !strings.Contains(lines[1], "replies not read") {
		t.Fatalf("lines:\n%s", out.String())
	}
}
