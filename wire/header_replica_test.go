package wire

import (
	"math/rand/v2"
	"testing"
	"unsafe"
)

func headerAddr[T any](p *T) uintptr { return uintptr(unsafe.Pointer(p)) }

// replicaFrame returns an aligned header-only frame of command with every field
// valid for it, unsealed.
func replicaFrame(command Command) []byte {
	buf := alignedBuffer(HeaderSize)
	g, _ := ViewHeader[GenericHeader](buf)
	g.Size = HeaderSize
	g.Command = command
	g.Cluster = ClusterID("test-cluster")
	g.Replica = 1
	switch command {
	case CommandPrepare, CommandRepairPrepare:
		p := g.asPrepare()
		p.Operation = OperationCreateStream
		p.Op, p.Commit, p.Group = 5, 4, MetadataGroup
	case CommandPrepareOk:
		g.asPrepareOk().Operation = OperationSendMessages
	case CommandRequestPrepares:
		p := g.asRequestPrepares()
		p.FromOp, p.ToOp = 3, 9
	case CommandRequestStateChunk:
		g.asRequestStateChunk().Len = 4096
	case CommandForwardRegister:
		f := g.asForwardRegister()
		f.Client, f.Nonce, f.UserID = Uint128{Lo: 1}, Uint128{Lo: 2}, 3
	case CommandForwardRegisterResult:
		f := g.asForwardRegisterResult()
		f.Client, f.Nonce, f.Epoch = Uint128{Lo: 1}, Uint128{Lo: 2}, 3
	case CommandForwardLogout:
		f := g.asForwardLogout()
		f.Client, f.Nonce, f.Session, f.Request = Uint128{Lo: 1}, Uint128{Lo: 2}, 3, 4
	case CommandForwardLogoutResult:
		f := g.asForwardLogoutResult()
		f.Client, f.Nonce, f.Commit = Uint128{Lo: 1}, Uint128{Lo: 2}, 3
	}
	return buf
}

func sealIfSealed(buf []byte) {
	if Command(buf[CommandFieldOffset]).FrameSealed() {
		SealFrame((*[HeaderSize]byte)(buf))
	}
}

func replicaCommands() []Command {
	var out []Command
	for c := range CommandMax + 1 {
		if c.ReplicaPlane() {
			out = append(out, c)
		}
	}
	return out
}

func TestCommandPlanes(t *testing.T) {
	notReplica := map[Command]bool{0: true, 1: true, 2: true, 3: true, 4: true,
		CommandRequest: true, CommandReply: true, CommandEviction: true}
	unsealed := map[Command]bool{CommandPrepare: true, CommandRepairPrepare: true,
		CommandReplicaHello: true, CommandReplicaChallenge: true, CommandReplicaFinish: true}
	for c := range 256 {
		c := Command(c)
		if c > CommandMax {
			if c.ReplicaPlane() || c.FrameSealed() || c.Known() {
				t.Errorf("%v accepted", c)
			}
			continue
		}
		if c.ReplicaPlane() == notReplica[c] {
			t.Errorf("%v.ReplicaPlane() = %v", c, c.ReplicaPlane())
		}
		if want := c.ReplicaPlane() && !unsealed[c]; c.FrameSealed() != want {
			t.Errorf("%v.FrameSealed() = %v", c, c.FrameSealed())
		}
	}
}

// TestDecodeReplicaHeaderAcceptsEveryCommand builds a minimal valid frame of every
// replica command, seals it where the command is sealed, and decodes it.
func TestDecodeReplicaHeaderAcceptsEveryCommand(t *testing.T) {
	for _, c := range replicaCommands() {
		buf := replicaFrame(c)
		sealIfSealed(buf)
		g, err := DecodeReplicaHeader(buf, DefaultMessageSizeMax)
		if err != nil {
			t.Errorf("%v: %v", c, err)
			continue
		}
		if g.Command != c {
			t.Errorf("%v decoded as %v", c, g.Command)
		}
	}
}

func TestDecodeReplicaHeaderFaults(t *testing.T) {
	tests := []struct {
		name    string
		command Command
		mutate  func(g *GenericHeader, b []byte)
		want    HeaderFault
		noSeal  bool
	}{
		{name: "request on replica plane", command: CommandRequest, want: FaultCommandNotReplica,
			mutate: func(*GenericHeader, []byte) {}},
		{name: "reply on replica plane", command: CommandReply, want: FaultCommandNotReplica,
			mutate: func(*GenericHeader, []byte) {}},
		{name: "eviction on replica plane", command: CommandEviction, want: FaultCommandNotReplica,
			mutate: func(*GenericHeader, []byte) {}},
		{name: "ping", command: CommandPing, want: FaultCommandNotReplica, mutate: func(*GenericHeader, []byte) {}},
		{name: "reserved", command: CommandReserved, want: FaultCommandNotReplica, mutate: func(*GenericHeader, []byte) {}},
		{name: "command 30", command: 30, want: FaultCommandUnknown, mutate: func(*GenericHeader, []byte) {}},
		{name: "size 255", command: CommandCommit, want: FaultSizeBelowHeader,
			mutate: func(g *GenericHeader, _ []byte) { g.Size = 255 }},
		{name: "size above max", command: CommandStateChunk, want: FaultSizeAboveMax,
			mutate: func(g *GenericHeader, _ []byte) { g.Size = DefaultMessageSizeMax + 1 }},
		{name: "unsealed commit", command: CommandCommit, want: FaultFrameChecksum, noSeal: true,
			mutate: func(*GenericHeader, []byte) {}},
		{name: "release", command: CommandStartViewChange, want: FaultReleaseNonZero,
			mutate: func(g *GenericHeader, _ []byte) { g.Release = 1 }},
		{name: "prepare release", command: CommandPrepare, want: FaultReleaseNonZero,
			mutate: func(g *GenericHeader, _ []byte) { g.Release = 1 }},
		{name: "prepare reserved frame", command: CommandPrepare, want: FaultReservedNonZero,
			mutate: func(_ *GenericHeader, b []byte) { b[100] = 1 }},
		{name: "prepare reserved tail", command: CommandRepairPrepare, want: FaultReservedNonZero,
			mutate: func(_ *GenericHeader, b []byte) { b[255] = 1 }},
		{name: "prepare padding", command: CommandPrepare, want: FaultPaddingNonZero,
			mutate: func(_ *GenericHeader, b []byte) { b[215] = 1 }},
		{name: "prepare operation unknown", command: CommandPrepare, want: FaultOperationUnknown,
			mutate: func(g *GenericHeader, _ []byte) { g.asPrepare().Operation = 99 }},
		{name: "prepare ok operation unknown", command: CommandPrepareOk, want: FaultOperationUnknown,
			mutate: func(g *GenericHeader, _ []byte) { g.asPrepareOk().Operation = 170 }},
		{name: "commit with body", command: CommandCommit, want: FaultSizeNotHeaderOnly,
			mutate: func(g *GenericHeader, _ []byte) { g.Size = 512 }},
		{name: "hello with body", command: CommandReplicaHello, want: FaultSizeNotHeaderOnly,
			mutate: func(g *GenericHeader, _ []byte) { g.Size = 257 }},
		{name: "dvc log view above view", command: CommandDoViewChange, want: FaultLogViewAboveView,
			mutate: func(g *GenericHeader, _ []byte) { g.View = 3; g.asDoViewChange().LogView = 4 }},
		{name: "dvc commit above op", command: CommandDoViewChange, want: FaultCommitAboveOp,
			mutate: func(g *GenericHeader, _ []byte) { g.asDoViewChange().Commit = 1 }},
		{name: "dvc ragged suffix", command: CommandDoViewChange, want: FaultSuffixSize,
			mutate: func(g *GenericHeader, _ []byte) { g.Size = 256 + 100 }},
		{name: "dvc suffix too long", command: CommandDoViewChange, want: FaultSuffixSize,
			mutate: func(g *GenericHeader, _ []byte) { g.Size = 256 * 130 }},
		{name: "dvc nack beyond suffix", command: CommandDoViewChange, want: FaultBitsetBeyondSuffix,
			mutate: func(g *GenericHeader, _ []byte) {
				g.Size = 256 * 3
				g.asDoViewChange().NackBitset = Uint128{Lo: 1 << 2}
			}},
		{name: "dvc present beyond suffix high half", command: CommandDoViewChange, want: FaultBitsetBeyondSuffix,
			mutate: func(g *GenericHeader, _ []byte) {
				g.Size = 256 * 71
				g.asDoViewChange().PresentBitset = Uint128{Lo: ^uint64(0), Hi: 1 << 6}
			}},
		{name: "start view commit above op", command: CommandStartView, want: FaultCommitAboveOp,
			mutate: func(g *GenericHeader, _ []byte) { g.asStartView().Commit = 1 }},
		{name: "start view ragged suffix", command: CommandStartView, want: FaultSuffixSize,
			mutate: func(g *GenericHeader, _ []byte) { g.Size = 300 }},
		{name: "repair from 0", command: CommandRequestPrepares, want: FaultRepairRangeInvalid,
			mutate: func(g *GenericHeader, _ []byte) { g.asRequestPrepares().FromOp = 0 }},
		{name: "repair inverted", command: CommandRequestPrepares, want: FaultRepairRangeInvalid,
			mutate: func(g *GenericHeader, _ []byte) { g.asRequestPrepares().FromOp = 10 }},
		{name: "state transfer request with body", command: CommandRequestStateTransfer, want: FaultSizeNotHeaderOnly,
			mutate: func(g *GenericHeader, _ []byte) { g.Size = 512 }},
		{name: "target flag 2", command: CommandStateTransferTarget, want: FaultFlagInvalid,
			mutate: func(g *GenericHeader, _ []byte) { g.asStateTransferTarget().Available = 2 }},
		{name: "target transient 2", command: CommandStateTransferTarget, want: FaultFlagInvalid,
			mutate: func(g *GenericHeader, _ []byte) { g.asStateTransferTarget().UnavailableTransient = 2 }},
		{name: "target available and transient", command: CommandStateTransferTarget, want: FaultAvailableAndTransient,
			mutate: func(g *GenericHeader, _ []byte) {
				g.asStateTransferTarget().Available = 1
				g.asStateTransferTarget().UnavailableTransient = 1
			}},
		{name: "target refusal with body", command: CommandStateTransferTarget, want: FaultSizeNotHeaderOnly,
			mutate: func(g *GenericHeader, _ []byte) { g.Size = 300 }},
		{name: "chunk request len 0", command: CommandRequestStateChunk, want: FaultChunkLenZero,
			mutate: func(g *GenericHeader, _ []byte) { g.asRequestStateChunk().Len = 0 }},
		{name: "chunk request with body", command: CommandRequestStateChunk, want: FaultSizeNotHeaderOnly,
			mutate: func(g *GenericHeader, _ []byte) { g.Size = 512 }},
		{name: "forward register client 0", command: CommandForwardRegister, want: FaultClientZero,
			mutate: func(g *GenericHeader, _ []byte) { g.asForwardRegister().Client = Uint128{} }},
		{name: "forward logout client 0 with a session", command: CommandForwardLogout, want: FaultClientZero,
			mutate: func(g *GenericHeader, _ []byte) { g.asForwardLogout().Client = Uint128{} }},
		{name: "forward register nonce 0", command: CommandForwardRegister, want: FaultNonceZero,
			mutate: func(g *GenericHeader, _ []byte) { g.asForwardRegister().Nonce = Uint128{} }},
		{name: "forward register reserved", command: CommandForwardRegister, want: FaultReservedNonZero,
			mutate: func(_ *GenericHeader, b []byte) { b[200] = 1 }},
		{name: "forward register reserved frame", command: CommandForwardRegister, want: FaultReservedNonZero,
			mutate: func(_ *GenericHeader, b []byte) { b[62] = 1 }},
		{name: "forward register with body", command: CommandForwardRegister, want: FaultSizeNotHeaderOnly,
			mutate: func(g *GenericHeader, _ []byte) { g.Size = 512 }},
		{name: "forward register outcome 7", command: CommandForwardRegisterResult, want: FaultOutcomeUnknown,
			mutate: func(g *GenericHeader, _ []byte) { g.asForwardRegisterResult().Outcome = 7 }},
		{name: "forward register bind on failure", command: CommandForwardRegisterResult, want: FaultResultOnFailure,
			mutate: func(g *GenericHeader, _ []byte) { g.asForwardRegisterResult().Outcome = ForwardRegisterNotPrimary }},
		{name: "forward register watermark on failure", command: CommandForwardRegisterResult, want: FaultResultOnFailure,
			mutate: func(g *GenericHeader, _ []byte) {
				r := g.asForwardRegisterResult()
				r.Outcome, r.Epoch, r.Watermark = ForwardRegisterCanceled, 0, 1
			}},
		{name: "forward logout session 0", command: CommandForwardLogout, want: FaultSessionZero,
			mutate: func(g *GenericHeader, _ []byte) { g.asForwardLogout().Session = 0 }},
		{name: "forward logout result outcome 5", command: CommandForwardLogoutResult, want: FaultOutcomeUnknown,
			mutate: func(g *GenericHeader, _ []byte) { g.asForwardLogoutResult().Outcome = 5 }},
		{name: "forward logout result commit on failure", command: CommandForwardLogoutResult, want: FaultResultOnFailure,
			mutate: func(g *GenericHeader, _ []byte) { g.asForwardLogoutResult().Outcome = ForwardLogoutInProgress }},
		{name: "forward logout result nonce 0", command: CommandForwardLogoutResult, want: FaultNonceZero,
			mutate: func(g *GenericHeader, _ []byte) { g.asForwardLogoutResult().Nonce = Uint128{} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			buf := replicaFrame(tt.command)
			g, _ := ViewHeader[GenericHeader](buf)
			tt.mutate(g, buf)
			if !tt.noSeal {
				sealIfSealed(buf)
			}
			got, err := DecodeReplicaHeader(buf, DefaultMessageSizeMax)
			if err != tt.want || got != nil {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestFrameSealCoversEveryByte flips each bit of bytes 16..256 of a sealed frame of
// every sealed command: each flip must be caught, checksum_body included.
func TestFrameSealCoversEveryByte(t *testing.T) {
	for _, c := range replicaCommands() {
		if !c.FrameSealed() {
			continue
		}
		buf := replicaFrame(c)
		sealIfSealed(buf)
		for off := 16; off < HeaderSize; off++ {
			for bit := range 8 {
				buf[off] ^= 1 << bit
				if FrameSealValid((*[HeaderSize]byte)(buf)) {
					t.Fatalf("%v: flip of byte %d bit %d not caught by the seal", c, off, bit)
				}
				// A flipped command byte can name an unsealed command (PrepareOk 7
				// becomes Prepare 6): the frame is then typed, and judged, as that
				// command, which the reference does too.
				_, err := DecodeReplicaHeader(buf, DefaultMessageSizeMax)
				if err == nil && off != CommandFieldOffset {
					t.Fatalf("%v: flip of byte %d bit %d decoded", c, off, bit)
				}
				buf[off] ^= 1 << bit
			}
		}
		if _, err := DecodeReplicaHeader(buf, DefaultMessageSizeMax); err != nil {
			t.Fatalf("%v: restored frame refused: %v", c, err)
		}
	}
}

func TestGenericAccessorsPanicOnWrongCommand(t *testing.T) {
	buf := replicaFrame(CommandCommit)
	g, _ := ViewHeader[GenericHeader](buf)
	if g.Commit() == nil {
		t.Fatal("nil view")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("viewing a Commit as a Prepare did not panic")
		}
	}()
	g.Prepare()
}

func TestGenericAccessorsAlias(t *testing.T) {
	for _, c := range replicaCommands() {
		buf := replicaFrame(c)
		g, _ := ViewHeader[GenericHeader](buf)
		var p uintptr
		switch c {
		case CommandPrepare, CommandRepairPrepare:
			p = headerAddr(g.Prepare())
		case CommandPrepareOk:
			p = headerAddr(g.PrepareOk())
		case CommandCommit:
			p = headerAddr(g.Commit())
		case CommandStartViewChange:
			p = headerAddr(g.StartViewChange())
		case CommandDoViewChange:
			p = headerAddr(g.DoViewChange())
		case CommandStartView:
			p = headerAddr(g.StartView())
		case CommandRequestStartView:
			p = headerAddr(g.RequestStartView())
		case CommandRequestPrepares:
			p = headerAddr(g.RequestPrepares())
		case CommandRepairDone, CommandRangeEvicted:
			p = headerAddr(g.RepairRange())
		case CommandRequestStateTransfer:
			p = headerAddr(g.RequestStateTransfer())
		case CommandStateTransferTarget:
			p = headerAddr(g.StateTransferTarget())
		case CommandRequestStateChunk:
			p = headerAddr(g.RequestStateChunk())
		case CommandStateChunk:
			p = headerAddr(g.StateChunk())
		case CommandForwardRegister:
			p = headerAddr(g.ForwardRegister())
		case CommandForwardRegisterResult:
			p = headerAddr(g.ForwardRegisterResult())
		case CommandForwardLogout:
			p = headerAddr(g.ForwardLogout())
		case CommandForwardLogoutResult:
			p = headerAddr(g.ForwardLogoutResult())
		case CommandReplicaHello, CommandReplicaChallenge, CommandReplicaFinish:
			p = headerAddr(g.Handshake())
		default:
			t.Fatalf("%v has no accessor", c)
		}
		if p != headerAddr(g) {
			t.Fatalf("%v accessor does not view the frame in place", c)
		}
	}
}

func TestSuffixLen(t *testing.T) {
	d := DoViewChangeHeader{CommonHeader: CommonHeader{Size: HeaderSize * 4}}
	if d.SuffixLen() != 3 {
		t.Fatalf("DoViewChange SuffixLen = %d", d.SuffixLen())
	}
	s := StartViewHeader{CommonHeader: CommonHeader{Size: HeaderSize * (1 + DoViewChangeSuffixMax)}}
	if s.SuffixLen() != DoViewChangeSuffixMax || s.validate() != FaultNone {
		t.Fatalf("StartView with a full suffix: %d %v", s.SuffixLen(), s.validate())
	}
	for n := range DoViewChangeSuffixMax {
		mask := bitsFrom(n)
		for bit := range 128 {
			set := bit < 64 && mask.Lo&(1<<bit) != 0 || bit >= 64 && mask.Hi&(1<<(bit-64)) != 0
			if set != (bit >= n) {
				t.Fatalf("bitsFrom(%d) bit %d = %v", n, bit, set)
			}
		}
	}
}

func TestReplicaDecoderDoesNotAllocate(t *testing.T) {
	dvc := replicaFrame(CommandDoViewChange)
	sealIfSealed(dvc)
	prepare := replicaFrame(CommandPrepare)
	corrupt := replicaFrame(CommandCommit)
	var sink error
	allocs := testing.AllocsPerRun(100, func() {
		_, sink = DecodeReplicaHeader(dvc, DefaultMessageSizeMax)
		_, sink = DecodeReplicaHeader(prepare, DefaultMessageSizeMax)
		_, sink = DecodeReplicaHeader(corrupt, DefaultMessageSizeMax)
	})
	if allocs != 0 {
		t.Fatalf("DecodeReplicaHeader allocates %v times per run", allocs)
	}
	_ = sink
}

// TestReplicaHeaderMutations: random corruption of valid frames, sealed afterwards
// half of the time so the field rules behind the seal are exercised too. Never a
// panic, and a frame that decodes passes its own rules again.
func TestReplicaHeaderMutations(t *testing.T) {
	const seed = 0x5eed
	rng := rand.New(rand.NewPCG(seed, seed))
	commands := replicaCommands()
	for i := range 20000 {
		buf := replicaFrame(commands[i%len(commands)])
		for range 1 + rng.IntN(3) {
			buf[rng.IntN(HeaderSize)] ^= byte(1 + rng.IntN(255))
		}
		if rng.IntN(2) == 0 {
			sealIfSealed(buf)
		}
		g, err := DecodeReplicaHeader(buf, DefaultMessageSizeMax)
		if err != nil {
			if _, ok := err.(HeaderFault); !ok {
				t.Fatalf("seed=%d case %d: error %T", seed, i, err)
			}
			continue
		}
		if g.validateReplica(DefaultMessageSizeMax) != FaultNone {
			t.Fatalf("seed=%d case %d: decoded frame fails its own rules", seed, i)
		}
		if g.Command.FrameSealed() && !FrameSealValid(g.Bytes()) {
			t.Fatalf("seed=%d case %d: sealed command decoded without a valid seal", seed, i)
		}
	}
}

func random128(rng *rand.Rand) Uint128  { return Uint128{Lo: rng.Uint64(), Hi: rng.Uint64()} }
func nonZero128(rng *rand.Rand) Uint128 { return Uint128{Lo: rng.Uint64() | 1, Hi: rng.Uint64()} }
func lowBits(n int) Uint128 {
	if n == 0 {
		return Uint128{}
	}
	return Uint128{Lo: ^bitsFrom(n).Lo, Hi: ^bitsFrom(n).Hi}
}

// randomizeReplica fills every field of a replica header that the rules leave free
// with random values, and the constrained ones with random values that obey them.
func randomizeReplica(rng *rand.Rand, g *GenericHeader) {
	g.ChecksumBody = random128(rng)
	g.Cluster = random128(rng)
	g.View = rng.Uint32()
	g.Replica = uint8(rng.Uint32())
	var known []Operation
	for op := range 256 {
		if Operation(op).Known() {
			known = append(known, Operation(op))
		}
	}
	switch g.Command {
	case CommandPrepare, CommandRepairPrepare:
		p := g.asPrepare()
		p.Size = HeaderSize + rng.Uint32N(1<<20)
		p.Client, p.Parent, p.RequestChecksum = random128(rng), random128(rng), random128(rng)
		p.Op, p.Commit, p.Timestamp, p.Request = rng.Uint64(), rng.Uint64(), rng.Uint64(), rng.Uint64()
		p.Operation = known[rng.IntN(len(known))]
		p.Group, p.UserID = rng.Uint64(), rng.Uint32()
		p.SetIdentity()
	case CommandPrepareOk:
		p := g.asPrepareOk()
		p.Parent, p.PrepareChecksum = random128(rng), random128(rng)
		p.Op, p.Commit, p.Timestamp, p.Request = rng.Uint64(), rng.Uint64(), rng.Uint64(), rng.Uint64()
		p.Operation = known[rng.IntN(len(known))]
		p.Group = rng.Uint64()
	case CommandCommit:
		c := g.Commit()
		c.CommitChecksum = random128(rng)
		c.TimestampMonotonic, c.Commit, c.CheckpointOp, c.Group = rng.Uint64(), rng.Uint64(), rng.Uint64(), rng.Uint64()
	case CommandStartViewChange:
		g.StartViewChange().Group = rng.Uint64()
	case CommandDoViewChange:
		d := g.asDoViewChange()
		n := rng.IntN(DoViewChangeSuffixMax + 1)
		d.Size = uint32(HeaderSize * (n + 1))
		d.Op = rng.Uint64()
		d.Commit = rng.Uint64N(d.Op + 1)
		d.LogView = rng.Uint32N(d.View + 1)
		d.Group = rng.Uint64()
		mask := lowBits(n)
		nack, present := random128(rng), random128(rng)
		d.NackBitset = Uint128{Lo: nack.Lo & mask.Lo, Hi: nack.Hi & mask.Hi}
		d.PresentBitset = Uint128{Lo: present.Lo & mask.Lo, Hi: present.Hi & mask.Hi}
	case CommandStartView:
		s := g.asStartView()
		s.Size = uint32(HeaderSize * (1 + rng.IntN(DoViewChangeSuffixMax+1)))
		s.Op = rng.Uint64()
		s.Commit = rng.Uint64N(s.Op + 1)
		s.Group, s.Incarnation = rng.Uint64(), random128(rng)
	case CommandRequestStartView:
		r := g.RequestStartView()
		r.Group, r.Incarnation = rng.Uint64(), random128(rng)
	case CommandRequestPrepares:
		r := g.asRequestPrepares()
		r.Nonce, r.Group = random128(rng), rng.Uint64()
		r.FromOp = 1 + rng.Uint64N(1<<40)
		r.ToOp = r.FromOp + rng.Uint64N(1<<20)
	case CommandRepairDone, CommandRangeEvicted:
		r := g.RepairRange()
		r.Nonce, r.Op, r.Group = random128(rng), rng.Uint64(), rng.Uint64()
	case CommandRequestStateTransfer:
		r := g.RequestStateTransfer()
		r.Nonce, r.Group = random128(rng), rng.Uint64()
	case CommandStateTransferTarget:
		s := g.asStateTransferTarget()
		s.Nonce, s.CommitOp, s.Group, s.CommitMax = random128(rng), rng.Uint64(), rng.Uint64(), rng.Uint64()
		if rng.IntN(2) == 0 {
			s.CommitChecksum = random128(rng) // zero from a node before the field
		}
		s.Available = uint8(rng.IntN(2))
		if s.Available == 1 {
			s.Size = HeaderSize + rng.Uint32N(1<<16)
		} else {
			s.UnavailableTransient = uint8(rng.IntN(2))
		}
	case CommandRequestStateChunk:
		r := g.asRequestStateChunk()
		r.Nonce, r.Offset, r.Group = random128(rng), rng.Uint64(), rng.Uint64()
		r.Len, r.Artifact = rng.Uint32()|1, rng.Uint32()
	case CommandStateChunk:
		s := g.StateChunk()
		s.Size = HeaderSize + rng.Uint32N(1<<20)
		s.Nonce, s.Offset, s.Group, s.Artifact = random128(rng), rng.Uint64(), rng.Uint64(), rng.Uint32()
	case CommandForwardRegister:
		f := g.asForwardRegister()
		f.Client, f.Nonce, f.UserID = nonZero128(rng), nonZero128(rng), rng.Uint32()
	case CommandForwardRegisterResult:
		f := g.asForwardRegisterResult()
		f.Client, f.Nonce = nonZero128(rng), nonZero128(rng)
		f.Outcome = ForwardRegisterOutcome(rng.IntN(int(ForwardRegisterOutcomeMax) + 1))
		f.Epoch, f.Watermark = 0, 0
		if f.Outcome == ForwardRegisterOk {
			f.Epoch, f.Watermark = rng.Uint64(), rng.Uint64()
		}
	case CommandForwardLogout:
		f := g.asForwardLogout()
		f.Client, f.Nonce, f.Session, f.Request = nonZero128(rng), nonZero128(rng), rng.Uint64()|1, rng.Uint64()|1
	case CommandForwardLogoutResult:
		f := g.asForwardLogoutResult()
		f.Client, f.Nonce = nonZero128(rng), nonZero128(rng)
		f.Outcome = ForwardLogoutOutcome(rng.IntN(int(ForwardLogoutOutcomeMax) + 1))
		f.Commit = 0
		if f.Outcome == ForwardLogoutOk {
			f.Commit = rng.Uint64()
		}
	case CommandReplicaHello, CommandReplicaChallenge, CommandReplicaFinish:
		h := g.Handshake()
		for i := range h.Nonce {
			h.Nonce[i], h.MAC[i] = byte(rng.Uint32()), byte(rng.Uint32())
		}
		h.Status = HandshakeStatus(rng.IntN(6))
	}
}

// TestReplicaHeaderRoundTrip: for random valid headers of every replica command,
// putting the header into a fresh buffer and decoding it gives back the same header.
func TestReplicaHeaderRoundTrip(t *testing.T) {
	const seed = 0x600d
	rng := rand.New(rand.NewPCG(seed, seed))
	commands := replicaCommands()
	out := alignedBuffer(HeaderSize)
	for i := range 5000 {
		buf := replicaFrame(commands[i%len(commands)])
		g, _ := ViewHeader[GenericHeader](buf)
		randomizeReplica(rng, g)
		sealIfSealed(buf)
		want := *g
		PutHeader(out, &want)
		got, err := DecodeReplicaHeader(out, DefaultMessageSizeMax)
		if err != nil {
			t.Fatalf("seed=%d case %d: %v refused: %v", seed, i, want.Command, err)
		}
		if *got != want {
			t.Fatalf("seed=%d case %d: %v round trip differs", seed, i, want.Command)
		}
		if (got.Command == CommandPrepare || got.Command == CommandRepairPrepare) &&
			got.Prepare().Identity() != got.Checksum {
			t.Fatalf("seed=%d case %d: identity lost in the round trip", seed, i)
		}
	}
}

func TestSuffixBody(t *testing.T) {
	frame := alignedBuffer(HeaderSize * 3)
	dvc, _ := ViewHeader[DoViewChangeHeader](frame)
	dvc.Size, dvc.Command, dvc.Op = HeaderSize*3, CommandDoViewChange, 9
	body := frame[HeaderSize:]
	for i := range 2 {
		p, err := SuffixPrepare(body, i)
		if err != nil {
			t.Fatal(err)
		}
		p.Command, p.Op, p.Operation = CommandPrepare, uint64(9-i), OperationCreateStream
		p.SetIdentity()
	}
	dvc.SealBody(body)
	SealFrame(HeaderBytes(dvc))
	g, err := DecodeReplicaHeader(frame, DefaultMessageSizeMax)
	if err != nil {
		t.Fatal(err)
	}
	if g.DoViewChange().SuffixLen() != 2 || !g.BodySealValid(body) {
		t.Fatal("suffix")
	}
	second, _ := SuffixPrepare(body, 1)
	if second.Op != 8 || !second.IdentityValid() {
		t.Fatalf("entry 1: op %d", second.Op)
	}
	body[300] ^= 1
	if g.BodySealValid(body) {
		t.Fatal("body seal missed a flipped byte")
	}
	if _, err := SuffixPrepare(body, 2); err != FaultShortHeader {
		t.Fatalf("entry past the body: %v", err)
	}
	if _, err := SuffixPrepare(body, -1); err != FaultShortHeader {
		t.Fatalf("negative entry: %v", err)
	}
	if _, err := SuffixPrepare(body[1:], 0); err != FaultMisaligned {
		t.Fatalf("misaligned body: %v", err)
	}
}

// A ForwardLogout of client 0 with no session and no request is a read barrier
// (vsr.Core.ForwardReadBarrier), and its result names client 0 too.
func TestForwardLogoutOfClientZeroIsABarrier(t *testing.T) {
	for _, c := range []Command{CommandForwardLogout, CommandForwardLogoutResult} {
		buf := replicaFrame(c)
		g, _ := ViewHeader[GenericHeader](buf)
		if c == CommandForwardLogout {
			f := g.asForwardLogout()
			f.Client, f.Session, f.Request = Uint128{}, 0, 0
		} else {
			g.asForwardLogoutResult().Client = Uint128{}
		}
		sealIfSealed(buf)
		if _, err := DecodeReplicaHeader(buf, DefaultMessageSizeMax); err != nil {
			t.Fatalf("%v of client 0: %v", c, err)
		}
	}
}
