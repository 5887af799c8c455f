package metadata

import (
	"slices"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

func groupTarget(stream, topic, group wire.Identifier) *wire.GroupTarget {
	return &wire.GroupTarget{StreamID: stream, TopicID: topic, GroupID: group}
}

func TestConsumerGroups(t *testing.T) {
	f := newFixture(t)
	setupUsers(f)
	f.must(wire.OperationCreateStream, root, createStream("s"))
	f.must(wire.OperationCreateTopic, root, createTopic(num(0), 3, "t", nil))
	payload := f.must(wire.OperationCreateConsumerGroup, root, createGroup(num(0), num(0), "g"))
	var d wire.ConsumerGroupDetails
	if err := d.Decode(payload); err != nil {
		t.Fatal(err)
	}
	if d.ID != 0 || d.PartitionsCount != 3 || d.MembersCount != 0 || string(d.Name) != "g" {
		t.Fatalf("reply %+v", d.ConsumerGroupHeader)
	}
	g := groupBody(num(0), num(0), num(0))
	for _, tc := range []struct {
		name string
		op   wire.Operation
		user uint32
		body []byte
		want wire.ErrorCode
	}{
		{"create duplicate", wire.OperationCreateConsumerGroup, root, createGroup(num(0), num(0), "g"), wire.ErrConsumerGroupNameAlreadyExists},
		{"create missing stream", wire.OperationCreateConsumerGroup, root, createGroup(num(1), num(0), "x"), wire.ErrStreamIdNotFound},
		{"create missing topic", wire.OperationCreateConsumerGroup, root, createGroup(num(0), num(1), "x"), wire.ErrTopicIdNotFound},
		{"create unauthorized", wire.OperationCreateConsumerGroup, alice, createGroup(num(0), num(0), "x"), wire.ErrUnauthorized},
		{"join missing group", wire.OperationJoinConsumerGroup, root, groupBody(num(0), num(0), num(5)), wire.ErrConsumerGroupIdNotFound},
		{"join missing topic", wire.OperationJoinConsumerGroup, root, groupBody(num(0), num(5), num(0)), wire.ErrTopicIdNotFound},
		{"join missing stream", wire.OperationJoinConsumerGroup, root, groupBody(num(5), num(0), num(0)), wire.ErrStreamIdNotFound},
		{"join unauthorized", wire.OperationJoinConsumerGroup, alice, g, wire.ErrUnauthorized},
		{"leave as non-member", wire.OperationLeaveConsumerGroup, root, g, wire.ErrConsumerGroupMemberNotFound},
		{"leave missing group", wire.OperationLeaveConsumerGroup, root, groupBody(num(0), num(0), str("q")), wire.ErrConsumerGroupIdNotFound},
		{"leave unauthorized", wire.OperationLeaveConsumerGroup, alice, g, wire.ErrUnauthorized},
		{"leave missing stream", wire.OperationLeaveConsumerGroup, root, groupBody(str("nope"), num(0), num(0)), wire.ErrStreamIdNotFound},
		{"delete missing stream", wire.OperationDeleteConsumerGroup, root, groupBody(num(4), num(0), num(0)), wire.ErrStreamIdNotFound},
		{"delete missing group", wire.OperationDeleteConsumerGroup, root, groupBody(num(0), num(0), num(9)), wire.ErrConsumerGroupIdNotFound},
		{"delete missing topic", wire.OperationDeleteConsumerGroup, root, groupBody(num(0), num(9), num(0)), wire.ErrTopicIdNotFound},
		{"delete unauthorized", wire.OperationDeleteConsumerGroup, alice, g, wire.ErrUnauthorized},
		{"permission before a missing group", wire.OperationJoinConsumerGroup, alice, groupBody(num(0), num(0), num(9)), wire.ErrUnauthorized},
		{"missing topic before permission", wire.OperationLeaveConsumerGroup, alice, groupBody(num(0), num(9), num(0)), wire.ErrTopicIdNotFound},
	} {
		if got := f.apply(tc.op, tc.user, tc.body); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}

	// Read-level grants (global, stream or topic) manage groups.
	grant(f, wire.Permissions{Streams: []wire.StreamPermissions{{StreamID: 0, Topics: []wire.TopicPermissions{{TopicID: 0, ReadTopic: true}}}}})
	join := func(client uint64) {
		t.Helper()
		if got := f.applyAs(wire.OperationJoinConsumerGroup, alice, client, g); got != 0 {
			t.Fatalf("join of client %d: %v", client, got)
		}
	}
	assignment := func(client uint64) (uint64, []uint32) {
		t.Helper()
		gen, parts, ok := f.s.Assignment(wire.Uint128{Lo: client}, groupTarget(num(0), num(0), num(0)))
		if !ok {
			t.Fatalf("client %d is not a member", client)
		}
		return gen, parts
	}
	join(10)
	if gen, parts := assignment(10); gen != 1 || !slices.Equal(parts, []uint32{0, 1, 2}) {
		t.Fatalf("sole member: generation %d, %v", gen, parts)
	}
	join(10) // idempotent: no new generation
	join(20)
	join(30)
	if gen, parts := assignment(20); gen != 3 || !slices.Equal(parts, []uint32{1}) {
		t.Fatalf("second member: generation %d, %v", gen, parts)
	}
	// The middle member leaves: its slot frees up and the next joiner takes it.
	if got := f.applyAs(wire.OperationLeaveConsumerGroup, alice, 20, g); got != 0 {
		t.Fatal(got)
	}
	if _, parts := assignment(30); !slices.Equal(parts, []uint32{1}) {
		t.Fatalf("after leave: %v", parts)
	}
	join(40)
	if gr := f.s.Stream(0).Topic(0).Group(0); gr.Members[1].Client.Lo != 40 || gr.Members[1].ID != 1 {
		t.Fatalf("slot reuse: %+v", gr.Members)
	}
	// More partitions: the assignment moves and the generation bumps.
	gen, _ := assignment(10)
	f.must(wire.OperationCreatePartitions, root, partitionsBody(num(0), num(0), 3))
	if g2, parts := assignment(10); g2 != gen+1 || !slices.Equal(parts, []uint32{0, 3}) {
		t.Fatalf("after repartition: generation %d (was %d), %v", g2, gen, parts)
	}
	// Logout and a closed connection leave every group.
	f.must(wire.OperationCreateConsumerGroup, root, createGroup(num(0), num(0), "g2"))
	f.applyAs(wire.OperationJoinConsumerGroup, root, 10, groupBody(num(0), num(0), num(1)))
	if got := f.s.ClientGroupsCount(wire.Uint128{Lo: 10}); got != 2 {
		t.Fatalf("client 10 in %d groups", got)
	}
	if got := f.applyAs(wire.OperationLogout, alice, 10, nil); got != 0 || len(f.out.Reply) != 0 || f.out.Operation != wire.OperationLogout {
		t.Fatalf("logout: %v, reply %x, op %v", got, f.out.Reply, f.out.Operation)
	}
	if got := f.s.ClientGroupsCount(wire.Uint128{Lo: 10}); got != 0 {
		t.Fatalf("after logout client 10 in %d groups", got)
	}
	f.must(wire.OperationRemoveConsumerGroupMember, root, AppendClientGoneProposal(nil, wire.Uint128{Lo: 30}))
	if _, parts := assignment(40); !slices.Equal(parts, []uint32{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("last member: %v", parts)
	}
	if got := f.apply(wire.OperationRemoveConsumerGroupMember, root, []byte{1, 2}); got != wire.ErrInvalidCommand {
		t.Fatalf("short client-gone body: %v", got)
	}

	// Group ids only grow: a deleted group's id is not reused.
	f.must(wire.OperationDeleteConsumerGroup, alice, g)
	if f.out.Effects[0] != (Effect{Kind: EffectDeleteConsumerGroup, Stream: 0, Topic: 0, Group: 0}) {
		t.Fatalf("effects %+v", f.out.Effects)
	}
	if err := d.Decode(f.must(wire.OperationCreateConsumerGroup, root, createGroup(num(0), num(0), "g"))); err != nil || d.ID != 2 {
		t.Fatalf("recreated group id %d (%v), want 2", d.ID, err)
	}
}

func TestRebalanceRoundRobin(t *testing.T) {
	for _, tc := range []struct {
		members, partitions int
	}{{1, 0}, {1, 5}, {3, 2}, {3, 7}, {4, 4}, {5, 1000}} {
		g := &ConsumerGroup{}
		for i := range tc.members {
			g.Members = append(g.Members, Member{ID: uint32(i), Client: wire.Uint128{Lo: uint64(i + 1)}})
		}
		if !g.rebalance(uint32(tc.partitions)) && tc.partitions > 0 {
			t.Errorf("%+v: first rebalance reports no change", tc)
		}
		checkAssignment(t, g, uint32(tc.partitions))
		for i, m := range g.Members {
			for k, p := range m.Partitions {
				if p != uint32(i+k*tc.members) {
					t.Fatalf("%+v: member %d gets %v", tc, i, m.Partitions)
				}
			}
		}
		if g.rebalance(uint32(tc.partitions)) {
			t.Errorf("%+v: second rebalance reports a change", tc)
		}
	}
}

func TestUsers(t *testing.T) {
	f := newFixture(t)
	perms := wire.Permissions{
		Global: wire.GlobalPermissions{ReadStreams: true},
		Streams: []wire.StreamPermissions{
			{StreamID: 7, ReadStream: true},
			{StreamID: 2, ManageStream: true, Topics: []wire.TopicPermissions{{TopicID: 9, ReadTopic: true}, {TopicID: 1, ManageTopic: true}}},
		},
	}
	payload := f.must(wire.OperationCreateUser, root, createUser("alice", &perms))
	var d wire.UserDetails
	if err := d.Decode(payload); err != nil {
		t.Fatal(err)
	}
	if d.ID != 1 || string(d.Username) != "alice" || d.Status != uint8(wire.UserActive) || !d.HasPermissions ||
		d.Permissions.Streams[0].StreamID != 7 {
		t.Fatalf("reply echoes permissions as sent: %+v", d)
	}
	stored := f.s.User(1).Permissions
	if stored.Streams[0].StreamID != 2 || stored.Streams[0].Topics[0].TopicID != 1 {
		t.Fatalf("stored permissions not in id order: %+v", stored)
	}
	odd := wire.CreateUser{Username: []byte("oddstatus"), Password: []byte(testRootHash), Status: 9}
	payload = f.must(wire.OperationCreateUser, root, body(odd.Append(nil)))
	if err := d.Decode(payload); err != nil || d.Status != 9 || f.s.User(2).Status != wire.UserActive {
		t.Fatalf("unknown status: echoed %d, stored %d (%v)", d.Status, f.s.User(2).Status, err)
	}
	withOption := wire.CreateUser{Username: []byte("opts"), Password: []byte(testRootHash), Status: 1, Options: option("k", wire.HeaderString, []byte("v"))}
	update := func(id wire.Identifier, name string, status wire.UserStatus) []byte {
		r := wire.UpdateUser{UserID: id}
		if name != "" {
			r.HasUsername, r.Username = true, []byte(name)
		}
		if status != 0 {
			r.HasStatus, r.Status = true, status
		}
		return body(r.Append(nil))
	}
	del := func(id wire.Identifier) []byte { return body((&wire.DeleteUser{UserID: id}).Append(nil)) }
	for _, tc := range []struct {
		name string
		op   wire.Operation
		user uint32
		body []byte
		want wire.ErrorCode
	}{
		{"create short name", wire.OperationCreateUser, root, createUser("ab", nil), wire.ErrInvalidUsername},
		{"create long name", wire.OperationCreateUser, root, createUser(string(make([]byte, 51)), nil), wire.ErrInvalidUsername},
		{"create 50-byte name", wire.OperationCreateUser, root, createUser(string(make([]byte, 50)), nil), 0},
		{"create taken", wire.OperationCreateUser, root, createUser("alice", nil), wire.ErrUserAlreadyExists},
		{"create unauthorized", wire.OperationCreateUser, alice, createUser("bob", nil), wire.ErrUnauthorized},
		{"create with option", wire.OperationCreateUser, root, body(withOption.Append(nil)), wire.ErrInvalidOptionValue},
		{"create with a plaintext password", wire.OperationCreateUser, root, body((&wire.CreateUser{Username: []byte("plain"), Password: []byte("secret"), Status: 1}).Append(nil)), wire.ErrInvalidCommand},
		{"update missing", wire.OperationUpdateUser, root, update(num(40), "zed", 0), wire.ErrResourceNotFound},
		{"update short name", wire.OperationUpdateUser, root, update(num(1), "ab", 0), wire.ErrInvalidUsername},
		{"update taken", wire.OperationUpdateUser, root, update(num(1), "iggy", 0), wire.ErrUserAlreadyExists},
		{"update own name", wire.OperationUpdateUser, root, update(str("alice"), "alice", 0), 0},
		{"update unauthorized", wire.OperationUpdateUser, alice, update(num(1), "alicia", 0), wire.ErrUnauthorized},
		{"update inactive", wire.OperationUpdateUser, root, update(num(1), "", wire.UserInactive), 0},
		{"update unknown status ignored", wire.OperationUpdateUser, root, update(num(1), "", 7), 0},
		{"update with option", wire.OperationUpdateUser, root, body((&wire.UpdateUser{UserID: num(1), Options: option("k", wire.HeaderString, []byte("v"))}).Append(nil)), wire.ErrInvalidOptionValue},
		{"delete root", wire.OperationDeleteUser, root, del(num(0)), wire.ErrCannotDeleteUser},
		{"delete missing", wire.OperationDeleteUser, root, del(str("ghost")), wire.ErrResourceNotFound},
		{"delete unauthorized", wire.OperationDeleteUser, alice, del(num(2)), wire.ErrUnauthorized},
		{"permissions of root", wire.OperationUpdatePermissions, root, updatePermissions(num(0), nil), wire.ErrCannotChangePermissions},
		{"permissions missing", wire.OperationUpdatePermissions, root, updatePermissions(num(99), nil), wire.ErrResourceNotFound},
		{"permissions unauthorized", wire.OperationUpdatePermissions, alice, updatePermissions(num(2), nil), wire.ErrUnauthorized},
		{"delete", wire.OperationDeleteUser, root, del(num(2)), 0},
	} {
		if got := f.apply(tc.op, tc.user, tc.body); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	if u := f.s.User(1); u.Status != wire.UserInactive {
		t.Fatalf("status %d", u.Status)
	}
	// manage_users lets alice manage users; the freed id 2 is reused.
	f.must(wire.OperationUpdatePermissions, root, updatePermissions(num(1), &wire.Permissions{Global: wire.GlobalPermissions{ManageUsers: true}}))
	if err := d.Decode(f.must(wire.OperationCreateUser, alice, createUser("carol", nil))); err != nil || d.ID != 2 {
		t.Fatalf("carol id %d (%v)", d.ID, err)
	}
	f.must(wire.OperationUpdatePermissions, alice, updatePermissions(num(2), nil))
	if f.s.User(2).Permissions != nil {
		t.Fatal("permissions not cleared")
	}
}

func TestChangePassword(t *testing.T) {
	f := newFixture(t)
	setupUsers(f)
	f.must(wire.OperationCreateUser, root, createUser("bob", nil))
	change := func(id wire.Identifier, verified, next string) []byte {
		return body((&wire.ChangePassword{UserID: id, CurrentPassword: []byte(verified), NewPassword: []byte(next)}).Append(nil))
	}
	for _, tc := range []struct {
		name string
		user uint32
		body []byte
		want wire.ErrorCode
	}{
		{"own password", alice, change(num(alice), testRootHash, fakeHash(2)), 0},
		{"stale verified hash", alice, change(num(alice), testRootHash, fakeHash(3)), wire.ErrInvalidCredentials},
		{"verification failed", alice, change(num(alice), "", fakeHash(3)), wire.ErrInvalidCredentials},
		{"another user's", alice, change(str("bob"), testRootHash, fakeHash(3)), wire.ErrUnauthorized},
		{"missing user", alice, change(num(50), "x", fakeHash(3)), wire.ErrResourceNotFound},
		{"root changes bob's", root, change(str("bob"), testRootHash, fakeHash(4)), 0},
		{"new password not a hash", root, change(str("bob"), fakeHash(4), "plaintext"), wire.ErrInvalidCommand},
	} {
		if got := f.apply(wire.OperationChangePassword, tc.user, tc.body); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	if f.s.User(alice).PasswordHash != fakeHash(2) || f.s.User(2).PasswordHash != fakeHash(4) {
		t.Fatal("hashes not stored")
	}
}

func TestPersonalAccessTokens(t *testing.T) {
	f := newFixture(t)
	setupUsers(f)
	// Apply never sees the token: the reply withholds it (the success section alone).
	if payload := f.must(wire.OperationCreatePersonalAccessToken, alice, tokenBody("ci", 0, "secret-1")); len(payload) != 0 {
		t.Fatalf("reply payload % x, want none (the token withheld)", payload)
	}
	if !TokenWithheld(f.out.Reply) {
		t.Fatalf("reply % x does not withhold the token", f.out.Reply)
	}
	created := f.ts
	f.must(wire.OperationCreatePersonalAccessToken, alice, tokenBody("short", 60_000_000, "secret-2"))
	f.must(wire.OperationCreatePersonalAccessToken, alice, tokenBody("forever", wire.TokenExpiryNever, "secret-3"))
	for _, tc := range []struct {
		name string
		user uint32
		body []byte
		want wire.ErrorCode
	}{
		{"duplicate name", alice, tokenBody("ci", 0, "secret-9"), wire.ErrPersonalAccessTokenAlreadyExists},
		{"same name, other user", root, tokenBody("ci", 0, "secret-9"), 0},
		{"duplicate token", root, tokenBody("other", 0, "secret-9"), wire.ErrPersonalAccessTokenAlreadyExists},
		{"expiry overflows", alice, tokenBody("late", ^uint64(0)-1, "secret-8"), wire.ErrInvalidPersonalAccessTokenExpiry},
		{"unknown user", 55, tokenBody("x", 0, "secret-7"), wire.ErrResourceNotFound},
		{"malformed proposal", alice, []byte{3, 'a', 'b', 'c'}, wire.ErrInvalidCommand},
	} {
		if got := f.apply(wire.OperationCreatePersonalAccessToken, tc.user, tc.body); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	list := f.s.AppendPersonalAccessTokens(nil, alice)
	entries, err := wire.AppendPersonalAccessTokens(nil, list)
	if err != nil || len(entries) != 3 || string(entries[0].Name) != "ci" || entries[0].ExpiryAtMicros != 0 ||
		string(entries[2].Name) != "short" || entries[2].ExpiryAtMicros != created+1_000_000+60_000_000 || entries[1].ExpiryAtMicros != 0 {
		t.Fatalf("list %+v (%v)", entries, err)
	}
	now := f.ts
	for _, tc := range []struct {
		token  string
		now    uint64
		user   uint32
		reason wire.EvictionReason
	}{
		{"secret-1", now, alice, wire.EvictionReserved},
		{"secret-2", now, alice, wire.EvictionReserved},
		{"secret-2", created + 1_000_000 + 60_000_000, 0, wire.EvictionInvalidToken},
		{"nope", now, 0, wire.EvictionInvalidToken},
	} {
		if user, reason := f.s.CheckToken([]byte(tc.token), tc.now); user != tc.user || reason != tc.reason {
			t.Errorf("token %s at %d: user %d reason %v", tc.token, tc.now, user, reason)
		}
	}
	deleteToken := func(name string) []byte {
		return body((&wire.DeletePersonalAccessToken{Name: []byte(name)}).Append(nil))
	}
	if got := f.apply(wire.OperationDeletePersonalAccessToken, alice, deleteToken("nope")); got != wire.ErrResourceNotFound {
		t.Fatalf("delete unknown: %v", got)
	}
	f.must(wire.OperationDeletePersonalAccessToken, alice, deleteToken("ci"))
	if _, reason := f.s.CheckToken([]byte("secret-1"), now); reason != wire.EvictionInvalidToken {
		t.Fatalf("deleted token still logs in: %v", reason)
	}
	// An inactive owner cannot log in with a token.
	f.must(wire.OperationUpdateUser, root, body((&wire.UpdateUser{UserID: num(alice), HasStatus: true, Status: wire.UserInactive}).Append(nil)))
	if _, reason := f.s.CheckToken([]byte("secret-3"), now); reason != wire.EvictionUserInactive {
		t.Fatalf("inactive owner: %v", reason)
	}
	// Deleting the user forgets its tokens.
	f.must(wire.OperationDeleteUser, root, body((&wire.DeleteUser{UserID: num(alice)}).Append(nil)))
	if _, reason := f.s.CheckToken([]byte("secret-3"), now); reason != wire.EvictionInvalidToken {
		t.Fatalf("deleted user's token: %v", reason)
	}
}

func TestTokenLimit(t *testing.T) {
	f := newFixture(t)
	setupUsers(f)
	for i := range PersonalAccessTokensPerUserMax {
		name := "t" + string(rune('A'+i/26)) + string(rune('a'+i%26))
		f.must(wire.OperationCreatePersonalAccessToken, alice, tokenBody(name, 0, "secret-"+name))
	}
	client := body((&wire.CreatePersonalAccessToken{Name: []byte("over")}).Append(nil))
	if err := f.s.Admit(wire.OperationCreatePersonalAccessToken, alice, client); err != wire.ErrPersonalAccessTokensLimitReached {
		t.Fatalf("admission: %v", err)
	}
	if err := f.s.Admit(wire.OperationCreatePersonalAccessToken, root, client); err != nil {
		t.Fatalf("admission for root: %v", err)
	}
	if got := f.apply(wire.OperationCreatePersonalAccessToken, alice, tokenBody("over", 0, "secret-over")); got != wire.ErrPersonalAccessTokensLimitReached {
		t.Fatalf("apply past the limit: %v", got)
	}
}
