package metaplane

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/zeebo/xxh3"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// A snapshot is the replicated state as of one applied op, the plane's checkpoint
// and its state transfer's first artifact (a host keeps it as a file, the server's
// snapshot.bin):
//
//	+------+---------+--------+------------------+------------------+-----------+---------------+----------+------+------------+
//	| ISV1 | op u64  | 0 u32  | last identity    | last timestamp   | meta len  | metadata      | ict len  | ICT2 | xxh3-64 of |
//	|      |         |        | u128             | u64 µs           | u64       | snapshot      | u64      |      | all before |
//	+------+---------+--------+------------------+------------------+-----------+---------------+----------+------+------------+
//
// op, identity and timestamp are the last applied prepare's: the core's hash
// chain resumes from them (vsr.Checkpoint). The u32 after the op held the
// prepare's view once; it is written 0 and read as nothing: a replica holds an op
// under the view it learned it in (a retransmission restamps it), which is not
// replicated state, and two replicas' snapshots of one op must be the same
// bytes. The metadata is
// metadata.State.AppendSnapshot, the client table its ICT2 encoding: equal states
// give equal bytes, so a snapshot's checksum is a digest of the whole replicated
// state (Plane.Digest).

const snapshotMagic = "ISV1"

// ErrSnapshotCorrupt: a snapshot's bytes do not decode.
var ErrSnapshotCorrupt = errors.New("metadata snapshot corrupt")

// Applied names the last op applied to a state: the point a snapshot is taken at.
type Applied struct {
	Op        uint64
	Identity  wire.Uint128
	Timestamp uint64
}

// Snapshot is a decoded snapshot: the state and client table as of At.
type Snapshot struct {
	At    Applied
	State *metadata.State
	Table *vsr.ClientTable
}

// AppendSnapshot appends the snapshot of state and table as of at.
func AppendSnapshot(b []byte, at Applied, state *metadata.State, table *vsr.ClientTable) []byte {
	start := len(b)
	b = append(b, snapshotMagic...)
	b = binary.LittleEndian.AppendUint64(b, at.Op)
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint64(b, at.Identity.Lo)
	b = binary.LittleEndian.AppendUint64(b, at.Identity.Hi)
	b = binary.LittleEndian.AppendUint64(b, at.Timestamp)
	metaStart := len(b) + 8
	b = binary.LittleEndian.AppendUint64(b, 0)
	b = state.AppendSnapshot(b, at.Op)
	binary.LittleEndian.PutUint64(b[metaStart-8:], uint64(len(b)-metaStart))
	ictStart := len(b) + 8
	b = binary.LittleEndian.AppendUint64(b, 0)
	b = table.AppendICT2(b)
	binary.LittleEndian.PutUint64(b[ictStart-8:], uint64(len(b)-ictStart))
	return binary.LittleEndian.AppendUint64(b, xxh3.Hash(b[start:]))
}

// SnapshotParts is a snapshot's fields without its state decoded.
type SnapshotParts struct {
	At            Applied
	MetadataBytes []byte
	TableICT2     []byte
}

// SplitSnapshot checks a snapshot's framing and checksum and returns its parts,
// aliasing b.
func SplitSnapshot(b []byte) (SnapshotParts, error) {
	var p SnapshotParts
	const fixed = 4 + 8 + 4 + 16 + 8
	if len(b) < fixed+8+8+8 || string(b[:4]) != snapshotMagic {
		return p, fmt.Errorf("%w: bad magic or too short (%d bytes)", ErrSnapshotCorrupt, len(b))
	}
	body, sum := b[:len(b)-8], binary.LittleEndian.Uint64(b[len(b)-8:])
	if xxh3.Hash(body) != sum {
		return p, fmt.Errorf("%w: checksum mismatch", ErrSnapshotCorrupt)
	}
	p.At = Applied{
		Op:        binary.LittleEndian.Uint64(b[4:]),
		Identity:  wire.Uint128{Lo: binary.LittleEndian.Uint64(b[16:]), Hi: binary.LittleEndian.Uint64(b[24:])},
		Timestamp: binary.LittleEndian.Uint64(b[32:]),
	}
	rest := body[fixed:]
	metaLen := binary.LittleEndian.Uint64(rest)
	if metaLen > uint64(len(rest)-8) {
		return p, fmt.Errorf("%w: metadata length %d beyond the file", ErrSnapshotCorrupt, metaLen)
	}
	p.MetadataBytes = rest[8 : 8+metaLen]
	rest = rest[8+metaLen:]
	if len(rest) < 8 {
		return p, fmt.Errorf("%w: client table missing", ErrSnapshotCorrupt)
	}
	ictLen := binary.LittleEndian.Uint64(rest)
	if ictLen != uint64(len(rest)-8) {
		return p, fmt.Errorf("%w: client table length %d, %d bytes left", ErrSnapshotCorrupt, ictLen, len(rest)-8)
	}
	p.TableICT2 = rest[8:]
	return p, nil
}

// DecodeSnapshot decodes a snapshot whole, its client table into a table of at
// most tableMax clients.
func DecodeSnapshot(b []byte, tableMax int) (*Snapshot, error) {
	p, err := SplitSnapshot(b)
	if err != nil {
		return nil, err
	}
	state, op, err := metadata.DecodeSnapshot(p.MetadataBytes)
	if err != nil {
		return nil, fmt.Errorf("metadata snapshot: %w", err)
	}
	if op != p.At.Op {
		return nil, fmt.Errorf("%w: state op %d differs from op %d", ErrSnapshotCorrupt, op, p.At.Op)
	}
	if len(p.TableICT2) >= 8 {
		if held := binary.LittleEndian.Uint32(p.TableICT2[4:8]); uint64(held) > uint64(tableMax) {
			// Written with a larger table: a configuration to raise, not damage.
			return nil, fmt.Errorf("the snapshot's client table holds %d sessions, more than metadata.clients_table_max = %d: start with a value of at least %d", held, tableMax, held)
		}
	}
	table, err := vsr.DecodeICT2(p.TableICT2, tableMax)
	if err != nil {
		return nil, fmt.Errorf("metadata snapshot client table: %w", err)
	}
	return &Snapshot{At: p.At, State: state, Table: table}, nil
}

// SnapshotDigest is a digest of a snapshot's whole replicated state (its trailing
// checksum): two replicas that applied the same ops give the same digest.
func SnapshotDigest(b []byte) uint64 {
	if len(b) < 8 {
		return 0
	}
	return binary.LittleEndian.Uint64(b[len(b)-8:])
}
