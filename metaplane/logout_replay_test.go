package metaplane

import (
	"bytes"
	"testing"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// TestReplayedForwardedLogoutThatCommitted: a Logout at a backup is forwarded;
// the primary commits it and every replica applies it, but the primary's answer
// never reaches the backup, whose forward times out: the client hears 57 (its
// fate unknown) and replays the Logout there, as the Go SDK does for 30 s. The
// session is gone, ended by that very Logout: the replay is answered with the
// Logout's committed reply, on every replica the same, never an eviction.
func TestReplayedForwardedLogoutThatCommitted(t *testing.T) {
	g := newTestGroup(t)
	client := wire.Uint128{Lo: 1}
	g.planes[0].Register(1, &wire.RequestHeader{Client: client}, 0, 1)
	g.settle()
	epoch := g.hosts[0].answers[1].Epoch
	if epoch == 0 {
		t.Fatalf("no session: %+v", g.hosts[0].answers[1])
	}
	logout := &wire.RequestHeader{Client: client, Session: epoch, Request: 1, Operation: wire.OperationLogout,
		RequestChecksum: wire.RequestChecksum(nil)}
	backup, backupHost := g.planes[1], g.hosts[1]
	backup.Write(2, Request{Header: logout, NowMicros: 2})
	lost := func(from int, m *vsr.Message) bool {
		return m.To == 1 && m.Header.Command == wire.CommandForwardLogoutResult
	}
	for tick := 0; ; tick++ {
		if _, ok := backupHost.answers[2]; ok {
			break
		}
		if tick > 2*vsr.ForwardTimeoutTicks {
			t.Fatal("the forward never timed out")
		}
		g.deliver(lost)
		for _, p := range g.planes {
			p.Tick()
		}
	}
	if a := backupHost.answers[2]; a.Status != wire.ErrTransientNotCommitted {
		t.Fatalf("the logout whose answer was lost: %+v, want 57", a)
	}
	for range 500 {
		g.deliver(lost)
		if _, _, ok := backup.Session(client); !ok {
			break
		}
		for _, p := range g.planes {
			p.Tick()
		}
	}
	if _, _, ok := backup.Session(client); ok {
		t.Fatal("the logout never applied at the backup")
	}
	// The replay, at the backup and, after a reconnect, at another replica.
	var first []byte
	for i, p := range g.planes {
		token := uint64(10 + i)
		p.Write(token, Request{Header: logout, NowMicros: 3})
		a := g.hosts[i].answers[token]
		if a.Frame == nil || !a.LoggedOut || a.Evict != 0 || a.Status != 0 {
			t.Fatalf("replica %d answered the replayed logout %+v, want its committed reply", i, a)
		}
		var rh wire.ReplyHeader
		copy(wire.HeaderBytes(&rh)[:], a.Frame)
		if rh.Request != logout.Request || rh.Operation != wire.OperationLogout {
			t.Fatalf("replica %d replayed a reply to request %d op %v", i, rh.Request, rh.Operation)
		}
		if first == nil {
			first = append([]byte(nil), a.Frame...)
		} else if !bytes.Equal(first, a.Frame) {
			t.Fatalf("replica %d replayed other bytes than replica 0", i)
		}
	}
	// A logout of a session that never existed, and one with another request
	// number, are what they were: no session.
	for _, h := range []*wire.RequestHeader{
		{Client: wire.Uint128{Lo: 99}, Session: epoch, Request: 1, Operation: wire.OperationLogout},
		{Client: client, Session: epoch, Request: 2, Operation: wire.OperationLogout},
		{Client: client, Session: epoch + 1, Request: 1, Operation: wire.OperationLogout},
	} {
		backup.Write(20, Request{Header: h, NowMicros: 4})
		if a := backupHost.answers[20]; a.Evict != wire.EvictionNoSession {
			t.Fatalf("logout %+v: %+v, want no session", h, a)
		}
		delete(backupHost.answers, 20)
	}
}

// TestLogoutProposedTwice: a Logout prepared twice (a replay proposed before the
// first applied) applies once; the second is skipped and answered with the
// first's reply, as every other request proposed twice is, not 59.
func TestLogoutProposedTwice(t *testing.T) {
	m := NewMachine(metadata.NewState("iggy", "x", 1), vsr.NewClientTable(4), "test")
	client := wire.Uint128{Lo: 5}
	m.Apply(&wire.PrepareHeader{Op: 1, Client: client, Operation: wire.OperationRegister}, nil)
	logout := func(op uint64) Commit {
		return m.Apply(&wire.PrepareHeader{Op: op, Client: client, Request: 1, Operation: wire.OperationLogout, Timestamp: op}, nil)
	}
	first := logout(2)
	if first.Skipped || len(first.Ended) != 1 {
		t.Fatalf("the logout: %+v", first)
	}
	firstFrame := append([]byte(nil), first.Frame...)
	second := logout(3)
	if !second.Skipped || !bytes.Equal(second.Frame, firstFrame) {
		t.Fatalf("the logout proposed again: skipped %v, frame %x; want the first's reply %x", second.Skipped, second.Frame, firstFrame)
	}
}
