package wire

import (
	"math/rand/v2"
	"testing"
)

// validRequest returns an aligned buffer holding a request that passes every rule,
// for tests to break one rule at a time.
func validRequestHeader(op Operation) (*RequestHeader, []byte) {
	buf := alignedBuffer(HeaderSize)
	h, err := ViewHeader[RequestHeader](buf)
	if err != nil {
		panic(err)
	}
	h.Size = HeaderSize + 10
	h.Command = CommandRequest
	h.Client = Uint128{Lo: 0xc1, Hi: 0xc2}
	h.Operation = op
	switch op {
	case OperationNonReplicated:
		h.NonReplicatedCode = CodeGetStreams
	case OperationRegister:
	default:
		h.Session = 7
		h.Request = 3
	}
	return h, buf
}

func TestDecodeRequestHeaderFaults(t *testing.T) {
	tests := []struct {
		name     string
		op       Operation
		mutate   func(h *RequestHeader, b []byte)
		want     HeaderFault
		eviction EvictionReason
		status   ErrorCode
	}{
		{name: "valid metadata", op: OperationCreateTopic, mutate: func(*RequestHeader, []byte) {}},
		{name: "valid register", op: OperationRegister, mutate: func(*RequestHeader, []byte) {}},
		{name: "valid read", op: OperationNonReplicated, mutate: func(*RequestHeader, []byte) {}},
		{name: "valid ping before login", op: OperationNonReplicated,
			mutate: func(h *RequestHeader, _ []byte) { h.NonReplicatedCode = CodePing; h.Session = 0 }},
		{name: "valid read with session", op: OperationNonReplicated,
			mutate: func(h *RequestHeader, _ []byte) { h.Session = 9; h.Request = 4 }},
		{name: "valid logout", op: OperationLogout, mutate: func(*RequestHeader, []byte) {}},
		{name: "valid send", op: OperationSendMessages, mutate: func(h *RequestHeader, _ []byte) {
			h.Size = DefaultMessageSizeMax
		}},
		{name: "ignored fields", op: OperationCreateStream, mutate: func(h *RequestHeader, _ []byte) {
			h.Checksum, h.ChecksumBody, h.Cluster = Uint128{Lo: 1}, Uint128{Hi: 2}, Uint128{Lo: 3}
			h.View, h.Replica, h.UserID, h.Timestamp = 4, 5, 6, 7
		}},
		{name: "size below header", op: OperationCreateStream, want: FaultSizeBelowHeader,
			eviction: EvictionInvalidRequestBodySize, status: ErrInvalidCommand, mutate: func(h *RequestHeader, _ []byte) { h.Size = 255 }},
		{name: "size zero", op: OperationCreateStream, want: FaultSizeBelowHeader,
			eviction: EvictionInvalidRequestBodySize, status: ErrInvalidCommand, mutate: func(h *RequestHeader, _ []byte) { h.Size = 0 }},
		{name: "size above max", op: OperationCreateStream, want: FaultSizeAboveMax,
			eviction: EvictionInvalidRequestBodySize, status: ErrInvalidCommand,
			mutate: func(h *RequestHeader, _ []byte) { h.Size = DefaultMessageSizeMax + 1 }},
		{name: "reply command", op: OperationCreateStream, want: FaultCommandNotRequest,
			eviction: EvictionInvalidRequestOperation, mutate: func(h *RequestHeader, _ []byte) { h.Command = CommandReply }},
		{name: "prepare command", op: OperationCreateStream, want: FaultCommandNotRequest,
			eviction: EvictionInvalidRequestOperation, mutate: func(h *RequestHeader, _ []byte) { h.Command = CommandPrepare }},
		{name: "command 30", op: OperationCreateStream, want: FaultCommandUnknown,
			eviction: EvictionInvalidRequestOperation, status: ErrInvalidCommand,
			mutate: func(h *RequestHeader, _ []byte) { h.Command = 30 }},
		{name: "release", op: OperationCreateStream, want: FaultReleaseNonZero,
			eviction: EvictionClientReleaseTooHigh, mutate: func(h *RequestHeader, _ []byte) { h.Release = 1 }},
		{name: "operation 0", op: OperationReserved, want: FaultOperationRefused,
			eviction: EvictionInvalidRequestOperation, mutate: func(*RequestHeader, []byte) {}},
		{name: "operation 64", op: OperationCreateTopicWithAssignments, want: FaultOperationRefused,
			eviction: EvictionInvalidRequestOperation, mutate: func(*RequestHeader, []byte) {}},
		{name: "operation 127", op: 127, want: FaultOperationRefused,
			eviction: EvictionInvalidRequestOperation, mutate: func(*RequestHeader, []byte) {}},
		{name: "operation 150", op: 150, want: FaultOperationRefused,
			eviction: EvictionInvalidRequestOperation, mutate: func(*RequestHeader, []byte) {}},
		{name: "operation 163", op: 163, want: FaultOperationRefused,
			eviction: EvictionInvalidRequestOperation, mutate: func(*RequestHeader, []byte) {}},
		{name: "client zero", op: OperationCreateStream, want: FaultClientZero,
			eviction: EvictionNoSession, mutate: func(h *RequestHeader, _ []byte) { h.Client = Uint128{} }},
		{name: "reserved 62", op: OperationCreateStream, want: FaultReservedNonZero,
			status: ErrInvalidCommand, mutate: func(_ *RequestHeader, b []byte) { b[62] = 1 }},
		{name: "reserved 127", op: OperationCreateStream, want: FaultReservedNonZero,
			status: ErrInvalidCommand, mutate: func(_ *RequestHeader, b []byte) { b[127] = 1 }},
		{name: "reserved 255", op: OperationNonReplicated, want: FaultReservedNonZero,
			status: ErrInvalidCommand, mutate: func(_ *RequestHeader, b []byte) { b[255] = 1 }},
		{name: "reserved 200", op: OperationCreateStream, want: FaultReservedNonZero,
			status: ErrInvalidCommand, mutate: func(_ *RequestHeader, b []byte) { b[200] = 1 }},
		{name: "code on a replicated op", op: OperationCreateStream, want: FaultReservedNonZero,
			status: ErrInvalidCommand, mutate: func(h *RequestHeader, _ []byte) { h.NonReplicatedCode = CodeCreateStream }},
		{name: "code on register", op: OperationRegister, want: FaultReservedNonZero,
			status: ErrInvalidCommand, mutate: func(h *RequestHeader, _ []byte) { h.NonReplicatedCode = CodeLoginRegister }},
		{name: "padding 177", op: OperationCreateStream, want: FaultPaddingNonZero,
			status: ErrInvalidCommand, mutate: func(_ *RequestHeader, b []byte) { b[177] = 1 }},
		{name: "padding 183", op: OperationCreateStream, want: FaultPaddingNonZero,
			status: ErrInvalidCommand, mutate: func(_ *RequestHeader, b []byte) { b[183] = 1 }},
		{name: "register session", op: OperationRegister, want: FaultRegisterSessionNonZero,
			eviction: EvictionSessionError, mutate: func(h *RequestHeader, _ []byte) { h.Session = 1 }},
		{name: "register request", op: OperationRegister, want: FaultRegisterRequestNonZero,
			eviction: EvictionSessionError, mutate: func(h *RequestHeader, _ []byte) { h.Request = 1 }},
		{name: "no session", op: OperationDeleteUser, want: FaultSessionZero,
			eviction: EvictionNoSession, mutate: func(h *RequestHeader, _ []byte) { h.Session = 0 }},
		// A logout without a session reaches the server, which answers it with an
		// empty reply as the reference does.
		{name: "logout without session", op: OperationLogout, want: FaultNone,
			mutate: func(h *RequestHeader, _ []byte) { h.Session = 0 }},
		{name: "request zero", op: OperationStoreConsumerOffset, want: FaultRequestZero,
			eviction: EvictionSessionError, mutate: func(h *RequestHeader, _ []byte) { h.Request = 0 }},
		// Codes the registry does not serve as reads pass header validation: the
		// server answers them after its session check (TestNonReplicatedCodeAnswers).
		{name: "read code unknown", op: OperationNonReplicated, want: FaultNone,
			mutate: func(h *RequestHeader, _ []byte) { h.NonReplicatedCode = 607 }},
		{name: "legacy login", op: OperationNonReplicated, want: FaultLegacyLoginCode,
			eviction: EvictionMalformedLogin, mutate: func(h *RequestHeader, _ []byte) { h.NonReplicatedCode = CodeLoginUser }},
		{name: "legacy pat login", op: OperationNonReplicated, want: FaultLegacyLoginCode,
			eviction: EvictionMalformedLogin,
			mutate:   func(h *RequestHeader, _ []byte) { h.NonReplicatedCode = CodeLoginWithPersonalAccessToken }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, buf := validRequestHeader(tt.op)
			tt.mutate(h, buf)
			got, err := DecodeRequestHeader(buf, DefaultMessageSizeMax)
			if tt.want == FaultNone {
				if err != nil || got != h {
					t.Fatalf("refused a valid request: %v", err)
				}
				return
			}
			fault, ok := err.(HeaderFault)
			if !ok || fault != tt.want || got != nil {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if fault.Eviction() != tt.eviction || fault.Status() != tt.status {
				t.Fatalf("answer = eviction %v status %v, want %v %v",
					fault.Eviction(), fault.Status(), tt.eviction, tt.status)
			}
			if h.Validate(DefaultMessageSizeMax) != err {
				t.Fatal("Validate disagrees with DecodeRequestHeader")
			}
		})
	}
}

func TestDecodeRequestHeaderSizeMax(t *testing.T) {
	h, buf := validRequestHeader(OperationSendMessages)
	h.Size = 4096
	if _, err := DecodeRequestHeader(buf, 4096); err != nil {
		t.Fatalf("size == max refused: %v", err)
	}
	if _, err := DecodeRequestHeader(buf, 4095); err != FaultSizeAboveMax {
		t.Fatalf("size > max: %v", err)
	}
	if h.BodySizeBytes() != 4096-256 {
		t.Fatalf("BodySizeBytes = %d", h.BodySizeBytes())
	}
}

// TestRequestHeaderRoundTrip generates valid requests from a seeded stream: putting
// one into a buffer and decoding it gives back the same header, and every client
// operation and every read code is covered.
func TestRequestHeaderRoundTrip(t *testing.T) {
	const seed = 0x1990
	rng := rand.New(rand.NewPCG(seed, seed))
	var clientOps []Operation
	for op := range 256 {
		if Operation(op).ClientAllowed() {
			clientOps = append(clientOps, Operation(op))
		}
	}
	var readCodes []CommandCode
	for _, c := range Commands() {
		if c.Operation == OperationNonReplicated {
			readCodes = append(readCodes, c.Code)
		}
	}
	buf := alignedBuffer(HeaderSize)
	for i := range 2000 {
		var want RequestHeader
		want.Checksum = Uint128{Lo: rng.Uint64(), Hi: rng.Uint64()}
		want.ChecksumBody = Uint128{Lo: rng.Uint64(), Hi: rng.Uint64()}
		want.Cluster = Uint128{Lo: rng.Uint64(), Hi: rng.Uint64()}
		want.Size = HeaderSize + rng.Uint32N(DefaultMessageSizeMax-HeaderSize+1)
		want.View = rng.Uint32()
		want.Command = CommandRequest
		want.Replica = uint8(rng.Uint32())
		want.Client = Uint128{Lo: rng.Uint64() | 1, Hi: rng.Uint64()}
		want.RequestChecksum = Uint128{Lo: rng.Uint64()}
		want.Timestamp = rng.Uint64()
		want.Operation = clientOps[i%len(clientOps)]
		want.UserID = rng.Uint32()
		switch want.Operation {
		case OperationNonReplicated:
			want.NonReplicatedCode = readCodes[rng.IntN(len(readCodes))]
			want.Session = rng.Uint64() >> rng.UintN(65)
			want.Request = rng.Uint64()
		case OperationRegister:
		default:
			want.Session = rng.Uint64() | 1
			want.Request = rng.Uint64() | 1
		}
		want.Put(buf)
		got, err := DecodeRequestHeader(buf, DefaultMessageSizeMax)
		if err != nil {
			t.Fatalf("seed=%d case %d: %v refused: %v", seed, i, want.Operation, err)
		}
		if *got != want {
			t.Fatalf("seed=%d case %d: round trip differs", seed, i)
		}
	}
}

func TestDecodeReplyHeader(t *testing.T) {
	valid := func() (*ReplyHeader, []byte) {
		buf := alignedBuffer(HeaderSize)
		h, _ := ViewHeader[ReplyHeader](buf)
		h.Size = HeaderSize + 4
		h.Command = CommandReply
		h.Operation = OperationCreateStream
		return h, buf
	}
	tests := []struct {
		name   string
		mutate func(h *ReplyHeader)
		want   HeaderFault
	}{
		{name: "valid", mutate: func(*ReplyHeader) {}},
		{name: "valid reserved op 0", mutate: func(h *ReplyHeader) { h.Operation = OperationReserved }},
		{name: "valid denial", mutate: func(h *ReplyHeader) { h.Size = HeaderSize; h.Status = ErrUnauthorized }},
		{name: "eviction command", mutate: func(h *ReplyHeader) { h.Command = CommandEviction }, want: FaultCommandNotReply},
		{name: "request command", mutate: func(h *ReplyHeader) { h.Command = CommandRequest }, want: FaultCommandNotReply},
		{name: "short size", mutate: func(h *ReplyHeader) { h.Size = 10 }, want: FaultSizeBelowHeader},
		{name: "huge size", mutate: func(h *ReplyHeader) { h.Size = 1 << 31 }, want: FaultSizeAboveMax},
		{name: "op 71", mutate: func(h *ReplyHeader) { h.Operation = 71 }, want: FaultReplyOperationUnknown},
		{name: "op 163", mutate: func(h *ReplyHeader) { h.Operation = 163 }, want: FaultReplyOperationUnknown},
		{name: "status with body", mutate: func(h *ReplyHeader) { h.Status = ErrUnauthorized }, want: FaultStatusWithBody},
		{name: "send confirmation", mutate: func(h *ReplyHeader) { h.Operation = OperationSendMessages }},
		{name: "send denial", mutate: func(h *ReplyHeader) {
			h.Operation, h.Status, h.Size = OperationSendMessages, ErrResourceNotFound, HeaderSize
		}},
		{name: "send without confirmation", want: FaultSendReplyEmpty, mutate: func(h *ReplyHeader) {
			h.Operation, h.Size = OperationSendMessages, HeaderSize
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, buf := valid()
			tt.mutate(h)
			_, err := DecodeReplyHeader(buf, DefaultMessageSizeMax)
			if tt.want == FaultNone {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err != tt.want {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			// Whatever is wrong with a server's frame, a client surfaces a code.
			if tt.want.Status() == 0 && tt.want.Eviction() == 0 {
				t.Fatalf("%v carries no answer", tt.want)
			}
		})
	}
}

func TestReplyResultFramed(t *testing.T) {
	framed := map[Operation]bool{
		OperationCreateTopicWithAssignments: true, OperationCreatePartitionsWithAssignments: true,
		OperationRemoveConsumerGroupMember: true, OperationCompleteConsumerGroupRevocation: true,
		OperationTruncatePartition: true, OperationStoreConsumerOffset: true, OperationDeleteConsumerOffset: true,
	}
	for op := OperationCreateStream; op <= OperationLeaveConsumerGroup; op++ {
		framed[op] = op != OperationDeleteSegments
	}
	for op := range 256 {
		op := Operation(op)
		want := framed[op]
		if op == OperationRegister {
			if ReplyResultFramed(op, 0) || !ReplyResultFramed(op, 17) {
				t.Fatal("Register is framed exactly when its body is non-empty")
			}
			continue
		}
		if got := ReplyResultFramed(op, 12); got != want {
			t.Errorf("ReplyResultFramed(%v) = %v, want %v", op, got, want)
		}
	}
	h := ReplyHeader{CommonHeader: CommonHeader{Size: HeaderSize, Command: CommandReply},
		Operation: OperationCreateStream, Status: ErrUnauthorized}
	if h.ResultFramed() {
		t.Fatal("a denial has no result section")
	}
}

func TestReplyOperation(t *testing.T) {
	tests := []struct {
		request   Operation
		committed bool
		want      Operation
	}{
		{OperationNonReplicated, true, OperationNonReplicated},
		{OperationRegister, true, OperationRegister},
		{OperationLogout, true, OperationLogout},
		{OperationCreateTopic, true, OperationCreateTopicWithAssignments},
		{OperationCreatePartitions, true, OperationCreatePartitionsWithAssignments},
		{OperationDeleteSegments, true, OperationTruncatePartition},
		{OperationCreateStream, true, OperationCreateStream},
		{OperationSendMessages, true, OperationSendMessages},
		{OperationCreateTopic, false, OperationCreateTopic},
		{OperationDeleteSegments, false, OperationDeleteSegments},
	}
	for _, tt := range tests {
		if got := ReplyOperation(tt.request, tt.committed); got != tt.want {
			t.Errorf("ReplyOperation(%v, %v) = %v, want %v", tt.request, tt.committed, got, tt.want)
		}
		// Whatever the server puts on a reply, the SDKs must know it.
		if !ReplyOperation(tt.request, tt.committed).Known() {
			t.Errorf("reply operation for %v unknown to SDKs", tt.request)
		}
	}
}

func TestEviction(t *testing.T) {
	buf := alignedBuffer(HeaderSize)
	client := Uint128{Lo: 42}
	PutEviction(buf, client, EvictionIncompatibleProtocol, 0x2c00, 0x2800)
	h, err := DecodeEvictionHeader(buf)
	if err != nil {
		t.Fatal(err)
	}
	if h.Client != client || h.Reason != EvictionIncompatibleProtocol || h.Size != HeaderSize ||
		h.ServerProtocolVersion != 0x2c00 || h.ServerProtocolVersionMin != 0x2800 {
		t.Fatalf("eviction fields: %+v", *h)
	}
	if h.ErrorCode() != ErrIncompatibleProtocolVersion {
		t.Fatalf("ErrorCode = %v", h.ErrorCode())
	}
	h.ServerProtocolVersionMin = 0
	if h.ErrorCode() != ErrUnauthenticated {
		t.Fatal("window with min 0 must surface Unauthenticated")
	}
	h.ServerProtocolVersionMin = 0x3000
	if h.ErrorCode() != ErrUnauthenticated {
		t.Fatal("window with max < min must surface Unauthenticated")
	}

	PutEviction(buf, client, EvictionStaleClient, 0x2c00, 0x2800)
	if h.ServerProtocolVersion != 0 || h.ServerProtocolVersionMin != 0 {
		t.Fatal("window set on a reason other than IncompatibleProtocol")
	}
	h.Size = 257
	if _, err := DecodeEvictionHeader(buf); err != FaultSizeNotHeaderOnly {
		t.Fatalf("eviction with a body: %v", err)
	}
	h.Size = HeaderSize
	h.Command = CommandReply
	if _, err := DecodeEvictionHeader(buf); err != FaultCommandNotEviction {
		t.Fatalf("reply as eviction: %v", err)
	}
}

func TestEvictionReasonErrorCode(t *testing.T) {
	want := map[EvictionReason]ErrorCode{
		EvictionReserved: ErrInvalidCommand, EvictionNoSession: ErrUnauthenticated,
		EvictionClientReleaseTooLow: ErrInvalidCommand, EvictionClientReleaseTooHigh: ErrInvalidCommand,
		EvictionInvalidRequestOperation: ErrInvalidCommand, EvictionInvalidRequestBody: ErrInvalidCommand,
		EvictionInvalidRequestBodySize: ErrInvalidCommand, EvictionSessionTooLow: ErrUnauthenticated,
		EvictionSessionReleaseMismatch: ErrUnauthenticated, EvictionInvalidCredentials: ErrInvalidCredentials,
		EvictionInvalidToken: ErrInvalidPersonalAccessToken, EvictionUserInactive: ErrUnauthenticated,
		EvictionSessionError: ErrUnauthenticated, EvictionStaleClient: ErrStaleClient,
		EvictionIncompatibleProtocol: ErrIncompatibleProtocolVersion, EvictionMalformedLogin: ErrInvalidFormat,
		16: ErrInvalidCommand, 255: ErrInvalidCommand,
	}
	for reason, code := range want {
		if got := reason.ErrorCode(); got != code {
			t.Errorf("%v.ErrorCode() = %v, want %v", reason, got, code)
		}
	}
}

// TestClientDecodersDoNotAllocate covers the accepting and the refusing paths: a
// fault is a byte, so returning one as an error allocates nothing either.
func TestClientDecodersDoNotAllocate(t *testing.T) {
	_, request := validRequestHeader(OperationCreateStream)
	bad := alignedCopy(request)
	bad[62] = 1
	reply := alignedBuffer(HeaderSize)
	(&ReplyHeader{CommonHeader: CommonHeader{Size: HeaderSize, Command: CommandReply},
		Operation: OperationNonReplicated}).Put(reply)
	eviction := alignedBuffer(HeaderSize)
	PutEviction(eviction, Uint128{Lo: 1}, EvictionNoSession, 0, 0)
	var sink error
	allocs := testing.AllocsPerRun(100, func() {
		_, sink = DecodeRequestHeader(request, DefaultMessageSizeMax)
		_, sink = DecodeRequestHeader(bad, DefaultMessageSizeMax)
		_, sink = DecodeReplyHeader(reply, DefaultMessageSizeMax)
		_, sink = DecodeEvictionHeader(eviction)
	})
	if allocs != 0 {
		t.Fatalf("client decoders allocate %v times per run", allocs)
	}
	_ = sink
}

// TestRequestHeaderMutations flips random bytes of valid requests: the decoder must
// answer every variant with nil or a HeaderFault carrying an answer, never panic.
func TestRequestHeaderMutations(t *testing.T) {
	const seed = 0xbad
	rng := rand.New(rand.NewPCG(seed, seed))
	ops := []Operation{OperationRegister, OperationNonReplicated, OperationLogout,
		OperationCreateStream, OperationSendMessages}
	for i := range 5000 {
		_, buf := validRequestHeader(ops[i%len(ops)])
		for range 1 + rng.IntN(4) {
			buf[rng.IntN(HeaderSize)] ^= byte(1 + rng.IntN(255))
		}
		_, err := DecodeRequestHeader(buf, DefaultMessageSizeMax)
		if err == nil {
			continue
		}
		fault, ok := err.(HeaderFault)
		if !ok {
			t.Fatalf("seed=%d case %d: error %T", seed, i, err)
		}
		if fault.Eviction() == 0 && fault.Status() == 0 {
			t.Fatalf("seed=%d case %d: %v gives a server no answer", seed, i, fault)
		}
	}
}

func TestReplyTo(t *testing.T) {
	req, _ := validRequestHeader(OperationCreateTopic)
	req.Cluster, req.RequestChecksum, req.Timestamp = Uint128{Lo: 5}, Uint128{Lo: 6}, 7
	reply := ReplyTo(req, 0, 4+60, true)
	buf := alignedBuffer(HeaderSize)
	reply.Put(buf)
	got, err := DecodeReplyHeader(buf, DefaultMessageSizeMax)
	if err != nil {
		t.Fatal(err)
	}
	if got.Request != req.Request || got.Client != req.Client || got.Timestamp != 7 ||
		got.RequestChecksum != req.RequestChecksum || got.Cluster != req.Cluster ||
		got.Operation != OperationCreateTopicWithAssignments || got.BodySizeBytes() != 64 || !got.ResultFramed() {
		t.Fatalf("reply %+v", *got)
	}
	denied := ReplyTo(req, ErrUnauthorized, 0, true)
	if denied.Operation != OperationCreateTopic || denied.Size != HeaderSize || denied.ResultFramed() {
		t.Fatalf("denial %+v", denied)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a denial with a body did not panic")
		}
	}()
	ReplyTo(req, ErrUnauthorized, 1, false)
}

func TestFrameBuildersDoNotAllocate(t *testing.T) {
	req, _ := validRequestHeader(OperationCreateStream)
	buf := alignedBuffer(HeaderSize)
	nonce, mac := [32]byte{1}, [32]byte{2}
	allocs := testing.AllocsPerRun(100, func() {
		PutEviction(buf, Uint128{Lo: 1}, EvictionStaleClient, 0, 0)
		reply := ReplyTo(req, 0, 10, true)
		reply.Put(buf)
		PutReplicaHello(buf, Uint128{Lo: 3}, 1, &nonce)
		PutReplicaChallenge(buf, Uint128{Lo: 3}, 2, HandshakeOk, &nonce, &mac)
		PutReplicaFinish(buf, Uint128{Lo: 3}, 1, &mac)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations", allocs)
	}
}

// The answers a server gives, after its session check, to read codes the header
// validation lets through.
func TestNonReplicatedCodeAnswers(t *testing.T) {
	for _, tt := range []struct {
		code   CommandCode
		want   HeaderFault
		status ErrorCode
	}{
		{0, FaultUnknownCommandCode, ErrInvalidCommand},
		{607, FaultUnknownCommandCode, ErrInvalidCommand},
		{CodeSendMessages, FaultReplicatedCodeAsRead, ErrFeatureUnavailable},
		{CodeLoginRegister, FaultReplicatedCodeAsRead, ErrFeatureUnavailable},
		{CodeLoginUser, FaultLegacyLoginCode, 0},
		{CodeGetStreams, FaultNone, 0},
		{CodePing, FaultNone, 0},
	} {
		fault := NonReplicatedCodeCheck(tt.code)
		if fault != tt.want || fault.Status() != tt.status {
			t.Errorf("code %d: %v (status %v), want %v (status %v)", tt.code, fault, fault.Status(), tt.want, tt.status)
		}
	}
}
