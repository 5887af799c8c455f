package metadata

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// testRootHash stands in for an argon2id hash where no login is tested: hashing is
// deliberately slow.
const testRootHash = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0c2FsdA$cm9vdHJvb3Ryb290cm9vdHJvb3Ryb290cm9vdA"

// fakeHash is a well-formed PHC string, distinct for each i, that no password
// matches.
func fakeHash(i int) string {
	key := bytes.Repeat([]byte{byte(i)}, 32)
	return "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0c2FsdA$" + base64.RawStdEncoding.EncodeToString(key)
}

const (
	tsStart = 1_700_000_000_000_000
	root    = RootUserID
)

// fixture drives one State through Apply with a clock that ticks one second per op.
type fixture struct {
	t   testing.TB
	s   *State
	ts  uint64
	out Output
}

func newFixture(t testing.TB) *fixture {
	return &fixture{t: t, s: NewState("iggy", testRootHash, tsStart), ts: tsStart}
}

func (f *fixture) header(op wire.Operation, user uint32, client uint64) Header {
	f.ts += 1_000_000
	return Header{Operation: op, UserID: user, Client: wire.Uint128{Lo: client}, TimestampMicros: f.ts}
}

// apply applies op as user from client 1 and returns the committed result.
func (f *fixture) apply(op wire.Operation, user uint32, body []byte) wire.ErrorCode {
	return f.applyAs(op, user, 1, body)
}

func (f *fixture) applyAs(op wire.Operation, user uint32, client uint64, body []byte) wire.ErrorCode {
	f.t.Helper()
	f.s.Apply(f.header(op, user, client), body, &f.out)
	checkInvariants(f.t, f.s)
	if op == wire.OperationLogout {
		return f.out.Result
	}
	payload, result, err := wire.SplitResult(f.out.Reply)
	if err != nil {
		f.t.Fatalf("%v: reply does not split: %v", op, err)
	}
	if result != f.out.Result {
		f.t.Fatalf("%v: reply result %v, Output.Result %v", op, result, f.out.Result)
	}
	if result != 0 && (len(payload) != 0 || len(f.out.Effects) != 0) {
		f.t.Fatalf("%v: rejection %v carries a payload or effects", op, result)
	}
	return result
}

// must applies op and fails the test unless it succeeds; it returns the payload.
func (f *fixture) must(op wire.Operation, user uint32, body []byte) []byte {
	f.t.Helper()
	if code := f.apply(op, user, body); code != 0 {
		f.t.Fatalf("%v by user %d: %v", op, user, code)
	}
	payload, _, _ := wire.SplitResult(f.out.Reply)
	return payload
}

func body(b []byte, err error) []byte {
	if err != nil {
		panic(fmt.Sprintf("test body does not encode: %v", err))
	}
	return b
}

func num(id uint32) wire.Identifier { return wire.NumericIdentifier(id) }
func str(s string) wire.Identifier  { return wire.StringIdentifier([]byte(s)) }

func createStream(name string) []byte {
	return body((&wire.CreateStream{Name: []byte(name)}).Append(nil))
}

func createTopic(stream wire.Identifier, partitions uint32, name string, options []byte) []byte {
	return body((&wire.CreateTopic{StreamID: stream, PartitionsCount: partitions, Name: []byte(name), Options: options}).Append(nil))
}

func topicBody(stream, topic wire.Identifier) []byte {
	return body((&wire.DeleteTopic{StreamID: stream, TopicID: topic}).Append(nil))
}

func partitionsBody(stream, topic wire.Identifier, count uint32) []byte {
	return body((&wire.CreatePartitions{StreamID: stream, TopicID: topic, PartitionsCount: count}).Append(nil))
}

func groupBody(stream, topic, group wire.Identifier) []byte {
	g := wire.JoinConsumerGroup{GroupTarget: wire.GroupTarget{StreamID: stream, TopicID: topic, GroupID: group}}
	return body(g.Append(nil))
}

func createGroup(stream, topic wire.Identifier, name string) []byte {
	return body((&wire.CreateConsumerGroup{StreamID: stream, TopicID: topic, Name: []byte(name)}).Append(nil))
}

func createUser(name string, perms *wire.Permissions) []byte {
	r := wire.CreateUser{Username: []byte(name), Password: []byte(testRootHash), Status: wire.UserActive}
	if perms != nil {
		r.HasPermissions = true
		r.Permissions = perms.Append(nil)
	}
	return body(r.Append(nil))
}

func updatePermissions(user wire.Identifier, perms *wire.Permissions) []byte {
	r := wire.UpdatePermissions{UserID: user}
	if perms != nil {
		r.HasPermissions = true
		r.Permissions = perms.Append(nil)
	}
	return body(r.Append(nil))
}

func tokenBody(name string, expiryUs uint64, token string) []byte {
	return body(appendTokenProposal(nil, []byte(name), expiryUs, HashToken([]byte(token))))
}

func option(key string, kind wire.HeaderKind, value []byte) []byte {
	return body(wire.AppendOption(nil, key, kind, value))
}

// checkInvariants verifies what every reachable state must satisfy: ids unique and
// in range, names unique per scope and indexed exactly, counts right, token index
// exact, and each group's members holding disjoint partitions that cover the topic.
func checkInvariants(t testing.TB, s *State) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("invariant: "+format, args...)
	}
	users, tokens := 0, 0
	for id, u := range s.users.items {
		if u == nil {
			continue
		}
		users++
		if u.ID != uint32(id) || s.userByName[u.Username] != u.ID {
			fail("user %d misindexed", id)
		}
		for i := range u.Tokens {
			tokens++
			if s.tokenOwner[u.Tokens[i].Hash] != u.ID {
				fail("token %q of user %d not indexed", u.Tokens[i].Name, id)
			}
			if i > 0 && u.Tokens[i-1].Name >= u.Tokens[i].Name {
				fail("tokens of user %d out of order", id)
			}
		}
		if u.Permissions != nil && !permissionsCanonical(u.Permissions) {
			fail("permissions of user %d not canonical", id)
		}
	}
	if users != s.users.count || users != len(s.userByName) || tokens != len(s.tokenOwner) {
		fail("user counts: %d live, count %d, names %d; tokens %d, index %d", users, s.users.count, len(s.userByName), tokens, len(s.tokenOwner))
	}
	if users > 0 && s.User(RootUserID) == nil {
		// No user at all is a cluster's state before its root user's creation
		// (NewStateWithoutRoot), which a snapshot may hold.
		fail("root user missing")
	}
	checkSlab(t, &s.users)
	checkSlab(t, &s.streams)
	streams := 0
	for id, st := range s.streams.items {
		if st == nil {
			continue
		}
		streams++
		if st.ID != uint32(id) || id >= StreamIDLimit || s.streamByName[st.Name] != st.ID {
			fail("stream %d misindexed", id)
		}
		checkSlab(t, &st.topics)
		topics := 0
		for tid, tp := range st.topics.items {
			if tp == nil {
				continue
			}
			topics++
			if tp.ID != uint32(tid) || tid >= TopicIDLimit || st.topicByName[tp.Name] != tp.ID {
				fail("topic %d/%d misindexed", id, tid)
			}
			for i := range tp.Partitions {
				if tp.Partitions[i].ID != uint32(i) {
					fail("topic %d/%d partition ids not 0..n-1", id, tid)
				}
			}
			if len(tp.groupByName) != len(tp.groups) {
				fail("topic %d/%d group index size", id, tid)
			}
			for gi, g := range tp.groups {
				if gi > 0 && tp.groups[gi-1].ID >= g.ID || g.ID >= tp.nextGroupID || tp.groupByName[g.Name] != g.ID {
					fail("group %d of %d/%d misindexed", g.ID, id, tid)
				}
				checkAssignment(t, g, tp.PartitionsCount())
			}
		}
		if topics != st.topics.count || topics != len(st.topicByName) {
			fail("stream %d topic counts", id)
		}
	}
	if streams != s.streams.count || streams != len(s.streamByName) {
		fail("stream counts")
	}
	checkRevocations(t, &s.revoked)
}

// checkRevocations verifies a revocation table's two indexes: the same entries,
// the expiry order strictly ascending, within the bound.
func checkRevocations(t testing.TB, rt *RevocationTable) {
	t.Helper()
	live := rt.byExpiry[rt.head:]
	if len(live) != len(rt.byJTI) || len(live) > RevokedTokensMax {
		t.Fatalf("invariant: revoked tokens: %d in expiry order, %d by jti", len(live), len(rt.byJTI))
	}
	for i, r := range live {
		if rt.byJTI[r.JTI] != r.ExpiryMicros || (i > 0 && compareRevocations(live[i-1], r) >= 0) {
			t.Fatalf("invariant: revoked token %q misindexed or out of order", r.JTI)
		}
	}
}

func checkAssignment(t testing.TB, g *ConsumerGroup, partitions uint32) {
	t.Helper()
	owner := make([]int, partitions)
	for i := range owner {
		owner[i] = -1
	}
	for i := range g.Members {
		m := &g.Members[i]
		if i > 0 && g.Members[i-1].ID >= m.ID {
			t.Fatalf("invariant: group %d member ids out of order", g.ID)
		}
		for j := range i {
			if g.Members[j].Client == m.Client {
				t.Fatalf("invariant: group %d has client twice", g.ID)
			}
		}
		for _, p := range m.Partitions {
			if p >= partitions || owner[p] >= 0 {
				t.Fatalf("invariant: group %d partition %d assigned twice or out of range", g.ID, p)
			}
			owner[p] = i
		}
	}
	if len(g.Members) > 0 {
		for p, o := range owner {
			if o < 0 {
				t.Fatalf("invariant: group %d leaves partition %d unassigned", g.ID, p)
			}
		}
	}
}

func snapshotOf(s *State) []byte { return s.AppendSnapshot(nil, 0) }

func assertSameSnapshot(t testing.TB, a, b *State) {
	t.Helper()
	if sa, sb := snapshotOf(a), snapshotOf(b); !bytes.Equal(sa, sb) {
		t.Fatalf("snapshots differ (%d vs %d bytes)", len(sa), len(sb))
	}
}

// checkSlab verifies a slab's bookkeeping: no trailing free ids, every id below
// firstFree taken, count exact.
func checkSlab[T any](t testing.TB, s *slab[T]) {
	t.Helper()
	if n := len(s.items); n > 0 && s.items[n-1] == nil {
		t.Fatalf("invariant: slab has trailing free ids")
	}
	count := 0
	for i, v := range s.items {
		if v != nil {
			count++
		} else if i < s.firstFree {
			t.Fatalf("invariant: free id %d below firstFree %d", i, s.firstFree)
		}
	}
	if count != s.count || s.firstFree > len(s.items) {
		t.Fatalf("invariant: slab count %d, counted %d; firstFree %d of %d", s.count, count, s.firstFree, len(s.items))
	}
}
