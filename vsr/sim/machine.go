package sim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/zeebo/xxh3"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// groupMachine is the state machine one consensus group applies its committed
// prepares to. The metadata group runs the real one (metadata.State and the
// replicated client table, as the server applies them); partition groups run a
// small stand-in until the partition plane's own logic plugs in here.
type groupMachine interface {
	// apply applies one committed prepare and returns the reply its primary sends
	// (the bytes a retry must be answered with), or answer false when the op
	// answers no one (a deduplicated retry, a client gone).
	apply(h *wire.PrepareHeader, body []byte) (reply []byte, answer bool)
	// bodyIntact verifies a body the consensus core does not seal itself (partition
	// prepares carry their own checksums, as message batches do).
	bodyIntact(body []byte) bool
	// artifacts is the state as of op (the last applied one), for a state transfer
	// or a checkpoint. Their bytes are the machine's own: equal states give equal
	// bytes.
	artifacts(op uint64) []vsr.Artifact
	// install replaces the state by transferred or checkpointed artifacts.
	install(op uint64, artifacts []vsr.Artifact) error
}

// The root user every client logs in as: passwords are not what the simulator
// tests, so it never verifies one. metadata.HashPassword is argon2id, deliberately
// slow, so the one hash (the root's, and the password of every user the workload
// creates) is computed once per process.
const rootUsername = "iggy"

var rootPasswordHash = sync.OnceValue(func() string {
	return metadata.HashPassword([]byte("iggy"), []byte("sim-salt-16bytes"))
})

// stateCreatedAtMicros is the root user's creation time: every replica's initial
// state must be the same bytes.
const stateCreatedAtMicros = 1_700_000_000_000_000

const serverVersion = "sim"

// metadataMachine is the metadata plane's state machine: metadata.State and the
// replicated client table, applied as server/metaplane.go applyCommitted does
// (Register commits a session whose epoch is its op; other ops Apply, then cache
// the reply frame, Logout removes the session), with the deduplication of retries
// a multi-replica group needs at apply: a retry prepared twice (once in a view that
// lost the race, once after) is applied once.
type metadataMachine struct {
	state *metadata.State
	table *vsr.ClientTable
	out   metadata.Output
	// lastRefused: the last apply committed a rejection (a result other than 0).
	lastRefused bool
	// applyRetries and clockSkewMicros break the machine for the checkers' tests.
	applyRetries    bool
	clockSkewMicros uint64
}

func newMetadataMachine() *metadataMachine {
	return &metadataMachine{
		state: metadata.NewState(rootUsername, rootPasswordHash(), stateCreatedAtMicros),
		table: vsr.NewClientTable(clientsTableMax),
	}
}

func (m *metadataMachine) bodyIntact([]byte) bool { return true }

// replyHeader is the committed reply's header, built from the prepare alone: every
// replica caches the same bytes, whichever view it learned the prepare in.
func replyHeader(h *wire.PrepareHeader) wire.ReplyHeader {
	var r wire.ReplyHeader
	r.Cluster = h.Cluster
	r.Size = wire.HeaderSize
	r.Command = wire.CommandReply
	r.Client = h.Client
	r.RequestChecksum = h.RequestChecksum
	r.Op, r.Commit, r.Timestamp = h.Op, h.Op, h.Timestamp
	r.Request = h.Request
	r.Operation = h.Operation
	return r
}

func (m *metadataMachine) apply(h *wire.PrepareHeader, body []byte) ([]byte, bool) {
	m.lastRefused = false
	m.out.Effects = m.out.Effects[:0]
	rh := replyHeader(h)
	frame := make([]byte, wire.HeaderSize, 512)
	if h.Operation == wire.OperationRegister {
		frame = wire.AppendResultSuccess(frame)
		login := wire.LoginRegisterReply{UserID: h.UserID, Session: h.Op, ServerProtocolVersion: wire.ServerProtocolVersion, ServerVersion: []byte(serverVersion)}
		frame, _ = login.Append(frame)
		rh.Size = uint32(len(frame))
		rh.Put(frame)
		m.table.CommitRegister(h.Client, h.UserID, h.Op, frame)
		return frame, true
	}
	epoch, _, registered := m.table.Session(h.Client)
	if !registered {
		return nil, false // logged out since it was admitted: nothing to apply it for
	}
	if verdict, _ := m.table.Preflight(h.Client, epoch, h.Request, h.RequestChecksum); verdict != vsr.PreflightExecute && !m.applyRetries {
		return nil, false // a retry prepared twice: applied once, its reply stands
	}
	m.state.Apply(metadata.Header{Operation: h.Operation, Client: h.Client, UserID: h.UserID, TimestampMicros: h.Timestamp + m.clockSkewMicros}, body, &m.out)
	m.lastRefused = m.out.Result != 0
	frame = append(frame, m.out.Reply...)
	rh.Size = uint32(len(frame))
	rh.Operation = m.out.Operation
	rh.Put(frame)
	switch h.Operation {
	case wire.OperationLogout:
		m.table.Remove(h.Client)
	case wire.OperationRemoveConsumerGroupMember:
	default:
		m.table.CommitRequest(h.Client, h.Request, h.RequestChecksum, h.Op, frame)
	}
	return frame, true
}

// effectsDigest is a digest of the last apply's effects (what the server would do
// to partitions and files): every replica must ask for the same.
func (m *metadataMachine) effectsDigest() uint64 {
	b := make([]byte, 0, len(m.out.Effects)*32)
	for _, e := range m.out.Effects {
		b = append(b, byte(e.Kind))
		for _, v := range [...]uint32{e.Stream, e.Topic, e.First, e.Count, e.Group} {
			b = binary.LittleEndian.AppendUint32(b, v)
		}
		b = binary.LittleEndian.AppendUint64(b, e.Generation)
	}
	return xxh3.Hash(b)
}

// The metadata group's transfer (and checkpoint) artifacts are the real ones: the
// metadata snapshot (metadata.State.AppendSnapshot) and the client table (ICT2).
func (m *metadataMachine) artifacts(op uint64) []vsr.Artifact {
	return []vsr.Artifact{
		{Kind: wire.ArtifactMetadataSnapshot, Frontier: op, Bytes: m.state.AppendSnapshot(nil, op)},
		{Kind: wire.ArtifactClientTable, Frontier: op, Bytes: m.table.AppendICT2(nil)},
	}
}

func (m *metadataMachine) install(op uint64, artifacts []vsr.Artifact) error {
	if len(artifacts) != 2 || artifacts[0].Kind != wire.ArtifactMetadataSnapshot || artifacts[1].Kind != wire.ArtifactClientTable {
		return fmt.Errorf("a metadata state of %d artifacts", len(artifacts))
	}
	state, snapshotOp, err := metadata.DecodeSnapshot(artifacts[0].Bytes)
	if err != nil {
		return err
	}
	if snapshotOp != op {
		return fmt.Errorf("metadata snapshot of op %d, want op %d", snapshotOp, op)
	}
	table, err := vsr.DecodeICT2(artifacts[1].Bytes, clientsTableMax)
	if err != nil {
		return err
	}
	m.state, m.table = state, table
	return nil
}

// partitionMachine stands in for a partition's state machine (the partition plane's
// own, over segments, plugs in behind groupMachine later): an append-only log
// summarized by its length and a running hash, and consumer offsets. Its bodies
// carry a trailing XxHash3-64 seal, as message batches carry their own checksums
// (the consensus core seals only metadata bodies). Sends are at-least-once: a retry
// that is prepared twice appends twice, as an SDK's resend does.
type partitionMachine struct {
	messagesCount uint64
	logDigest     uint64
	offsets       map[uint32]uint64
}

func newPartitionMachine() *partitionMachine {
	return &partitionMachine{offsets: make(map[uint32]uint64)}
}

const partitionSealBytes = 8

// sealPartitionBody appends the seal a partition body carries.
func sealPartitionBody(payload []byte) []byte {
	return binary.LittleEndian.AppendUint64(payload, xxh3.Hash(payload))
}

func (p *partitionMachine) bodyIntact(body []byte) bool {
	if len(body) < partitionSealBytes {
		return false
	}
	payload := body[:len(body)-partitionSealBytes]
	return binary.LittleEndian.Uint64(body[len(payload):]) == xxh3.Hash(payload)
}

// storeOffsetBytes is a StoreConsumerOffset payload: [consumer u32][offset u64].
const storeOffsetBytes = 12

func (p *partitionMachine) apply(h *wire.PrepareHeader, body []byte) ([]byte, bool) {
	payload := body[:len(body)-partitionSealBytes]
	switch h.Operation {
	case wire.OperationSendMessages:
		// The reply is the first offset the batch got and its message count.
		count := uint64(1 + len(payload)/16)
		reply := binary.LittleEndian.AppendUint64(nil, p.messagesCount)
		reply = binary.LittleEndian.AppendUint64(reply, count)
		p.messagesCount += count
		p.logDigest = xxh3.HashSeed(payload, p.logDigest)
		return reply, true
	case wire.OperationStoreConsumerOffset:
		if len(payload) == storeOffsetBytes {
			p.offsets[binary.LittleEndian.Uint32(payload)] = binary.LittleEndian.Uint64(payload[4:])
		}
		return []byte{}, true
	}
	return nil, false
}

// The stand-in's artifacts: the log's summary (in place of the segment files) and
// the offsets, sorted by consumer.
func (p *partitionMachine) artifacts(op uint64) []vsr.Artifact {
	log := binary.LittleEndian.AppendUint64(nil, p.messagesCount)
	log = binary.LittleEndian.AppendUint64(log, p.logDigest)
	consumers := make([]uint32, 0, len(p.offsets))
	for k := range p.offsets {
		consumers = append(consumers, k)
	}
	slices.Sort(consumers)
	offsets := make([]byte, 0, len(consumers)*storeOffsetBytes)
	for _, k := range consumers {
		offsets = binary.LittleEndian.AppendUint32(offsets, k)
		offsets = binary.LittleEndian.AppendUint64(offsets, p.offsets[k])
	}
	return []vsr.Artifact{
		{Kind: wire.ArtifactSegmentLog, Frontier: op, Bytes: log},
		{Kind: wire.ArtifactConsumerOffsets, Frontier: op, Bytes: offsets},
	}
}

var errPartitionState = errors.New("partition stand-in: malformed state")

func (p *partitionMachine) install(_ uint64, artifacts []vsr.Artifact) error {
	if len(artifacts) != 2 || len(artifacts[0].Bytes) != 16 || len(artifacts[1].Bytes)%storeOffsetBytes != 0 {
		return errPartitionState
	}
	p.messagesCount = binary.LittleEndian.Uint64(artifacts[0].Bytes)
	p.logDigest = binary.LittleEndian.Uint64(artifacts[0].Bytes[8:])
	p.offsets = make(map[uint32]uint64)
	for b := artifacts[1].Bytes; len(b) > 0; b = b[storeOffsetBytes:] {
		p.offsets[binary.LittleEndian.Uint32(b)] = binary.LittleEndian.Uint64(b[4:])
	}
	return nil
}
