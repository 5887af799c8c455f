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
