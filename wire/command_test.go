package wire

import (
	"strings"
	"testing"
)

// The registry as iggy.apache.org/docs/binary-protocol/commands lists it: code,
// operation byte (2 for reads, 0 for the legacy logins).
var specCommandCodes = map[CommandCode]Operation{
	1: 2, 10: 2, 11: 2, 12: 2, 13: 2, 20: 2, 21: 2, 22: 2,
	31: 2, 32: 2, 33: 141, 34: 143, 35: 142, 36: 145, 37: 144, 38: 0, 39: 3, 40: 1,
	41: 2, 42: 146, 43: 147, 44: 0, 45: 1,
	100: 2, 101: 160, 102: 2,
	120: 2, 121: 161, 122: 162,
	200: 2, 201: 2, 202: 128, 203: 130, 204: 129, 205: 131,
	300: 2, 301: 2, 302: 132, 303: 134, 304: 133, 305: 135,
	402: 136, 403: 137, 503: 138,
	600: 2, 601: 2, 602: 139, 603: 140, 604: 148, 605: 149, 606: 2,
}

func TestCommandRegistryMatchesSpec(t *testing.T) {
	if len(Commands()) != len(specCommandCodes) {
		t.Fatalf("registry holds %d codes, spec %d", len(Commands()), len(specCommandCodes))
	}
	for i, info := range Commands() {
		if i > 0 && Commands()[i-1].Code >= info.Code {
			t.Fatalf("registry not sorted at %v", info.Code)
		}
		want, ok := specCommandCodes[info.Code]
		if !ok {
			t.Fatalf("%d not in the spec", info.Code)
		}
		if info.Operation != want {
			t.Errorf("%v: operation %v, spec %v", info.Code, info.Operation, want)
		}
		if info.Operation != OperationReserved && info.Plane != info.Operation.Plane() {
			t.Errorf("%v: plane %v, operation's plane %v", info.Code, info.Plane, info.Operation.Plane())
		}
		if info.Code.String() != info.Name || info.Name == "" {
			t.Errorf("%v: name %q", info.Code, info.Name)
		}
	}
	for code := range CommandCode(1000) {
		_, inSpec := specCommandCodes[code]
		if code.Known() != inSpec {
			t.Errorf("%d.Known() = %v", code, code.Known())
		}
		if op, ok := code.Operation(); ok != inSpec || (ok && op != specCommandCodes[code]) {
			t.Errorf("%d.Operation() = %v, %v", code, op, ok)
		}
	}
	if !strings.HasPrefix(CommandCode(7).String(), "CommandCode(") {
		t.Fatal("unknown code name")
	}
}

// TestOperationCodeRoundTrip: a replicated operation with one code maps to it and
// back, so the server can turn a prepare's operation into the code its handlers use.
func TestOperationCodeRoundTrip(t *testing.T) {
	for op := range 256 {
		op := Operation(op)
		code, ok := op.CommandCode()
		if !ok {
			continue
		}
		back, ok := code.Operation()
		if !ok || back != op {
			t.Errorf("%v -> %v -> %v", op, code, back)
		}
	}
	for _, op := range []Operation{OperationReserved, OperationRegister, OperationNonReplicated,
		OperationCreateTopicWithAssignments, OperationTruncatePartition} {
		if _, ok := op.CommandCode(); ok {
			t.Errorf("%v has a single command code", op)
		}
	}
	if code, ok := OperationLogout.CommandCode(); !ok || code != CodeLogoutUser {
		t.Fatalf("Logout -> %v", code)
	}
}

func TestOperationClasses(t *testing.T) {
	clientSendable := map[Operation]bool{1: true, 2: true, 3: true, 160: true, 161: true, 162: true}
	for op := Operation(128); op <= 149; op++ {
		clientSendable[op] = true
	}
	known := map[Operation]bool{0: true, 64: true, 65: true, 66: true, 67: true, 68: true, 69: true, 70: true}
	for op := range clientSendable {
		known[op] = true
	}
	for op := range 256 {
		op := Operation(op)
		if op.ClientAllowed() != clientSendable[op] {
			t.Errorf("%v.ClientAllowed() = %v", op, op.ClientAllowed())
		}
		if op.Known() != known[op] {
			t.Errorf("%v.Known() = %v", op, op.Known())
		}
		if op.Internal() != (op >= 64 && op <= 127) {
			t.Errorf("%v.Internal() = %v", op, op.Internal())
		}
		if op.Known() && strings.HasPrefix(op.String(), "Operation(") {
			t.Errorf("%d has no name", op)
		}
		if !op.Known() && op.Plane() != PlaneNone {
			t.Errorf("unknown %v has plane %v", op, op.Plane())
		}
	}
	planes := map[Operation]Plane{
		OperationRegister: PlaneSession, OperationLogout: PlaneSession,
		OperationNonReplicated: PlaneNonReplicated, OperationCreateStream: PlaneMetadata,
		OperationDeleteSegments: PlaneMetadata, OperationTruncatePartition: PlaneMetadata,
		OperationSendMessages: PlanePartition, OperationDeleteConsumerOffset: PlanePartition,
	}
	for op, want := range planes {
		if op.Plane() != want {
			t.Errorf("%v.Plane() = %v, want %v", op, op.Plane(), want)
		}
	}
	if OperationNonReplicated.Replicated() || OperationReserved.Replicated() || !OperationRegister.Replicated() ||
		!OperationSendMessages.Replicated() || Operation(200).Replicated() {
		t.Fatal("Replicated")
	}
}

func TestNonReplicatedCodeCheck(t *testing.T) {
	for _, info := range Commands() {
		got := NonReplicatedCodeCheck(info.Code)
		var want HeaderFault
		switch info.Operation {
		case OperationNonReplicated:
			want = FaultNone
		case OperationReserved:
			want = FaultLegacyLoginCode
		default:
			want = FaultReplicatedCodeAsRead
		}
		if got != want {
			t.Errorf("%v: %v, want %v", info.Code, got, want)
		}
	}
	for _, code := range []CommandCode{0, 2, 23, 103, 999, 1 << 31} {
		if NonReplicatedCodeCheck(code) != FaultUnknownCommandCode {
			t.Errorf("%d accepted", code)
		}
	}
}

func TestDiscriminantNames(t *testing.T) {
	names := map[string]string{
		CommandPrepare.String():                            "Prepare",
		CommandForwardLogoutResult.String():                "ForwardLogoutResult",
		Command(30).String():                               "Command(30)",
		EvictionMalformedLogin.String():                    "MalformedLogin",
		EvictionReason(16).String():                        "EvictionReason(16)",
		ForwardRegisterClientIDOwnedByAnotherUser.String(): "ClientIdOwnedByAnotherUser",
		ForwardRegisterOutcome(7).String():                 "ForwardRegisterOutcome(7)",
		ForwardLogoutCanceled.String():                     "Canceled",
		ForwardLogoutOutcome(5).String():                   "ForwardLogoutOutcome(5)",
		AckQuorum.String():                                 "Quorum",
		AckNoAck.String():                                  "NoAck",
		AckLevel(2).String():                               "AckLevel(2)",
		PlanePartition.String():                            "Partition",
		Plane(9).String():                                  "Plane(9)",
		OperationCompleteConsumerGroupRevocation.String():  "CompleteConsumerGroupRevocation",
		Operation(99).String():                             "Operation(99)",
		HandshakeDirectionalRule.String():                  "DirectionalRule",
		HandshakeStatus(6).String():                        "HandshakeStatus(6)",
		ArtifactSegmentLog.String():                        "SegmentLog",
		ArtifactKind(4).String():                           "ArtifactKind(4)",
	}
	for got, want := range names {
		if got != want {
			t.Errorf("name %q, want %q", got, want)
		}
	}
	for c := range CommandMax + 1 {
		if strings.HasPrefix(c.String(), "Command(") {
			t.Errorf("command %d has no name", c)
		}
	}
	if AckLevel(2).Known() || !AckQuorum.Known() {
		t.Fatal("AckLevel.Known")
	}
	if ForwardRegisterOk.Transient() || ForwardRegisterClientIDOwnedByAnotherUser.Transient() ||
		!ForwardRegisterNotPrimary.Transient() || ForwardRegisterOutcome(9).Transient() {
		t.Fatal("ForwardRegisterOutcome.Transient")
	}
}

func TestPartitionGroup(t *testing.T) {
	tests := []struct {
		stream, topic, partition uint32
		ok                       bool
	}{
		{0, 0, 0, true},
		{1, 2, 3, true},
		{StreamsMax - 1, TopicsPerStreamMax - 1, PartitionsPerTopicMax - 1, true},
		{StreamsMax, 0, 0, false},
		{0, TopicsPerStreamMax, 0, false},
		{0, 0, PartitionsPerTopicMax, false},
	}
	for _, tt := range tests {
		group, ok := PartitionGroup(tt.stream, tt.topic, tt.partition)
		if ok != tt.ok {
			t.Fatalf("PartitionGroup(%d,%d,%d) ok = %v", tt.stream, tt.topic, tt.partition, ok)
		}
		if !ok {
			continue
		}
		s, tp, p, ok := SplitPartitionGroup(group)
		if !ok || s != tt.stream || tp != tt.topic || p != tt.partition {
			t.Fatalf("split(%#x) = %d %d %d %v", group, s, tp, p, ok)
		}
		if GroupPlane(group) != PlanePartition || group&MetadataGroup != 0 {
			t.Fatalf("group %#x plane %v", group, GroupPlane(group))
		}
	}
	// Bits 0..19 partition, 20..31 topic, 32..51 stream.
	if g, _ := PartitionGroup(5, 6, 7); g != 5<<32|6<<20|7 {
		t.Fatalf("packing %#x", g)
	}
	if GroupPlane(MetadataGroup) != PlaneMetadata {
		t.Fatal("metadata group")
	}
	for _, bad := range []uint64{MetadataGroup | 1, MetadataGroup | 1<<52, 1_000_000, 1<<62 | 1_000_000} {
		if _, _, _, ok := SplitPartitionGroup(bad); ok || GroupPlane(bad) != PlaneNone {
			t.Errorf("group %#x accepted", bad)
		}
	}
}

// A partition group's incarnation tag takes bits 52..62 and leaves the key to
// routing: every tag splits to the same ids, and a tagged group never reads as the
// metadata group.
func TestIncarnationGroup(t *testing.T) {
	key, _ := PartitionGroup(StreamsMax-1, TopicsPerStreamMax-1, PartitionsPerTopicMax-1)
	seen := make(map[uint16]bool)
	for createdAt := uint64(1_796_512_059_908_485); createdAt < 1_796_512_059_908_485+20_000; createdAt += 7 {
		group := IncarnationGroup(key, createdAt)
		tag := GroupIncarnationTag(group)
		if tag != IncarnationTag(createdAt) || tag >= 1<<11 {
			t.Fatalf("created at %d: group %#x carries tag %d, want %d", createdAt, group, tag, IncarnationTag(createdAt))
		}
		if group&^(uint64(1<<11-1)<<52) != key || group&MetadataGroup != 0 || GroupPlane(group) != PlanePartition {
			t.Fatalf("created at %d: group %#x does not keep key %#x", createdAt, group, key)
		}
		s, tp, p, ok := SplitPartitionGroup(group)
		if !ok || s != StreamsMax-1 || tp != TopicsPerStreamMax-1 || p != PartitionsPerTopicMax-1 {
			t.Fatalf("split(%#x) = %d %d %d %v", group, s, tp, p, ok)
		}
		if IncarnationGroup(group, createdAt) != group {
			t.Fatalf("retagging %#x with its own incarnation changed it", group)
		}
		seen[tag] = true
	}
	// Consecutive revisions (a delete and a create a few µs apart) spread over the
	// tags, so that the two incarnations' frames stay apart.
	if len(seen) < 1<<11*9/10 {
		t.Fatalf("2857 revisions gave %d distinct tags of 2048", len(seen))
	}
	if IncarnationTag(1_000) == IncarnationTag(1_001) {
		t.Fatal("adjacent revisions share a tag")
	}
}

// Tag 0 is an untagged id's, taken by a partition as its own incarnation's: no
// incarnation may have it. These created_at values are the ones the bare Fibonacci
// hash (the top 11 bits of created_at * 2^64/phi) mapped to 0.
func TestIncarnationTagIsNeverZero(t *testing.T) {
	key, _ := PartitionGroup(3, 2, 1)
	for _, createdAt := range []uint64{0, 1597, 4181, 1_796_512_059_900_254, 1_796_512_059_901_851,
		1_796_512_059_902_838, 1_796_512_059_904_435} {
		if tag := IncarnationTag(createdAt); tag == 0 || tag >= 1<<11 {
			t.Errorf("created at %d: tag %d, want 1..2047", createdAt, tag)
		}
		if GroupUntagged(IncarnationGroup(key, createdAt)) {
			t.Errorf("created at %d: the group reads as untagged", createdAt)
		}
	}
}

// Consensus compares group ids without their tags: a node may send untagged ids
// (cluster.partition_incarnation_tags = false, or a binary before the tag). The
// metadata group stays itself: no tag bits make another id match it.
func TestSameGroupIgnoresTheIncarnationTag(t *testing.T) {
	key, _ := PartitionGroup(3, 2, 1)
	other, _ := PartitionGroup(3, 2, 2)
	tagged := IncarnationGroup(key, 77)
	if !GroupUntagged(key) || GroupUntagged(tagged) || GroupKey(tagged) != key {
		t.Fatalf("key %#x, tagged %#x: untagged %v %v, key %#x", key, tagged, GroupUntagged(key), GroupUntagged(tagged), GroupKey(tagged))
	}
	for _, c := range []struct {
		a, b uint64
		same bool
	}{
		{key, tagged, true},
		{tagged, IncarnationGroup(key, 78), true},
		{tagged, IncarnationGroup(other, 77), false},
		{key, other, false},
		{MetadataGroup, MetadataGroup, true},
		{MetadataGroup, MetadataGroup | 1<<52, false},
		{MetadataGroup, 0, false},
	} {
		if SameGroup(c.a, c.b) != c.same || SameGroup(c.b, c.a) != c.same {
			t.Errorf("SameGroup(%#x, %#x) = %v, want %v", c.a, c.b, !c.same, c.same)
		}
	}
}

// A purge moves a life's tag on by one: no two of 2,046 consecutive lives share a
// tag, every tag is 1..2047, and a life never purged keeps the incarnation's tag.
func TestPurgedIncarnationTag(t *testing.T) {
	for _, createdAt := range []uint64{1, 77, 1_796_512_059_908_485} {
		base := IncarnationTag(createdAt)
		if PurgedIncarnationTag(base, 0) != base {
			t.Fatalf("created at %d: unpurged tag %d, want the incarnation's %d", createdAt, PurgedIncarnationTag(base, 0), base)
		}
		seen := make(map[uint16]uint64)
		for gen := uint64(0); gen < incarnationTagsCount; gen++ {
			tag := PurgedIncarnationTag(base, gen)
			if tag == 0 || tag > incarnationTagsCount {
				t.Fatalf("created at %d, generation %d: tag %d outside 1..2047", createdAt, gen, tag)
			}
			if was, ok := seen[tag]; ok {
				t.Fatalf("created at %d: generations %d and %d share tag %d", createdAt, was, gen, tag)
			}
			seen[tag] = gen
		}
		if PurgedIncarnationTag(base, incarnationTagsCount) != base || PurgedIncarnationTag(base, 1<<64-1) == 0 {
			t.Fatalf("created at %d: the tags do not wrap over 1..2047", createdAt)
		}
	}
	key, _ := PartitionGroup(3, 4, 5)
	if g := TaggedGroup(IncarnationGroup(key, 9), 17); GroupIncarnationTag(g) != 17 || GroupKey(g) != key {
		t.Fatalf("TaggedGroup: %#x carries tag %d and key %#x", g, GroupIncarnationTag(g), GroupKey(g))
	}
}
