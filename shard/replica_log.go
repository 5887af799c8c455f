package shard

import (
	"context"
	"log/slog"
	"net/netip"
	"time"
)

// The replica plane logs like the rest of the shard: a kind of event at most once per
// its interval (the next line says how many were left out), and a refused peer once
// per address and reason, again only after refusalLogInterval, so that a
// misconfigured node redialing every few seconds costs a line a minute, not one per
// attempt.

type replicaLogKind uint8

const (
	// replicaLogQueueFull: a control frame (the metadata group's) refused for a
	// full queue: consensus traffic is falling behind, an operator looks.
	replicaLogQueueFull replicaLogKind = iota
	// replicaLogBackPressure: a partition group's frame refused for a full queue:
	// the peer reads slower than the groups send, and their retransmissions pace
	// them (back-pressure, not a fault).
	replicaLogBackPressure
	replicaLogNoBuffer
	replicaLogBadFrame
	replicaLogDialFailed
	replicaLogKindCount
)

// replicaLogPolicies says how often a line of each kind may be logged, and at
// which level.
var replicaLogPolicies = [replicaLogKindCount]struct {
	interval time.Duration
	level    slog.Level
}{
	replicaLogQueueFull:    {time.Second, slog.LevelWarn},
	replicaLogBackPressure: {time.Minute, slog.LevelInfo},
	replicaLogNoBuffer:     {time.Second, slog.LevelWarn},
	replicaLogBadFrame:     {time.Second, slog.LevelWarn},
	replicaLogDialFailed:   {time.Second, slog.LevelWarn},
}

type replicaLogLimiter struct {
	lastNs  [replicaLogKindCount]int64
	dropped [replicaLogKindCount]int
}

func (s *Shard) logLimitedReplica(kind replicaLogKind, msg string, args ...any) {
	if s.replicaLogAllowed(kind) {
		s.logReplica(kind, msg, args...)
	}
}

// replicaLogAllowed reports whether a line of kind may be logged now, counting it as
// left out when not: a caller on a hot path asks first, so that a flood of drops
// builds no log arguments.
func (s *Shard) replicaLogAllowed(kind replicaLogKind) bool {
	l := &s.replica.logLimits
	if l.lastNs[kind] != 0 && s.clock.nowNs-l.lastNs[kind] < int64(replicaLogPolicies[kind].interval) {
		l.dropped[kind]++
		return false
	}
	return true
}

// logReplica logs a line replicaLogAllowed let through.
func (s *Shard) logReplica(kind replicaLogKind, msg string, args ...any) {
	l := &s.replica.logLimits
	l.lastNs[kind] = s.clock.nowNs
	if n := l.dropped[kind]; n > 0 {
		args = append(args, "like_it_since_the_last_line", n)
		l.dropped[kind] = 0
	}
	s.log.Log(context.Background(), replicaLogPolicies[kind].level, msg, args...)
}

// refusalLogInterval is how long a refusal of one address for one reason stays quiet
// after it was logged.
const refusalLogInterval = time.Minute

// refusalLogEntriesMax bounds the remembered refusals: past it the memory is wiped,
// which costs at most one line per address again.
const refusalLogEntriesMax = 1024

type refusalKey struct {
	addr   netip.Addr
	reason string
}

type refusalEntry struct {
	lastNs  int64
	dropped int
}

type refusalLog struct {
	last map[refusalKey]refusalEntry
}

// logRefusal logs a refused replica connection once per peer address and reason.
func (s *Shard) logRefusal(addr netip.AddrPort, reason string, args ...any) {
	r := &s.replica.refusals
	key := refusalKey{addr: addr.Addr(), reason: reason}
	e, seen := r.last[key]
	if seen && s.clock.nowNs-e.lastNs < int64(refusalLogInterval) {
		e.dropped++
		r.last[key] = e
		return
	}
	if len(r.last) >= refusalLogEntriesMax {
		clear(r.last)
	}
	args = append([]any{"peer_address", addr.String(), "reason", reason}, args...)
	if e.dropped > 0 {
		args = append(args, "like_it_since_the_last_line", e.dropped)
	}
	r.last[key] = refusalEntry{lastNs: s.clock.nowNs}
	s.log.Warn("replica connection refused", args...)
}
