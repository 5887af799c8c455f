package compat

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"
)

// Users, permissions and personal access tokens at the byte level (what the Go SDK
// sends, apache/iggy foreign/go/internal/command; apache/iggy
// core/binary_protocol/src/responses/users/ and personal_access_tokens/).

const (
	codeGetUser     = 31
	codeGetUsers    = 32
	codeGetPATs     = 41
	codeLoginPAT    = 45
	opCreateUser    = 141
	opUpdateUser    = 142
	opDeleteUser    = 143
	opChangePasswd  = 144
	opUpdatePerms   = 145
	opCreatePAT     = 146
	opDeletePAT     = 147
	userActive      = 1
	userInactive    = 2
	permissionsSize = 11 // 10 global flags + has_streams, with no stream entries
)

// createUserBody is the Go SDK's CreateUser body: no options block.
func createUserBody(username, password string, status uint8, permissions []byte) []byte {
	b := appendName(appendName(nil, username), password)
	b = append(b, status)
	if permissions == nil {
		return append(b, 0)
	}
	return append(binary.LittleEndian.AppendUint32(append(b, 1), uint32(len(permissions))), permissions...)
}

// globalPermissions sets the named global flags (the permissions layout of
// iggy.apache.org/docs/binary-protocol/commands, "Users") and no per-stream entries.
func globalPermissions(flags ...int) []byte {
	p := make([]byte, permissionsSize)
	for _, f := range flags {
		p[f] = 1
	}
	return p
}

const (
	permReadStreams   = 5
	permManageStreams = 4
)

// userDetails decodes the GetUser reply (apache/iggy
// core/binary_protocol/src/responses/users/).
type userDetails struct {
	id          uint32
	status      uint8
	username    string
	permissions []byte // nil when absent
}

func decodeUserDetails(t *testing.T, body []byte) userDetails {
	t.Helper()
	d := decoder{t: t, what: "UserDetails", b: body}
	u := userDetails{id: d.u32()}
	d.u64()
	u.status, u.username = d.u8(), d.name()
	if options := d.take(int(d.u32())); len(options) != 0 {
		t.Fatalf("user options block % x, want empty", options)
	}
	switch flag := d.u8(); flag {
	case 0:
		if rest := d.take(3); !bytes.Equal(rest, []byte{0, 0, 0}) {
			t.Fatalf("absent permissions tail 00 % x, want 00 00 00 00", rest)
		}
	case 1:
		u.permissions = d.take(int(d.u32()))
	default:
		t.Fatalf("permissions flag %d", flag)
	}
	d.end()
	return u
}

func TestUsersAndPermissions(t *testing.T) {
	addr := startServer(t)
	root := dialRoot(t, addr)
	root.createStream("s")

	alice := decodeUserDetails(t, root.ok("CreateUser alice", opCreateUser, 33, createUserBody("alice", "secret1", userActive, nil)))
	if alice.id != 1 || alice.status != userActive || alice.username != "alice" || alice.permissions != nil {
		t.Fatalf("CreateUser reply %+v, want id 1, active, alice, no permissions", alice)
	}
	readOnly := globalPermissions(permReadStreams)
	bob := decodeUserDetails(t, root.ok("CreateUser bob", opCreateUser, 33, createUserBody("bob", "secret2", userActive, readOnly)))
	if bob.id != 2 || !bytes.Equal(bob.permissions, readOnly) {
		t.Fatalf("CreateUser bob reply %+v, want id 2 with permissions % x", bob, readOnly)
	}
	for _, id := range [][]byte{ids(2), stringID(nil, "bob")} {
		if got := decodeUserDetails(t, root.ok("GetUser", opNonReplicated, codeGetUser, id)); got.id != 2 || !bytes.Equal(got.permissions, readOnly) {
			t.Fatalf("GetUser bob %+v", got)
		}
	}
	if got := root.ok("GetUser missing", opNonReplicated, codeGetUser, ids(99)); len(got) != 0 {
		t.Fatalf("GetUser missing: % x, want empty", got)
	}
	d := decoder{t: t, what: "GetUsers", b: root.ok("GetUsers", opNonReplicated, codeGetUsers, nil)}
	var names []string
	for !d.done() {
		d.u32()
		d.u64()
		if status := d.u8(); status != userActive {
			t.Fatalf("GetUsers status %d", status)
		}
		names = append(names, d.name())
		d.take(int(d.u32()))
	}
	if len(names) != 3 || names[0] != "iggy" {
		t.Fatalf("GetUsers %q, want iggy, alice, bob", names)
	}

	root.fails("CreateUser with a taken name", opCreateUser, 33, createUserBody("alice", "x12", userActive, nil), 46)
	root.fails("CreateUser with a 2-byte name", opCreateUser, 33, createUserBody("ab", "x12", userActive, nil), 43)
	root.fails("DeleteUser root", opDeleteUser, 34, ids(0), 48)
	root.fails("UpdatePermissions of root", opUpdatePerms, 36, append(ids(0), 0), 49)

	// Alice has no permissions: reads are status 41, writes 41 on either channel.
	a := dial(t, addr)
	if lr := a.login("alice", "secret1"); lr.userID != 1 {
		t.Fatalf("alice logged in as user %d", lr.userID)
	}
	a.fails("GetStreams without permission", opNonReplicated, codeGetStreams, nil, 41)
	if got := decodeUserDetails(t, a.ok("GetUser of oneself", opNonReplicated, codeGetUser, ids(1))); got.username != "alice" {
		t.Fatalf("alice reading herself: %+v", got)
	}
	a.fails("GetUser of another user without permission", opNonReplicated, codeGetUser, ids(0), 41)
	a.fails("CreateStream without permission", opCreateStream, 202, appendName(nil, "nope"), 41)
	// Bob reads streams.
	b := dial(t, addr)
	b.login("bob", "secret2")
	if got := b.ok("GetStreams as bob", opNonReplicated, codeGetStreams, nil); len(got) == 0 {
		t.Fatalf("bob sees no streams")
	}

	perms := binary.LittleEndian.AppendUint32(append(ids(1), 1), uint32(len(readOnly)))
	root.ok("UpdatePermissions alice", opUpdatePerms, 36, append(perms, readOnly...))
	a.ok("GetStreams after the grant", opNonReplicated, codeGetStreams, nil)

	root.fails("ChangePassword with a wrong current password", opChangePasswd, 37, appendName(appendName(ids(1), "wrong"), "secret9"), 42)
	root.ok("ChangePassword", opChangePasswd, 37, appendName(appendName(ids(1), "secret1"), "secret9"))
	a2 := dial(t, addr)
	a2.login("alice", "secret9")

	update := append(appendName(append(ids(1), 1), "alice2"), 1, userInactive)
	root.ok("UpdateUser rename and deactivate", opUpdateUser, 35, update)
	if got := decodeUserDetails(t, root.ok("GetUser", opNonReplicated, codeGetUser, stringID(nil, "alice2"))); got.status != userInactive {
		t.Fatalf("after UpdateUser: %+v", got)
	}
	// An inactive user's password login is indistinguishable from a wrong password.
	a3 := dial(t, addr)
	if r := a3.do(opRegister, codeLogin, loginBody("alice2", "secret9")); r.command != commandEviction || r.reason != 9 {
		t.Fatalf("login of an inactive user: %v, want eviction reason 9", r)
	}

	root.ok("DeleteUser", opDeleteUser, 34, ids(1))
	root.fails("DeleteUser again", opDeleteUser, 34, ids(1), 20)
}

// patBody is CreatePersonalAccessToken as the Go SDK writes it: the u32 expiry in
// the upper four bytes of the u64 field (quirk Q1).
func patBody(name string, expiry uint32) []byte {
	b := appendName(nil, name)
	return binary.LittleEndian.AppendUint32(append(b, 0, 0, 0, 0), expiry)
}

func patLoginBody(token string) []byte {
	b := binary.LittleEndian.AppendUint32(nil, protocolVersion0110)
	b = appendName(appendName(b, sdkName), sdkVersion)
	return binary.LittleEndian.AppendUint32(appendName(b, token), 0)
}

func TestPersonalAccessTokens(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	if got := c.ok("GetPersonalAccessTokens with none", opNonReplicated, codeGetPATs, nil); len(got) != 0 {
		t.Fatalf("no tokens yet: % x", got)
	}
	d := decoder{t: t, what: "CreatePersonalAccessToken", b: c.ok("CreatePersonalAccessToken", opCreatePAT, 42, patBody("ci", 0))}
	token := d.name()
	d.end()
	c.fails("a duplicate token name", opCreatePAT, 42, patBody("ci", 0), 51)

	// expiry 1 in the upper half reads as 1<<32 µs (about 71.6 minutes) from now.
	before := uint64(time.Now().UnixMicro())
	c.ok("CreatePersonalAccessToken with Q1 expiry", opCreatePAT, 42, patBody("q1", 1))
	after := uint64(time.Now().UnixMicro())

	d = decoder{t: t, what: "GetPersonalAccessTokens", b: c.ok("GetPersonalAccessTokens", opNonReplicated, codeGetPATs, nil)}
	expiries := map[string]uint64{}
	for !d.done() {
		name := d.name()
		expiries[name] = d.u64()
	}
	if len(expiries) != 2 || expiries["ci"] != 0 {
		t.Fatalf("tokens %v, want ci (never expires: 0) and q1", expiries)
	}
	if q1 := expiries["q1"]; q1 < before+1<<32 || q1 > after+1<<32 {
		t.Errorf("q1 expires at %d, want now + 2^32 µs (in [%d, %d])", q1, before+1<<32, after+1<<32)
	}

	p := dial(t, addr)
	r := p.do(opRegister, codeLoginPAT, patLoginBody(token))
	payload, code := p.outcome(r)
	if code != 0 || r.operation != opRegister {
		t.Fatalf("PAT login: %v", r)
	}
	if userID := binary.LittleEndian.Uint32(payload); userID != 0 {
		t.Fatalf("PAT login as user %d, want 0", userID)
	}
	bad := dial(t, addr)
	if r := bad.do(opRegister, codeLoginPAT, patLoginBody("not-a-token")); r.command != commandEviction || r.reason != 10 {
		t.Fatalf("login with an unknown token: %v, want eviction reason 10", r)
	}

	// A PAT login of an inactive user is reason 11 (apache/iggy
	// core/server/src/auth.rs).
	c.ok("CreateUser", opCreateUser, 33, createUserBody("carol", "secret3", userActive, nil))
	carol := dial(t, addr)
	carol.login("carol", "secret3")
	d = decoder{t: t, what: "carol's token", b: carol.ok("CreatePersonalAccessToken as carol", opCreatePAT, 42, patBody("carol", 0))}
	carolToken := d.name()
	c.ok("UpdateUser deactivate carol", opUpdateUser, 35, append(append(stringID(nil, "carol"), 0), 1, userInactive))
	if r := dial(t, addr).do(opRegister, codeLoginPAT, patLoginBody(carolToken)); r.command != commandEviction || r.reason != 11 {
		t.Fatalf("PAT login of an inactive user: %v, want eviction reason 11", r)
	}

	c.ok("DeletePersonalAccessToken", opDeletePAT, 43, appendName(nil, "ci"))
	c.fails("DeletePersonalAccessToken again", opDeletePAT, 43, appendName(nil, "ci"), 20)
}
