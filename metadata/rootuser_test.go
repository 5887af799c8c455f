package metadata

import (
	"bytes"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// TestRootUserFromAProposal: a cluster's state starts without users and gets its
// root from one replicated CreateUser under client id 0; replicas that apply the
// same proposal hold the same bytes, and a second proposal changes nothing.
func TestRootUserFromAProposal(t *testing.T) {
	proposal, err := ProposeRootUser(nil, "admin", "secret", []byte("fixed-salt-16byt"))
	if err != nil {
		t.Fatal(err)
	}
	h := Header{Operation: wire.OperationCreateUser, UserID: RootUserID, TimestampMicros: tsStart}
	var snapshots [][]byte
	for range 2 {
		s := NewStateWithoutRoot()
		if s.HasRoot() {
			t.Fatal("a state without root has a root")
		}
		empty := s.AppendSnapshot(nil, 0)
		if _, _, err := DecodeSnapshot(empty); err != nil {
			t.Fatalf("the snapshot of a state without users does not decode: %v", err)
		}
		var out Output
		s.Apply(h, proposal, &out)
		if out.Result != 0 {
			t.Fatalf("root user proposal refused: %v", out.Result)
		}
		u := s.User(RootUserID)
		if u == nil || u.Username != "admin" || u.CreatedAtMicros != tsStart || u.Status != wire.UserActive || u.Permissions != nil {
			t.Fatalf("root user %+v", u)
		}
		if !VerifyPassword(u.PasswordHash, []byte("secret")) {
			t.Fatal("the root user's password does not verify")
		}
		// Another primary's proposal (another salt, later) creates nobody.
		again, _ := ProposeRootUser(nil, "other", "secret", []byte("other-salt-16byt"))
		h2 := h
		h2.TimestampMicros++
		s.Apply(h2, again, &out)
		if out.Result != wire.ErrUserAlreadyExists || s.users.count != 1 || s.User(RootUserID).Username != "admin" {
			t.Fatalf("a second root proposal: result %v, %d users", out.Result, s.users.count)
		}
		checkInvariants(t, s)
		snapshots = append(snapshots, s.AppendSnapshot(nil, 2))
	}
	if !bytes.Equal(snapshots[0], snapshots[1]) {
		t.Fatal("two replicas that applied the same root proposal differ")
	}
	decoded, _, err := DecodeSnapshot(snapshots[0])
	if err != nil || !decoded.HasRoot() {
		t.Fatalf("DecodeSnapshot: %v", err)
	}
}

// TestRootUserProposalOnlyFromTheServer: client id 0 is the server's own; a
// proposal under it that is not a bare active user, or not as root, is refused,
// and a client's CreateUser on a state without users is unauthorized.
func TestRootUserProposalOnlyFromTheServer(t *testing.T) {
	proposal, err := ProposeRootUser(nil, "admin", "secret", []byte("fixed-salt-16byt"))
	if err != nil {
		t.Fatal(err)
	}
	var out Output
	s := NewStateWithoutRoot()
	s.Apply(Header{Operation: wire.OperationCreateUser, UserID: 7}, proposal, &out)
	if out.Result != wire.ErrInvalidCommand || s.HasRoot() {
		t.Fatalf("root proposal as user 7: %v", out.Result)
	}
	s.Apply(Header{Operation: wire.OperationCreateUser, UserID: RootUserID, Client: wire.Uint128{Lo: 1}}, proposal, &out)
	if out.Result != wire.ErrUnauthorized || s.HasRoot() {
		t.Fatalf("a client's CreateUser on a state without users: %v", out.Result)
	}
	inactive, _ := ProposeCreateUser(nil, body((&wire.CreateUser{Username: []byte("admin"), Password: []byte("x"), Status: wire.UserInactive}).Append(nil)), []byte("fixed-salt-16byt"))
	s.Apply(Header{Operation: wire.OperationCreateUser, UserID: RootUserID}, inactive, &out)
	if out.Result != wire.ErrInvalidCommand || s.HasRoot() {
		t.Fatalf("an inactive root: %v", out.Result)
	}
}

// TestSnapshotWithUsersButNoRootIsCorrupt: only a state without any user may
// lack the root.
func TestSnapshotWithUsersButNoRootIsCorrupt(t *testing.T) {
	f := newFixture(t)
	f.must(wire.OperationCreateUser, root, body(ProposeCreateUser(nil, body((&wire.CreateUser{Username: []byte("alice"), Password: []byte("pw"), Status: wire.UserActive}).Append(nil)), []byte("fixed-salt-16byt"))))
	f.s.removeUser(f.s.User(RootUserID))
	if _, _, err := DecodeSnapshot(f.s.AppendSnapshot(nil, 3)); err == nil {
		t.Fatal("a snapshot with users and no root decoded")
	}
}
