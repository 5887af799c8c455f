package wire

import (
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"unsafe"
)

// alignedBuffer returns n zero bytes starting on a HeaderAlignment boundary, as an
// arena buffer would.
func alignedBuffer(n int) []byte {
	raw := make([]byte, n+HeaderAlignment)
	skip := (HeaderAlignment - int(uintptr(unsafe.Pointer(&raw[0]))%HeaderAlignment)) % HeaderAlignment
	return raw[skip : skip+n : skip+n]
}

// alignedCopy copies b into a fresh aligned buffer.
func alignedCopy(b []byte) []byte {
	buf := alignedBuffer(len(b))
	copy(buf, b)
	return buf
}

// The golden vectors fill most fields with "pattern" bytes: each byte equals its own
// offset in the header, so a field read from the wrong place shows a wrong value.
func patternBytes(off, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(off + i)
	}
	return b
}

func pat128(off int) Uint128 { return GetUint128(patternBytes(off, 16)) }
func pat64(off int) uint64 {
	b := patternBytes(off, 8)
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}
func pat32(off int) uint32 { return uint32(pat64(off)) }
func pat32Bytes(off int) (a [32]byte) {
	copy(a[:], patternBytes(off, 32))
	return a
}

// patternFrame is the frame part every golden vector shares: pattern everywhere but
// size, release and command.
func patternFrame(command Command, size uint32) CommonHeader {
	return CommonHeader{
		Checksum: pat128(0), ChecksumBody: pat128(16), Cluster: pat128(32),
		Size: size, View: pat32(52), Command: command, Replica: 61,
	}
}

// headerGolden ties one golden file to the header value written from the same spec
// table and to the decoder that must accept it.
type headerGolden struct {
	file    string
	command Command
	want    func() []byte         // the expected header's 256 bytes
	decode  func(b []byte) error  // the plane's decoder
	compare func(b []byte) string // field-by-field comparison of the view with want
}

func goldenCase[T AnyHeader](file string, command Command, want T, decode func([]byte) error) headerGolden {
	return headerGolden{
		file:    file,
		command: command,
		want:    func() []byte { w := want; return HeaderBytes(&w)[:] },
		decode:  decode,
		compare: func(b []byte) string {
			got, err := ViewHeader[T](b)
			if err != nil {
				return err.Error()
			}
			if !reflect.DeepEqual(*got, want) {
				return "decoded fields differ:\n got " + describeHeader(*got) + "\nwant " + describeHeader(want)
			}
			return ""
		},
	}
}

func describeHeader(v any) string {
	return reflect.ValueOf(v).Type().Name() + " " + formatFields(reflect.ValueOf(v))
}

func formatFields(v reflect.Value) string {
	s := "{"
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.Anonymous {
			s += formatFields(v.Field(i)) + " "
			continue
		}
		s += f.Name + ":" + reflectString(v.Field(i)) + " "
	}
	return s + "}"
}

func reflectString(v reflect.Value) string {
	if v.Kind() == reflect.Array && v.Type().Elem().Kind() == reflect.Uint8 {
		b := make([]byte, v.Len())
		for i := range b {
			b[i] = byte(v.Index(i).Uint())
		}
		if allZero(b) {
			return "zero"
		}
		return fmtHeaderField(b)
	}
	return fmtHeaderField(v.Interface())
}

func fmtHeaderField(x any) string {
	switch x := x.(type) {
	case Uint128:
		return "{" + hexU64(x.Lo) + "," + hexU64(x.Hi) + "}"
	case uint64:
		return hexU64(x)
	case []byte:
		return hex.EncodeToString(x)
	}
	return fmt.Sprint(x)
}

func hexU64(v uint64) string {
	const digits = "0123456789abcdef"
	out := []byte("0x")
	for shift := 60; shift >= 0; shift -= 4 {
		out = append(out, digits[v>>uint(shift)&0xf])
	}
	return string(out)
}

func decodeRequestGolden(b []byte) error {
	_, err := DecodeRequestHeader(b, DefaultMessageSizeMax)
	return err
}
func decodeReplyGolden(b []byte) error {
	_, err := DecodeReplyHeader(b, DefaultMessageSizeMax)
	return err
}
func decodeEvictionGolden(b []byte) error {
	_, err := DecodeEvictionHeader(b)
	return err
}

// decodeReplicaGolden seals a copy of a sealed-command golden vector (the vectors hold a
// pattern in the checksum field) and decodes it as the replica listener would.
func decodeReplicaGolden(b []byte) error {
	frame := alignedCopy(b)
	if Command(frame[CommandFieldOffset]).FrameSealed() {
		SealFrame((*[HeaderSize]byte)(frame))
	}
	_, err := DecodeReplicaHeader(frame, DefaultMessageSizeMax)
	return err
}

func headerGoldens() []headerGolden {
	prepare := PrepareHeader{
		CommonHeader: patternFrame(CommandPrepare, 512),
		Client:       pat128(128), Parent: pat128(144), RequestChecksum: pat128(160),
		Op: pat64(176), Commit: pat64(184), Timestamp: pat64(192), Request: pat64(200),
		Operation: OperationSendMessages, Group: pat64(216), UserID: pat32(224),
	}
	repair := prepare
	repair.Command = CommandRepairPrepare
	return []headerGolden{
		goldenCase("headers/request_create_stream.hex", CommandRequest, RequestHeader{
			CommonHeader: patternFrame(CommandRequest, 300),
			Client:       pat128(128), RequestChecksum: pat128(144), Timestamp: pat64(160), Request: pat64(168),
			Operation: OperationCreateStream, Session: pat64(184), UserID: pat32(192),
		}, decodeRequestGolden),
		goldenCase("headers/request_ping.hex", CommandRequest, RequestHeader{
			CommonHeader: CommonHeader{Size: 256, Command: CommandRequest},
			Client:       pat128(128), Timestamp: pat64(160), Request: pat64(168),
			Operation: OperationNonReplicated, NonReplicatedCode: CodePing,
		}, decodeRequestGolden),
		goldenCase("headers/reply_denied.hex", CommandReply, ReplyHeader{
			CommonHeader:    patternFrame(CommandReply, 256),
			RequestChecksum: pat128(128), Context: pat128(144), Client: pat128(160),
			Op: pat64(176), Commit: pat64(184), Timestamp: pat64(192), Request: pat64(200),
			Operation: OperationCreateTopic, Status: ErrStreamIdNotFound,
		}, decodeReplyGolden),
		goldenCase("headers/reply_create_topic.hex", CommandReply, ReplyHeader{
			CommonHeader:    patternFrame(CommandReply, 256+4+70),
			RequestChecksum: pat128(128), Context: pat128(144), Client: pat128(160),
			Op: pat64(176), Commit: pat64(184), Timestamp: pat64(192), Request: pat64(200),
			Operation: OperationCreateTopicWithAssignments,
		}, decodeReplyGolden),
		goldenCase("headers/eviction_incompatible_protocol.hex", CommandEviction, EvictionHeader{
			CommonHeader:          patternFrame(CommandEviction, 256),
			Client:                pat128(128),
			ServerProtocolVersion: 0x2c00, ServerProtocolVersionMin: 0x2800,
			Reason: EvictionIncompatibleProtocol,
		}, decodeEvictionGolden),
		goldenCase("headers/prepare.hex", CommandPrepare, prepare, decodeReplicaGolden),
		goldenCase("headers/repair_prepare.hex", CommandRepairPrepare, repair, decodeReplicaGolden),
		goldenCase("headers/prepare_ok.hex", CommandPrepareOk, PrepareOkHeader{
			CommonHeader: patternFrame(CommandPrepareOk, 256),
			Parent:       pat128(128), PrepareChecksum: pat128(144), Op: pat64(160), Commit: pat64(168),
			Timestamp: pat64(176), Request: pat64(184), Operation: OperationStoreConsumerOffset,
			Group: pat64(200),
		}, decodeReplicaGolden),
		goldenCase("headers/commit.hex", CommandCommit, CommitHeader{
			CommonHeader:   patternFrame(CommandCommit, 256),
			CommitChecksum: pat128(128), TimestampMonotonic: pat64(144), Commit: pat64(152),
			CheckpointOp: pat64(160), Group: pat64(168),
		}, decodeReplicaGolden),
		goldenCase("headers/start_view_change.hex", CommandStartViewChange, StartViewChangeHeader{
			CommonHeader: patternFrame(CommandStartViewChange, 256), Group: pat64(128),
		}, decodeReplicaGolden),
		goldenCase("headers/do_view_change.hex", CommandDoViewChange, DoViewChangeHeader{
			CommonHeader: patternFrame(CommandDoViewChange, 768),
			Op:           pat64(128), Commit: 0x5051, Group: pat64(144), LogView: 0x3031,
			NackBitset: Uint128{Lo: 1}, PresentBitset: Uint128{Lo: 3},
		}, decodeReplicaGolden),
		goldenCase("headers/start_view.hex", CommandStartView, StartViewHeader{
			CommonHeader: patternFrame(CommandStartView, 512),
			Op:           pat64(128), Commit: 0x5051, Group: pat64(144), Incarnation: pat128(240),
		}, decodeReplicaGolden),
		goldenCase("headers/request_start_view.hex", CommandRequestStartView, RequestStartViewHeader{
			CommonHeader: patternFrame(CommandRequestStartView, 256), Group: pat64(128), Incarnation: pat128(240),
		}, decodeReplicaGolden),
		goldenCase("headers/request_prepares.hex", CommandRequestPrepares, RequestPreparesHeader{
			CommonHeader: patternFrame(CommandRequestPrepares, 256),
			Nonce:        pat128(128), FromOp: pat64(144), ToOp: pat64(152), Group: pat64(160),
		}, decodeReplicaGolden),
		goldenCase("headers/repair_done.hex", CommandRepairDone, RepairRangeHeader{
			CommonHeader: patternFrame(CommandRepairDone, 256), Nonce: pat128(128), Op: pat64(144), Group: pat64(152),
		}, decodeReplicaGolden),
		goldenCase("headers/range_evicted.hex", CommandRangeEvicted, RepairRangeHeader{
			CommonHeader: patternFrame(CommandRangeEvicted, 256), Nonce: pat128(128), Op: pat64(144), Group: pat64(152),
		}, decodeReplicaGolden),
		goldenCase("headers/request_state_transfer.hex", CommandRequestStateTransfer, RequestStateTransferHeader{
			CommonHeader: patternFrame(CommandRequestStateTransfer, 256), Nonce: pat128(128), Group: pat64(144),
		}, decodeReplicaGolden),
		goldenCase("headers/state_transfer_target.hex", CommandStateTransferTarget, StateTransferTargetHeader{
			CommonHeader: patternFrame(CommandStateTransferTarget, 256+17),
			Nonce:        pat128(128), CommitOp: pat64(144), Group: pat64(152), Available: 1, CommitMax: pat64(168),
		}, decodeReplicaGolden),
		goldenCase("headers/state_transfer_target_commit_checksum.hex", CommandStateTransferTarget, StateTransferTargetHeader{
			CommonHeader: patternFrame(CommandStateTransferTarget, 256+17),
			Nonce:        pat128(128), CommitOp: pat64(144), Group: pat64(152), Available: 1, CommitMax: pat64(168),
			CommitChecksum: pat128(176),
		}, decodeReplicaGolden),
		goldenCase("headers/request_state_chunk.hex", CommandRequestStateChunk, RequestStateChunkHeader{
			CommonHeader: patternFrame(CommandRequestStateChunk, 256),
			Nonce:        pat128(128), Offset: pat64(144), Group: pat64(152), Len: pat32(160), Artifact: pat32(164),
		}, decodeReplicaGolden),
		goldenCase("headers/state_chunk.hex", CommandStateChunk, StateChunkHeader{
			CommonHeader: patternFrame(CommandStateChunk, 256+4096),
			Nonce:        pat128(128), Offset: pat64(144), Group: pat64(152), Artifact: pat32(160),
		}, decodeReplicaGolden),
		goldenCase("headers/forward_register.hex", CommandForwardRegister, ForwardRegisterHeader{
			CommonHeader: patternFrame(CommandForwardRegister, 256),
			Client:       pat128(128), Nonce: pat128(144), UserID: pat32(160),
		}, decodeReplicaGolden),
		goldenCase("headers/forward_register_result.hex", CommandForwardRegisterResult, ForwardRegisterResultHeader{
			CommonHeader: patternFrame(CommandForwardRegisterResult, 256),
			Nonce:        pat128(128), Client: pat128(144), Epoch: pat64(160), Watermark: pat64(168),
		}, decodeReplicaGolden),
		goldenCase("headers/forward_logout.hex", CommandForwardLogout, ForwardLogoutHeader{
			CommonHeader: patternFrame(CommandForwardLogout, 256),
			Client:       pat128(128), Nonce: pat128(144), Session: pat64(160), Request: pat64(168),
		}, decodeReplicaGolden),
		goldenCase("headers/forward_logout_result.hex", CommandForwardLogoutResult, ForwardLogoutResultHeader{
			CommonHeader: patternFrame(CommandForwardLogoutResult, 256),
			Nonce:        pat128(128), Client: pat128(144), Commit: pat64(160),
		}, decodeReplicaGolden),
		goldenCase("headers/replica_hello.hex", CommandReplicaHello, HandshakeHeader{
			CommonHeader: patternFrame(CommandReplicaHello, 256), Nonce: pat32Bytes(128),
		}, decodeReplicaGolden),
		goldenCase("headers/replica_challenge.hex", CommandReplicaChallenge, HandshakeHeader{
			CommonHeader: patternFrame(CommandReplicaChallenge, 256), Nonce: pat32Bytes(128), MAC: pat32Bytes(160),
		}, decodeReplicaGolden),
		goldenCase("headers/replica_finish.hex", CommandReplicaFinish, HandshakeHeader{
			CommonHeader: patternFrame(CommandReplicaFinish, 256), MAC: pat32Bytes(160),
		}, decodeReplicaGolden),
	}
}

// TestHeaderGolden checks every header layout three ways against a vector written
// from the spec table: encoding the expected value gives the vector's bytes, viewing
// the vector gives the expected fields, and the plane's decoder accepts it.
func TestHeaderGolden(t *testing.T) {
	cases := headerGoldens()
	seen := map[string]bool{}
	for _, tc := range cases {
		seen[tc.file] = true
		t.Run(tc.file, func(t *testing.T) {
			checkGolden(t, tc.file, tc.want())
			golden := alignedCopy(readGolden(t, tc.file))
			if len(golden) != HeaderSize {
				t.Fatalf("vector holds %d bytes, want 256", len(golden))
			}
			if got := Command(golden[CommandFieldOffset]); got != tc.command {
				t.Fatalf("vector command %v, want %v", got, tc.command)
			}
			if diff := tc.compare(golden); diff != "" {
				t.Fatal(diff)
			}
			if err := tc.decode(golden); err != nil {
				t.Fatalf("decoder refused the golden vector: %v", err)
			}
		})
	}
	// Every vector on disk has a case, so none silently goes unchecked.
	for _, name := range goldenFiles(t, "headers") {
		if !seen[name] {
			t.Errorf("golden %s has no test case", name)
		}
	}
}

// TestHeaderStructsHaveNoPadding walks every header type: fields must tile the 256
// bytes exactly, so Go inserted no padding the wire does not have.
func TestHeaderStructsHaveNoPadding(t *testing.T) {
	types := []any{
		GenericHeader{}, RequestHeader{}, ReplyHeader{}, EvictionHeader{}, PrepareHeader{},
		PrepareOkHeader{}, CommitHeader{}, StartViewChangeHeader{}, DoViewChangeHeader{},
		StartViewHeader{}, RequestStartViewHeader{}, RequestPreparesHeader{}, RepairRangeHeader{},
		RequestStateTransferHeader{}, StateTransferTargetHeader{}, RequestStateChunkHeader{},
		StateChunkHeader{}, ForwardRegisterHeader{}, ForwardRegisterResultHeader{},
		ForwardLogoutHeader{}, ForwardLogoutResultHeader{}, HandshakeHeader{},
	}
	var walk func(typ reflect.Type, base uintptr, next *uintptr)
	walk = func(typ reflect.Type, base uintptr, next *uintptr) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			if base+f.Offset != *next {
				t.Errorf("%s.%s at %d, previous field ends at %d", typ.Name(), f.Name, base+f.Offset, *next)
			}
			if f.Anonymous {
				walk(f.Type, base+f.Offset, next)
				continue
			}
			*next = base + f.Offset + f.Type.Size()
		}
	}
	for _, h := range types {
		typ := reflect.TypeOf(h)
		if typ.Size() != HeaderSize {
			t.Errorf("%s is %d bytes", typ.Name(), typ.Size())
		}
		var next uintptr
		walk(typ, 0, &next)
		if next != HeaderSize {
			t.Errorf("%s fields end at %d", typ.Name(), next)
		}
	}
}

func TestViewHeaderRefusesShortAndMisaligned(t *testing.T) {
	buf := alignedBuffer(HeaderSize + 1)
	if _, err := ViewHeader[RequestHeader](buf[:HeaderSize-1]); err != FaultShortHeader {
		t.Fatalf("short: %v", err)
	}
	if _, err := ViewHeader[RequestHeader](buf[1:]); err != FaultMisaligned {
		t.Fatalf("misaligned: %v", err)
	}
	h, err := ViewHeader[RequestHeader](buf)
	if err != nil {
		t.Fatal(err)
	}
	// A view aliases the buffer: no copy.
	h.Size = 0x01020304
	if got, _ := PeekSize(buf); got != 0x01020304 {
		t.Fatalf("view does not alias the buffer: size %#x", got)
	}
}

func TestPeek(t *testing.T) {
	buf := make([]byte, 61)
	buf[48], buf[49] = 0x34, 0x12
	buf[60] = byte(CommandPrepare)
	if _, ok := PeekSize(buf[:51]); ok {
		t.Fatal("PeekSize read a 51-byte prefix")
	}
	if size, ok := PeekSize(buf[:52]); !ok || size != 0x1234 {
		t.Fatalf("PeekSize = %#x, %v", size, ok)
	}
	if _, ok := PeekCommand(buf[:60]); ok {
		t.Fatal("PeekCommand read a 60-byte prefix")
	}
	if c, ok := PeekCommand(buf); !ok || c != CommandPrepare {
		t.Fatalf("PeekCommand = %v, %v", c, ok)
	}
}

func TestHeaderFaultAnswers(t *testing.T) {
	for f := FaultNone + 1; f < faultCount; f++ {
		if headerFaults[f].text == "" {
			t.Errorf("fault %d has no text", f)
		}
		var target HeaderFault
		if !errors.As(error(f), &target) || target != f {
			t.Errorf("fault %d does not round-trip through errors.As", f)
		}
	}
	if HeaderFault(200).Error() == "" || HeaderFault(200).Eviction() != 0 || HeaderFault(200).Status() != 0 {
		t.Fatal("out-of-range fault")
	}
}
