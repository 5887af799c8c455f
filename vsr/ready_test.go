package vsr

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// TestSendableEarly: only a Prepare, in a Ready that changes no durable state,
// may leave before the Ready's durable work.
func TestSendableEarly(t *testing.T) {
	message := func(command wire.Command) Message {
		var m Message
		m.Header.Command = command
		return m
	}
	plain := func() Ready {
		return Ready{Messages: []Message{message(wire.CommandPrepare), message(wire.CommandPrepareOk), message(wire.CommandCommit)}}
	}
	rd := plain()
	for i, want := range []bool{true, false, false} {
		if got := rd.SendableEarly(i); got != want {
			t.Errorf("message %v: SendableEarly %v, want %v", rd.Messages[i].Header.Command, got, want)
		}
	}
	for name, change := range map[string]func(*Ready){
		"state":        func(rd *Ready) { rd.State = &DurableState{View: 1} },
		"view headers": func(rd *Ready) { rd.ViewHeaders = []wire.PrepareHeader{} },
		"truncate":     func(rd *Ready) { rd.Truncate = true },
		"discards":     func(rd *Ready) { rd.Discards = []uint64{3} },
	} {
		rd := plain()
		change(&rd)
		if rd.SendableEarly(0) {
			t.Errorf("a Prepare in a Ready with a %s change is sendable early", name)
		}
	}
}

// TestCommitEagerly: with CommitEagerly the backups apply an op as soon as its
// quorum formed (the primary's Commit leaves with its commits), without waiting
// for the commit broadcast; without it they learn of it only then.
func TestCommitEagerly(t *testing.T) {
	for _, eager := range []bool{false, true} {
		tc := newTestCluster(t, 3)
		for _, c := range tc.cores {
			c.cfg.CommitEagerly = eager
		}
		op := tc.propose(0, 1, 1)
		tc.deliver(100)
		for i, c := range tc.cores[1:] {
			if applied := c.CommitMin() == op; applied != eager {
				t.Errorf("eager %v: backup %d applied op %d before any tick: %v", eager, i+1, op, applied)
			}
		}
		// A burst: one Commit per backup once the last op of it commits.
		commits := 0
		tc.onFrame = func(frame []byte) {
			if wire.Command(frame[wire.CommandFieldOffset]) == wire.CommandCommit {
				commits++
			}
		}
		for request := uint64(2); request <= 4; request++ {
			if _, err := tc.cores[0].Propose(Proposal{Client: wire.Uint128{Lo: 1}, Request: request, Operation: wire.OperationCreateStream}, []byte{1}, 1000); err != nil {
				t.Fatal(err)
			}
		}
		tc.drain(0)
		tc.deliver(100)
		if want := map[bool]int{false: 0, true: 2}[eager]; commits != want {
			t.Errorf("eager %v: %d Commit frames for a burst of 3 ops, want %d", eager, commits, want)
		}
	}
}
