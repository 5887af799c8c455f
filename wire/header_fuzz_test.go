package wire

import (
	"bytes"
	"slices"
	"testing"
)

// The fuzz targets feed untrusted bytes to every decoder that reads from a socket.
// Their seeds are the golden vectors, so plain `go test` runs them as regression
// cases; `go test -fuzz FuzzX -fuzztime 60s` explores from there.

func addHeaderSeeds(f *testing.F) {
	for _, name := range goldenFiles(f, "headers") {
		f.Add(readGolden(f, name))
	}
	f.Add([]byte{})
	f.Add(make([]byte, 61))
	f.Add(make([]byte, HeaderSize))
}

func FuzzDecodeRequestHeader(f *testing.F) {
	addHeaderSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		buf := alignedCopy(data)
		h, err := DecodeRequestHeader(buf, DefaultMessageSizeMax)
		if err != nil {
			fault, ok := err.(HeaderFault)
			if !ok {
				t.Fatalf("error %T", err)
			}
			if len(buf) >= HeaderSize && fault.Eviction() == 0 && fault.Status() == 0 {
				t.Fatalf("%v gives a server no answer", fault)
			}
			return
		}
		if len(buf) < HeaderSize || h.Validate(DefaultMessageSizeMax) != nil {
			t.Fatal("accepted header fails its own rules")
		}
		if h.Size < HeaderSize || h.Size > DefaultMessageSizeMax || !h.Operation.ClientAllowed() || h.Client.IsZero() {
			t.Fatalf("accepted an invalid request: %+v", *h)
		}
		var again [HeaderSize]byte
		h.Put(again[:])
		if !bytes.Equal(again[:], buf[:HeaderSize]) {
			t.Fatal("Put does not reproduce the decoded bytes")
		}
	})
}

func FuzzDecodeReplyHeader(f *testing.F) {
	addHeaderSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		buf := alignedCopy(data)
		command, _ := PeekCommand(buf)
		if command == CommandEviction {
			h, err := DecodeEvictionHeader(buf)
			if err != nil {
				if fault, ok := err.(HeaderFault); !ok || (len(buf) >= HeaderSize && fault.Status() == 0) {
					t.Fatalf("eviction refusal %v surfaces no code", err)
				}
				return
			}
			if h.Size != HeaderSize || h.ErrorCode() == 0 {
				t.Fatalf("eviction %+v", *h)
			}
			return
		}
		h, err := DecodeReplyHeader(buf, DefaultMessageSizeMax)
		if err != nil {
			if fault, ok := err.(HeaderFault); !ok || (len(buf) >= HeaderSize && fault.Status() == 0 && fault.Eviction() == 0) {
				t.Fatalf("reply refusal %v surfaces no code", err)
			}
			return
		}
		if h.Command != CommandReply || !h.Operation.Known() || (h.Status != 0 && h.BodySizeBytes() != 0) {
			t.Fatalf("accepted an invalid reply: %+v", *h)
		}
		_ = h.ResultFramed()
	})
}

// viewAsCommand calls the accessor that matches the frame's command, which must not
// panic for any frame DecodeReplicaHeader accepted.
func viewAsCommand(g *GenericHeader) uintptr {
	switch g.Command {
	case CommandPrepare, CommandRepairPrepare:
		return headerAddr(g.Prepare())
	case CommandPrepareOk:
		return headerAddr(g.PrepareOk())
	case CommandCommit:
		return headerAddr(g.Commit())
	case CommandStartViewChange:
		return headerAddr(g.StartViewChange())
	case CommandDoViewChange:
		d := g.DoViewChange()
		_ = d.SuffixLen()
		return headerAddr(d)
	case CommandStartView:
		s := g.StartView()
		_ = s.SuffixLen()
		return headerAddr(s)
	case CommandRequestStartView:
		return headerAddr(g.RequestStartView())
	case CommandRequestPrepares:
		return headerAddr(g.RequestPrepares())
	case CommandRepairDone, CommandRangeEvicted:
		return headerAddr(g.RepairRange())
	case CommandRequestStateTransfer:
		return headerAddr(g.RequestStateTransfer())
	case CommandStateTransferTarget:
		return headerAddr(g.StateTransferTarget())
	case CommandRequestStateChunk:
		return headerAddr(g.RequestStateChunk())
	case CommandStateChunk:
		return headerAddr(g.StateChunk())
	case CommandForwardRegister:
		return headerAddr(g.ForwardRegister())
	case CommandForwardRegisterResult:
		return headerAddr(g.ForwardRegisterResult())
	case CommandForwardLogout:
		return headerAddr(g.ForwardLogout())
	case CommandForwardLogoutResult:
		return headerAddr(g.ForwardLogoutResult())
	case CommandReplicaHello, CommandReplicaChallenge, CommandReplicaFinish:
		return headerAddr(g.Handshake())
	}
	panic("decoded a frame of command " + g.Command.String())
}

// FuzzDecodeReplicaHeader covers every replica command. Random bytes almost never
// carry a valid seal, so with seal set the target seals the input first and the
// field rules behind the seal get explored too.
func FuzzDecodeReplicaHeader(f *testing.F) {
	for _, name := range goldenFiles(f, "headers") {
		f.Add(readGolden(f, name), true)
		f.Add(readGolden(f, name), false)
	}
	f.Add([]byte{}, false)
	f.Fuzz(func(t *testing.T, data []byte, sealIt bool) {
		buf := alignedCopy(data)
		if sealIt && len(buf) >= HeaderSize {
			SealFrame((*[HeaderSize]byte)(buf))
		}
		g, err := DecodeReplicaHeader(buf, DefaultMessageSizeMax)
		if err != nil {
			if _, ok := err.(HeaderFault); !ok {
				t.Fatalf("error %T", err)
			}
			return
		}
		if !g.Command.ReplicaPlane() || g.Release != 0 || g.Size < HeaderSize {
			t.Fatalf("accepted %v", g.Command)
		}
		if g.Command.FrameSealed() && !FrameSealValid(g.Bytes()) {
			t.Fatal("sealed command accepted without its seal")
		}
		if viewAsCommand(g) != headerAddr(g) {
			t.Fatal("typed view is not in place")
		}
	})
}

func FuzzDecodeManifest(f *testing.F) {
	for _, name := range goldenFiles(f, "manifest") {
		f.Add(readGolden(f, name))
	}
	f.Add([]byte("ISM1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeManifest(data)
		if err != nil {
			if _, ok := err.(ManifestFault); !ok {
				t.Fatalf("error %T", err)
			}
			return
		}
		var artifacts []StateArtifact
		for i, a := range m.All() {
			if i != len(artifacts) {
				t.Fatal("All skipped an index")
			}
			artifacts = append(artifacts, a)
		}
		if len(artifacts) != m.Len() || m.Len() > ManifestEntriesMax {
			t.Fatalf("%d artifacts, Len %d", len(artifacts), m.Len())
		}
		// This release's entries re-encode byte for byte.
		if data[8] == ManifestEntrySize && !bytes.Equal(AppendManifest(nil, artifacts), data) {
			t.Fatal("re-encoding differs")
		}
		again, err := DecodeManifest(AppendManifest(nil, artifacts))
		if err != nil || !slices.Equal(collectArtifacts(again), artifacts) {
			t.Fatal("round trip of a decoded manifest")
		}
	})
}
