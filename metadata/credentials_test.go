package metadata

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

var testSalt = []byte("0123456789abcdef")

func TestPasswordHash(t *testing.T) {
	h := HashPassword([]byte("iggy"), testSalt)
	if !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Fatalf("PHC string %q", h)
	}
	if h != HashPassword([]byte("iggy"), testSalt) {
		t.Fatal("hashing with the same salt is not deterministic")
	}
	if !VerifyPassword(h, []byte("iggy")) || VerifyPassword(h, []byte("iggz")) || VerifyPassword(h, nil) {
		t.Fatal("verification")
	}
	for _, bad := range []string{
		"",
		"plain",
		strings.Replace(h, "argon2id", "argon2i", 1),
		strings.Replace(h, "v=19", "v=16", 1),
		strings.Replace(h, "m=19456", "m=999999999", 1), // cost out of bounds
		strings.Replace(h, "t=2", "t=0", 1),
		strings.Replace(h, "p=1", "p=x", 1),
		h[:len(h)-5],
		h + "$",
	} {
		if VerifyPassword(bad, []byte("iggy")) {
			t.Errorf("%q verifies", bad)
		}
	}
}

func TestTokens(t *testing.T) {
	var secret [TokenSecretBytes]byte
	for i := range secret {
		secret[i] = byte(i * 7)
	}
	tok := EncodeToken(&secret)
	if len(tok) != 43 || bytes.ContainsAny(tok, "+/=") {
		t.Fatalf("token %q", tok)
	}
	if HashToken(tok) == HashToken(append(tok[:42:42], 'x')) {
		t.Fatal("hash ignores the last byte")
	}
}

func TestProposalsAndLogin(t *testing.T) {
	f := newFixture(t)
	f.s.User(root).PasswordHash = HashPassword([]byte("iggy"), testSalt)

	// CreateUser: the proposal carries the hash, and the user can then log in.
	client := body((&wire.CreateUser{Username: []byte("alice"), Password: []byte("s3cret"), Status: 1}).Append(nil))
	proposal, err := ProposeCreateUser(nil, client, testSalt)
	if err != nil || bytes.Contains(proposal, []byte("s3cret")) {
		t.Fatalf("proposal %q (%v)", proposal, err)
	}
	f.must(wire.OperationCreateUser, root, proposal)
	creds := Credentials{State: f.s, NowMicros: f.ts}
	if id, ok := creds.CheckPassword([]byte("alice"), []byte("s3cret")); !ok || id != alice {
		t.Fatalf("login: %d %v", id, ok)
	}
	if _, ok := creds.CheckPassword([]byte("alice"), []byte("wrong")); ok {
		t.Fatal("wrong password logs in")
	}
	if _, ok := creds.CheckPassword([]byte("nobody"), []byte("s3cret")); ok {
		t.Fatal("unknown user logs in")
	}
	// Off the state's goroutine: the hash to check, then VerifyPassword.
	if h := f.s.PasswordHashToCheck([]byte("alice")); !VerifyPassword(h, []byte("s3cret")) || VerifyPassword(h, []byte("wrong")) {
		t.Fatal("PasswordHashToCheck(alice) is not alice's hash")
	}
	if h := f.s.PasswordHashToCheck([]byte("nobody")); h != unknownUserHash {
		t.Fatalf("PasswordHashToCheck(nobody) = %q, want the unknown-user hash", h)
	}
	if _, err := ProposeCreateUser(nil, []byte{0}, testSalt); err != wire.ErrInvalidCommand {
		t.Fatalf("malformed CreateUser: %v", err)
	}

	// ChangePassword: a wrong current password commits as 42, a right one changes it.
	change := func(current, next string) []byte {
		return body((&wire.ChangePassword{UserID: str("alice"), CurrentPassword: []byte(current), NewPassword: []byte(next)}).Append(nil))
	}
	wrong, err := f.s.ProposeChangePassword(nil, change("nope", "n3w"), testSalt)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.apply(wire.OperationChangePassword, alice, wrong); got != wire.ErrInvalidCredentials {
		t.Fatalf("wrong current password: %v", got)
	}
	right, err := f.s.ProposeChangePassword(nil, change("s3cret", "n3w"), testSalt)
	if err != nil {
		t.Fatal(err)
	}
	f.must(wire.OperationChangePassword, alice, right)
	if _, ok := creds.CheckPassword([]byte("alice"), []byte("n3w")); !ok {
		t.Fatal("new password refused")
	}
	// Replaying the same proposal after the change fails: the verified hash is stale.
	if got := f.apply(wire.OperationChangePassword, alice, right); got != wire.ErrInvalidCredentials {
		t.Fatalf("stale proposal: %v", got)
	}

	// Inactive users cannot log in with a password.
	f.must(wire.OperationUpdateUser, root, body((&wire.UpdateUser{UserID: num(alice), HasStatus: true, Status: wire.UserInactive}).Append(nil)))
	if _, ok := creds.CheckPassword([]byte("alice"), []byte("n3w")); ok {
		t.Fatal("inactive user logs in")
	}

	// CreatePersonalAccessToken and a token login through wire.DecideRegister.
	var secret [TokenSecretBytes]byte
	secret[0] = 1
	token := EncodeToken(&secret)
	pat, err := ProposeCreatePersonalAccessToken(nil, body((&wire.CreatePersonalAccessToken{Name: []byte("ci")}).Append(nil)), HashToken(token))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(pat, token) {
		t.Fatal("the proposal, which is journaled, holds the token")
	}
	f.must(wire.OperationCreatePersonalAccessToken, root, pat)
	if id, reason := creds.CheckToken(token); id != root || reason != wire.EvictionReserved {
		t.Fatalf("token login: %d %v", id, reason)
	}
	login := registerWithToken(token)
	if d := wire.DecideRegister(login, wire.AcceptedProtocolWindow, creds); !d.LoggedIn() || d.UserID != root {
		t.Fatalf("DecideRegister: %+v", d)
	}
	if _, err := ProposeCreatePersonalAccessToken(nil, []byte{1}, HashToken(token)); err != wire.ErrInvalidCommand {
		t.Fatalf("malformed token request: %v", err)
	}
}

// TestTokenProposalWrittenBefore: a journal written while proposals carried the
// token itself ([name Name][expiry u64][token Name]) still replays, and the state
// keeps only the token's digest.
func TestTokenProposalWrittenBefore(t *testing.T) {
	f := newFixture(t)
	legacy, _ := wire.AppendName(nil, []byte("old"))
	legacy = binary.LittleEndian.AppendUint64(legacy, 0)
	legacy, _ = wire.AppendName(legacy, []byte("legacy-token-text"))
	if got := f.apply(wire.OperationCreatePersonalAccessToken, root, legacy); got != 0 {
		t.Fatalf("legacy proposal: %v", got)
	}
	if id, reason := f.s.CheckToken([]byte("legacy-token-text"), 0); id != root || reason != wire.EvictionReserved {
		t.Fatalf("legacy token login: %d %v", id, reason)
	}
	if snap := f.s.AppendSnapshot(nil, 1); bytes.Contains(snap, []byte("legacy-token-text")) {
		t.Fatal("the snapshot holds the token")
	}
	for _, bad := range [][]byte{
		legacy[:len(legacy)-1],                                // token cut short
		append(append([]byte(nil), legacy[:4+8]...), 0, 1, 2), // digest cut short
		append(tokenBody("x", 0, "t"), 9),                     // a byte after the digest
	} {
		if got := f.apply(wire.OperationCreatePersonalAccessToken, root, bad); got != wire.ErrInvalidCommand {
			t.Errorf("proposal % x: got %v, want %v", bad, got, wire.ErrInvalidCommand)
		}
	}
}

// registerWithToken builds a LoginRegisterWithPat body: the version prefix, then
// [token Name][context_len u32].
func registerWithToken(token []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(wire.ServerProtocolVersion))
	b = append(b, 2, 'g', 'o', 1, '1')
	b = append(b, uint8(len(token)))
	b = append(b, token...)
	return binary.LittleEndian.AppendUint32(b, 0)
}

func TestUnknownUserHashIsWellFormed(t *testing.T) {
	p, ok := parsePHC(unknownUserHash)
	if !ok || p.memoryKiB != argon2MemoryKiB || p.iterations != argon2Iterations || p.parallelism != argon2Parallelism {
		t.Fatalf("unknownUserHash parses as %+v, %v: an unknown username would answer faster", p, ok)
	}
}

// TestChangePasswordSplit: the state is read on one goroutine
// (ChangePasswordCurrentHash) and the argon2id work done on another
// (ProposeChangePasswordWith); together they propose exactly what
// State.ProposeChangePassword does, for every kind of target and current password.
func TestChangePasswordSplit(t *testing.T) {
	f := newFixture(t)
	client := body((&wire.CreateUser{Username: []byte("alice"), Password: []byte("s3cret"), Status: wire.UserActive}).Append(nil))
	f.must(wire.OperationCreateUser, root, body(ProposeCreateUser(nil, client, testSalt)))
	aliceHash := f.s.User(alice).PasswordHash
	change := func(target wire.Identifier, current string) []byte {
		return body((&wire.ChangePassword{UserID: target, CurrentPassword: []byte(current), NewPassword: []byte("n3w")}).Append(nil))
	}
	newHash := HashPassword([]byte("n3w"), testSalt)
	for _, tc := range []struct {
		name         string
		request      []byte
		currentHash  string // what ChangePasswordCurrentHash reads
		verifiedHash string // what the proposal carries as verified
	}{
		{"right password, by name", change(str("alice"), "s3cret"), aliceHash, aliceHash},
		{"right password, by id", change(num(alice), "s3cret"), aliceHash, aliceHash},
		{"wrong password", change(str("alice"), "nope"), aliceHash, ""},
		{"empty password", change(str("alice"), ""), aliceHash, ""},
		{"unknown user", change(str("nobody"), "s3cret"), "", ""},
		{"unknown id", change(num(999), "s3cret"), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			currentHash, err := f.s.ChangePasswordCurrentHash(tc.request)
			if err != nil || currentHash != tc.currentHash {
				t.Fatalf("ChangePasswordCurrentHash = %q, %v; want %q", currentHash, err, tc.currentHash)
			}
			split, err := ProposeChangePasswordWith([]byte("dst:"), tc.request, currentHash, testSalt)
			if err != nil {
				t.Fatal(err)
			}
			whole, err := f.s.ProposeChangePassword([]byte("dst:"), tc.request, testSalt)
			if err != nil || !bytes.Equal(split, whole) {
				t.Fatalf("split proposal %q, ProposeChangePassword %q (%v)", split, whole, err)
			}
			var p wire.ChangePassword
			if err := p.Decode(split[len("dst:"):]); err != nil {
				t.Fatalf("proposal does not decode: %v", err)
			}
			if string(p.CurrentPassword) != tc.verifiedHash || string(p.NewPassword) != newHash {
				t.Fatalf("proposal carries verified %q, new %q; want %q, %q", p.CurrentPassword, p.NewPassword, tc.verifiedHash, newHash)
			}
		})
	}
	// The root user's fixture hash matches no password: verified is empty however
	// the request names it.
	if p := body(ProposeChangePasswordWith(nil, change(num(root), "iggy"), testRootHash, testSalt)); bytes.Contains(p, []byte(testRootHash)) {
		t.Fatal("a password verified against a hash it does not match")
	}
	for _, malformed := range [][]byte{nil, {0}, change(str("alice"), "s3cret")[:5]} {
		if _, err := f.s.ChangePasswordCurrentHash(malformed); err != wire.ErrInvalidCommand {
			t.Errorf("ChangePasswordCurrentHash(%x): %v, want %v", malformed, err, wire.ErrInvalidCommand)
		}
		if _, err := ProposeChangePasswordWith(nil, malformed, aliceHash, testSalt); err != wire.ErrInvalidCommand {
			t.Errorf("ProposeChangePasswordWith(%x): %v, want %v", malformed, err, wire.ErrInvalidCommand)
		}
	}
}
