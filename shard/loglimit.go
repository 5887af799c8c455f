package shard

import (
	"context"
	"log/slog"
)

// A shard logs a kind of event (a connection closed for a timeout, say) at most
// once a second, so that ten thousand idle connections closing together, or a
// client retrying in a loop, cost a line a second and not one each; the next line
// of the kind says how many were left out.

type logKind uint8

const (
	logFrameTimeout logKind = iota
	logIdleTimeout
	logRepliesNotRead
	logNoPipe
	logKindCount
)

type logLimiter struct {
	lastNs  [logKindCount]int64
	dropped [logKindCount]int
}

// logLimited logs msg at level unless a line of its kind left less than a second
// ago (on the shard's clock).
func (s *Shard) logLimited(kind logKind, level slog.Level, msg string, args ...any) {
	l := &s.logLimits
	if l.lastNs[kind] != 0 && s.clock.nowNs-l.lastNs[kind] < int64(1e9) {
		l.dropped[kind]++
		return
	}
	l.lastNs[kind] = s.clock.nowNs
	if n := l.dropped[kind]; n > 0 {
		args = append(args, "like_it_in_the_last_second", n)
		l.dropped[kind] = 0
	}
	s.log.Log(context.Background(), level, msg, args...)
}
