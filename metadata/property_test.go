package metadata

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zeebo/xxh3"

	"github.com/iggy-shard/iggy-shard/wire"
)

// opGen draws metadata operations that mostly hit existing objects (small ids and
// a few names), with a sprinkle of garbage bodies, so random sequences exercise
// both the success paths and every rejection.
type opGen struct {
	r *rand.Rand
}

type genOp struct {
	h    Header
	body []byte
}

var genNames = []string{"a", "b", "c", "orders", "Orders"}

func (g *opGen) id() wire.Identifier {
	if g.r.IntN(4) == 0 {
		return str(genNames[g.r.IntN(len(genNames))])
	}
	return num(uint32(g.r.IntN(4)))
}

func (g *opGen) name() string { return genNames[g.r.IntN(len(genNames))] }

func (g *opGen) perms() *wire.Permissions {
	if g.r.IntN(3) == 0 {
		return nil
	}
	p := &wire.Permissions{Global: wire.GlobalPermissions{
		ManageStreams: g.r.IntN(3) == 0, ReadStreams: g.r.IntN(2) == 0, ManageTopics: g.r.IntN(3) == 0,
		ManageUsers: g.r.IntN(5) == 0,
	}}
	for range g.r.IntN(3) {
		sp := wire.StreamPermissions{StreamID: uint32(g.r.IntN(4)), ManageStream: g.r.IntN(2) == 0, ReadTopics: g.r.IntN(2) == 0}
		for range g.r.IntN(3) {
			sp.Topics = append(sp.Topics, wire.TopicPermissions{TopicID: uint32(g.r.IntN(4)), ManageTopic: g.r.IntN(2) == 0, ReadTopic: true})
		}
		p.Streams = append(p.Streams, sp)
	}
	return p
}

func (g *opGen) next(ts uint64) genOp {
	h := Header{
		UserID:          uint32(g.r.IntN(4)),
		Client:          wire.Uint128{Lo: uint64(1 + g.r.IntN(5))},
		TimestampMicros: ts,
	}
	if g.r.IntN(3) > 0 {
		h.UserID = root
	}
	var b []byte
	var err error
	switch g.r.IntN(24) {
	case 0:
		h.Operation, b = wire.OperationCreateStream, createStream(g.name())
	case 1:
		h.Operation = wire.OperationUpdateStream
		b, err = (&wire.UpdateStream{StreamID: g.id(), Name: []byte(g.name())}).Append(nil)
	case 2:
		h.Operation, b = wire.OperationDeleteStream, body(g.id().Append(nil))
	case 3:
		h.Operation, b = wire.OperationPurgeStream, body(g.id().Append(nil))
	case 4, 5:
		var opts []byte
		if g.r.IntN(3) == 0 {
			opts = option("message_expiry", wire.HeaderString, []byte("1h"))
		}
		h.Operation, b = wire.OperationCreateTopic, createTopic(g.id(), uint32(g.r.IntN(5)), g.name(), opts)
	case 6:
		h.Operation = wire.OperationUpdateTopic
		var opts []byte
		if g.r.IntN(2) == 0 {
			opts = option("compression_algorithm", wire.HeaderUint8, []byte{2})
		}
		b, err = (&wire.UpdateTopic{StreamID: g.id(), TopicID: g.id(), Name: []byte(g.name()), Options: opts}).Append(nil)
	case 7:
		h.Operation, b = wire.OperationDeleteTopic, topicBody(g.id(), g.id())
	case 8:
		h.Operation, b = wire.OperationPurgeTopic, topicBody(g.id(), g.id())
	case 9:
		h.Operation, b = wire.OperationCreatePartitions, partitionsBody(g.id(), g.id(), uint32(1+g.r.IntN(4)))
	case 10:
		h.Operation, b = wire.OperationDeletePartitions, partitionsBody(g.id(), g.id(), uint32(1+g.r.IntN(3)))
	case 11:
		h.Operation = wire.OperationDeleteSegments
		b, err = (&wire.DeleteSegments{StreamID: g.id(), TopicID: g.id(), PartitionID: uint32(g.r.IntN(4)), SegmentsCount: 1}).Append(nil)
	case 12:
		h.Operation, b = wire.OperationCreateConsumerGroup, createGroup(g.id(), g.id(), g.name())
	case 13:
		h.Operation, b = wire.OperationDeleteConsumerGroup, groupBody(g.id(), g.id(), g.id())
	case 14, 15:
		h.Operation, b = wire.OperationJoinConsumerGroup, groupBody(g.id(), g.id(), g.id())
	case 16:
		h.Operation, b = wire.OperationLeaveConsumerGroup, groupBody(g.id(), g.id(), g.id())
	case 17:
		h.Operation, b = wire.OperationCreateUser, createUser(g.name()+"user", g.perms())
	case 18:
		h.Operation = wire.OperationUpdateUser
		b, err = (&wire.UpdateUser{UserID: g.id(), HasStatus: true, Status: wire.UserStatus(1 + g.r.IntN(2))}).Append(nil)
	case 19:
		h.Operation, b = wire.OperationUpdatePermissions, updatePermissions(g.id(), g.perms())
	case 20:
		h.Operation, b = wire.OperationDeleteUser, body((&wire.DeleteUser{UserID: g.id()}).Append(nil))
	case 21:
		h.Operation = wire.OperationCreatePersonalAccessToken
		b = tokenBody(g.name(), uint64(g.r.IntN(3))*1_000_000, fmt.Sprintf("tok-%d", g.r.IntN(8)))
	case 22:
		h.Operation, b = wire.OperationDeletePersonalAccessToken, body((&wire.DeletePersonalAccessToken{Name: []byte(g.name())}).Append(nil))
	case 23:
		switch g.r.IntN(3) {
		case 0:
			h.Operation = wire.OperationLogout
		case 1:
			h.Operation, b = wire.OperationRemoveConsumerGroupMember, AppendClientGoneProposal(nil, h.Client)
		default:
			// Revoked tokens that live zero to four seconds: some expired at
			// once, the rest pruned within a few ops.
			tokens := make([]Revocation, 1+g.r.IntN(3))
			for i := range tokens {
				tokens[i] = Revocation{JTI: fmt.Sprintf("jti-%d", g.r.IntN(8)), ExpiryMicros: ts + uint64(g.r.IntN(5))*1_000_000}
			}
			h.Operation = wire.OperationRevokeTokens
			b, err = AppendRevokeTokens(nil, tokens)
		}
	}
	if err != nil {
		panic(err)
	}
	if g.r.IntN(20) == 0 && len(b) > 0 {
		b = b[:g.r.IntN(len(b))] // truncated: must commit as a rejection
	}
	return genOp{h: h, body: b}
}

func genOps(seed uint64, n int) []genOp {
	g := opGen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	ops := make([]genOp, n)
	ts := uint64(tsStart)
	for i := range ops {
		ts += uint64(1 + g.r.IntN(2_000_000))
		ops[i] = g.next(ts)
	}
	return ops
}

func sameOutput(a, b *Output) bool {
	return a.Operation == b.Operation && a.Result == b.Result && bytes.Equal(a.Reply, b.Reply) && slices.Equal(a.Effects, b.Effects)
}

// TestApplyIsDeterministic feeds the same random operations to two states and to a
// third restored from a mid-sequence snapshot: every output and every final
// snapshot must be identical, and the invariants must hold after every operation.
func TestApplyIsDeterministic(t *testing.T) {
	const seeds, opsPerSeed = 40, 400
	for seed := range uint64(seeds) {
		ops := genOps(seed, opsPerSeed)
		a := NewState("iggy", testRootHash, tsStart)
		b := NewState("iggy", testRootHash, tsStart)
		var outA, outB Output
		var restored *State
		results := map[wire.ErrorCode]int{}
		for i, op := range ops {
			a.Apply(op.h, op.body, &outA)
			b.Apply(op.h, op.body, &outB)
			if !sameOutput(&outA, &outB) {
				t.Fatalf("seed=%d op %d (%v): outputs differ", seed, i, op.h.Operation)
			}
			results[outA.Result]++
			checkInvariants(t, a)
			if restored != nil {
				var outR Output
				restored.Apply(op.h, op.body, &outR)
				if !sameOutput(&outA, &outR) {
					t.Fatalf("seed=%d op %d (%v): restored state answers differently", seed, i, op.h.Operation)
				}
			}
			if i == opsPerSeed/2 {
				snap := a.AppendSnapshot(nil, uint64(i))
				var op uint64
				var err error
				restored, op, err = DecodeSnapshot(snap)
				if err != nil || op != uint64(i) {
					t.Fatalf("seed=%d: restore: op %d, %v", seed, op, err)
				}
				if again := restored.AppendSnapshot(nil, uint64(i)); !bytes.Equal(snap, again) {
					t.Fatalf("seed=%d: snapshot -> restore -> snapshot differs", seed)
				}
				checkInvariants(t, restored)
			}
		}
		assertSameSnapshot(t, a, b)
		assertSameSnapshot(t, a, restored)
		if results[0] < opsPerSeed/10 {
			t.Fatalf("seed=%d: only %d of %d operations succeeded; the generator has drifted", seed, results[0], opsPerSeed)
		}
	}
}

func TestSnapshotRejectsCorruption(t *testing.T) {
	f := newFixture(t)
	for _, op := range genOps(7, 300) {
		f.s.Apply(op.h, op.body, &f.out)
	}
	snap := f.s.AppendSnapshot(nil, 42)
	if _, _, err := DecodeSnapshot(snap); err != nil {
		t.Fatal(err)
	}
	for i := range snap {
		bad := bytes.Clone(snap)
		bad[i] ^= 0x40
		if _, _, err := DecodeSnapshot(bad); err == nil {
			t.Fatalf("flipped byte %d decodes", i)
		}
	}
	for n := range len(snap) {
		if _, _, err := DecodeSnapshot(snap[:n]); err == nil {
			t.Fatalf("truncation to %d bytes decodes", n)
		}
	}
	// A well-sealed body that breaks an invariant is refused too.
	body := bytes.Clone(snap[:len(snap)-8])
	binary.LittleEndian.PutUint32(body[4:], SnapshotVersion+1)
	if _, _, err := DecodeSnapshot(reseal(body)); err == nil {
		t.Fatal("unknown version decodes")
	}
}

func reseal(body []byte) []byte {
	return binary.LittleEndian.AppendUint64(bytes.Clone(body), xxh3.Hash(body))
}

func TestSnapshotOfFreshState(t *testing.T) {
	s := NewState("iggy", testRootHash, tsStart)
	snap := s.AppendSnapshot(nil, 0)
	r, op, err := DecodeSnapshot(snap)
	if err != nil || op != 0 {
		t.Fatal(op, err)
	}
	if u := r.User(RootUserID); u == nil || u.Username != "iggy" || u.PasswordHash != testRootHash {
		t.Fatalf("root %+v", u)
	}
	assertSameSnapshot(t, s, r)
	// A state emptied again encodes like a fresh one.
	f := &fixture{t: t, s: r, ts: tsStart}
	f.must(wire.OperationCreateStream, root, createStream("x"))
	f.must(wire.OperationCreateUser, root, createUser("bob", nil))
	f.must(wire.OperationDeleteStream, root, body(num(0).Append(nil)))
	f.must(wire.OperationDeleteUser, root, body(num(1).Append(nil)))
	assertSameSnapshot(t, s, r)
}

// FuzzDecodeSnapshot seals arbitrary bytes with a valid trailer, so the fuzzer
// reaches the structural checks. A snapshot that decodes must satisfy the
// invariants and re-encode to exactly the same bytes (the format is canonical).
func FuzzDecodeSnapshot(f *testing.F) {
	for seed := range uint64(4) {
		s := NewState("iggy", testRootHash, tsStart)
		var out Output
		for _, op := range genOps(seed, 60) {
			s.Apply(op.h, op.body, &out)
		}
		snap := s.AppendSnapshot(nil, seed)
		f.Add(snap[:len(snap)-8])
	}
	f.Add([]byte("IMS1"))
	f.Fuzz(func(t *testing.T, body []byte) {
		sealed := reseal(body)
		s, op, err := DecodeSnapshot(sealed)
		if err != nil {
			return
		}
		checkInvariants(t, s)
		if again := s.AppendSnapshot(nil, op); !bytes.Equal(again, sealed) {
			t.Fatalf("decoded snapshot re-encodes differently")
		}
	})
}

// FuzzApply drives a state with operations decoded from the input, [op u8][user u8]
// [client u8][len u8][body]...: Apply never panics, the invariants hold after every
// operation, and a second state fed the same input ends with the same snapshot.
func FuzzApply(f *testing.F) {
	for seed := range uint64(6) {
		var in []byte
		for _, op := range genOps(seed, 40) {
			if len(op.body) > 255 {
				continue
			}
			in = append(in, uint8(op.h.Operation), uint8(op.h.UserID), uint8(op.h.Client.Lo), uint8(len(op.body)))
			in = append(in, op.body...)
		}
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		a := NewState("iggy", testRootHash, tsStart)
		b := NewState("iggy", testRootHash, tsStart)
		var outA, outB Output
		ts := uint64(tsStart)
		for len(in) >= 4 {
			h := Header{Operation: wire.Operation(in[0]), UserID: uint32(in[1] % 4), Client: wire.Uint128{Lo: uint64(in[2] % 8)}, TimestampMicros: ts}
			n := min(int(in[3]), len(in)-4)
			body := in[4 : 4+n]
			in = in[4+n:]
			ts += 1_000_000
			a.Apply(h, body, &outA)
			b.Apply(h, body, &outB)
			if !sameOutput(&outA, &outB) {
				t.Fatalf("%v: outputs differ", h.Operation)
			}
			checkInvariants(t, a)
		}
		assertSameSnapshot(t, a, b)
		r, _, err := DecodeSnapshot(a.AppendSnapshot(nil, 1))
		if err != nil {
			t.Fatalf("snapshot of a reachable state does not decode: %v", err)
		}
		assertSameSnapshot(t, a, r)
	})
}

var readCodes = []wire.CommandCode{
	wire.CodeGetStream, wire.CodeGetStreams, wire.CodeGetTopic, wire.CodeGetTopics,
	wire.CodeGetUser, wire.CodeGetUsers, wire.CodeGetPersonalAccessTokens,
	wire.CodeGetConsumerGroup, wire.CodeGetConsumerGroups, wire.CodeSyncConsumerGroup,
	wire.CodeDescribeOptions,
}

// decodeReply decodes a read's reply with the SDK-side decoder of its command, so
// a reply the server writes is one every client can read.
func decodeReply(code wire.CommandCode, b []byte) error {
	switch code {
	case wire.CodeGetStream:
		return (&wire.StreamDetails{}).Decode(b)
	case wire.CodeGetStreams:
		_, err := wire.AppendStreams(nil, b)
		return err
	case wire.CodeGetTopic:
		return (&wire.TopicDetails{}).Decode(b)
	case wire.CodeGetTopics:
		_, err := wire.AppendTopics(nil, b)
		return err
	case wire.CodeGetUser:
		return (&wire.UserDetails{}).Decode(b)
	case wire.CodeGetUsers:
		_, err := wire.AppendUsers(nil, b)
		return err
	case wire.CodeGetPersonalAccessTokens:
		_, err := wire.AppendPersonalAccessTokens(nil, b)
		return err
	case wire.CodeGetConsumerGroup:
		return (&wire.ConsumerGroupDetails{}).Decode(b)
	case wire.CodeGetConsumerGroups:
		_, err := wire.AppendConsumerGroups(nil, b)
		return err
	case wire.CodeSyncConsumerGroup:
		return (&wire.Assignment{}).Decode(b)
	case wire.CodeDescribeOptions:
		_, err := wire.AppendOptionDescriptors(nil, b)
		return err
	}
	return nil
}

// FuzzReadAndAdmit runs every metadata read and every admission check with
// arbitrary bodies against a populated state: nothing panics, and every non-empty
// read reply decodes with the client-side decoder.
func FuzzReadAndAdmit(f *testing.F) {
	s := NewState("iggy", testRootHash, tsStart)
	var out Output
	for _, op := range genOps(11, 400) {
		s.Apply(op.h, op.body, &out)
	}
	f.Add(uint8(0), uint8(0), body(num(0).Append(nil)))
	f.Add(uint8(2), uint8(1), topicBody(num(0), num(1)))
	f.Add(uint8(7), uint8(2), groupBody(num(0), num(0), num(0)))
	f.Add(uint8(10), uint8(0), []byte{1})
	f.Add(uint8(4), uint8(0), createTopic(num(0), 3, "x", option("segment_size", wire.HeaderString, []byte("1MiB"))))
	f.Fuzz(func(t *testing.T, selector, user uint8, in []byte) {
		code := readCodes[int(selector)%len(readCodes)]
		reply, handled, err := s.Read(nil, code, uint32(user%4), wire.Uint128{Lo: uint64(user % 6)}, in, func(uint32, uint32, uint32) PartitionStats {
			return PartitionStats{SegmentsCount: 1, MessagesCount: 3, SizeBytes: 30}
		})
		if !handled {
			t.Fatalf("%v not handled", code)
		}
		if err == nil && len(reply) > 0 {
			if derr := decodeReply(code, reply); derr != nil {
				t.Fatalf("%v reply does not decode: %v", code, derr)
			}
		}
		if err != nil && len(reply) != 0 {
			t.Fatalf("%v: a denial with a body", code)
		}
		_ = s.Admit(wire.Operation(128+int(selector)%22), uint32(user%4), in)
	})
}

// TestSnapshotHighIDs restores a state whose objects sit at the top of their id
// spaces, as a long life of creates and deletes can leave it.
func TestSnapshotHighIDs(t *testing.T) {
	f := newFixture(t)
	f.must(wire.OperationCreateStream, root, createStream("s"))
	st := f.s.Stream(0)
	f.s.removeStream(st)
	st.ID = StreamIDLimit - 1
	f.s.insertStream(st)
	f.must(wire.OperationCreateUser, root, createUser("high", nil))
	u := f.s.User(1)
	f.s.removeUser(u)
	u.ID = UserIDLimit - 1
	f.s.insertUser(u)
	checkInvariants(t, f.s)
	r, _, err := DecodeSnapshot(snapshotOf(f.s))
	if err != nil {
		t.Fatal(err)
	}
	assertSameSnapshot(t, f.s, r)
	if r.Stream(StreamIDLimit-1) == nil || r.User(UserIDLimit-1) == nil {
		t.Fatal("high ids lost")
	}
	// The next create takes the lowest free id.
	fr := &fixture{t: t, s: r, ts: tsStart}
	var d wire.StreamDetails
	if err := d.Decode(fr.must(wire.OperationCreateStream, root, createStream("low"))); err != nil || d.ID != 0 {
		t.Fatalf("new stream id %d (%v)", d.ID, err)
	}
}
