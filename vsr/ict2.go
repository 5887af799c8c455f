package vsr

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"github.com/zeebo/xxh3"

	"github.com/iggy-shard/iggy-shard/wire"
)

// The client table travels (state transfer) and rests (snapshots) as ICT2:
//
//	"ICT2" | count u32 | count x entry | [logouts] | xxh3-64 of everything before, u64
//	entry = client u128 | epoch u64 | user_id u32 | watermark u64 |
//	        watermark_checksum u128 | ring_len u8 (1..5) | ring_len x (len u32 | reply)
//	logouts = logouts_count u32 (1..LoggedOutMax) | logouts_count x logout
//	logout = client u128 | epoch u64 | request_checksum u128 | len u32 | reply
//
// The logouts section holds the sessions ended by their own Logout (logouts.go),
// oldest first, none of them a client with an entry. It is left out when there
// are none: such a table encodes as it did before the section existed, and an
// older iggy-shard reads it; one with logouts it refuses (trailing bytes).
//
// Entries go in ascending client-id order (the decoder insists), so equal tables
// encode to equal bytes whatever their slot history; the reference server lists
// slots in slot order, which only iggy-shard replicas ever read here.
var ict2Magic = [4]byte{'I', 'C', 'T', '2'}

const (
	ict2EntryFixedBytes = 16 + 8 + 4 + 8 + 16 + 1
	ict2CountMax        = 65536
)

// ErrClientTableCorrupt is returned for ICT2 bytes that do not decode.
var ErrClientTableCorrupt = errors.New("vsr: client table encoding is corrupt")

// AppendICT2 appends the table's encoding to dst.
func (t *ClientTable) AppendICT2(dst []byte) []byte {
	start := len(dst)
	clients := make([]int32, 0, len(t.index))
	for _, i := range t.index {
		clients = append(clients, i)
	}
	sort.Slice(clients, func(a, b int) bool {
		return uint128Less(t.entries[clients[a]].client, t.entries[clients[b]].client)
	})
	dst = append(dst, ict2Magic[:]...)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(clients)))
	var u128 [16]byte
	for _, i := range clients {
		e := &t.entries[i]
		e.client.Put(u128[:])
		dst = append(dst, u128[:]...)
		dst = binary.LittleEndian.AppendUint64(dst, e.epoch)
		dst = binary.LittleEndian.AppendUint32(dst, e.userID)
		dst = binary.LittleEndian.AppendUint64(dst, e.watermark)
		e.watermarkChecksum.Put(u128[:])
		dst = append(dst, u128[:]...)
		dst = append(dst, e.repliesCount)
		for k := 0; k < int(e.repliesCount); k++ {
			dst = binary.LittleEndian.AppendUint32(dst, uint32(len(e.replies[k].reply)))
			dst = append(dst, e.replies[k].reply...)
		}
	}
	if len(t.loggedOut) > 0 {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(t.loggedOut)))
		for k := range t.loggedOut {
			r := &t.loggedOut[k]
			r.client.Put(u128[:])
			dst = append(dst, u128[:]...)
			dst = binary.LittleEndian.AppendUint64(dst, r.epoch)
			r.checksum.Put(u128[:])
			dst = append(dst, u128[:]...)
			dst = binary.LittleEndian.AppendUint32(dst, uint32(len(r.reply)))
			dst = append(dst, r.reply...)
		}
	}
	return binary.LittleEndian.AppendUint64(dst, xxh3.Hash(dst[start:]))
}

// ict2LogoutFixedBytes is a logout record's size before its reply.
const ict2LogoutFixedBytes = 16 + 8 + 16 + 4

// decodeLogouts reads the logouts section of an ICT2 encoding into t, whose
// entries are decoded.
func (t *ClientTable) decodeLogouts(b []byte) error {
	if len(b) < 4 {
		return fmt.Errorf("%w: %d trailing bytes", ErrClientTableCorrupt, len(b))
	}
	count := binary.LittleEndian.Uint32(b)
	b = b[4:]
	if count == 0 || count > LoggedOutMax || uint64(count)*ict2LogoutFixedBytes > uint64(len(b)) {
		return fmt.Errorf("%w: %d logouts in %d bytes", ErrClientTableCorrupt, count, len(b))
	}
	t.loggedOut = make([]loggedOut, 0, count)
	for n := uint32(0); n < count; n++ {
		if len(b) < ict2LogoutFixedBytes {
			return fmt.Errorf("%w: logout %d truncated", ErrClientTableCorrupt, n)
		}
		r := loggedOut{client: wire.GetUint128(b), epoch: binary.LittleEndian.Uint64(b[16:]), checksum: wire.GetUint128(b[24:])}
		size := binary.LittleEndian.Uint32(b[40:])
		b = b[ict2LogoutFixedBytes:]
		if uint64(size) > uint64(len(b)) || size < wire.HeaderSize {
			return fmt.Errorf("%w: logout %d reply of %d bytes", ErrClientTableCorrupt, n, size)
		}
		r.reply = append([]byte(nil), b[:size]...)
		r.request = binary.LittleEndian.Uint64(r.reply[200:])
		b = b[size:]
		if _, live := t.index[r.client]; r.client.IsZero() || live || t.logoutOf(r.client) >= 0 {
			return fmt.Errorf("%w: logout %d of client %v: zero, listed twice or with an entry", ErrClientTableCorrupt, n, r.client)
		}
		t.loggedOut = append(t.loggedOut, r)
	}
	if len(b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrClientTableCorrupt, len(b))
	}
	return nil
}

// DecodeICT2 rebuilds a table of at most max clients from its encoding. The
// request number of each cached reply is read from the reply's own header, which
// is where a committed reply carries it.
func DecodeICT2(b []byte, max int) (*ClientTable, error) {
	if len(b) < 4+4+8 || [4]byte(b[:4]) != ict2Magic {
		return nil, ErrClientTableCorrupt
	}
	payload, trailer := b[:len(b)-8], b[len(b)-8:]
	if xxh3.Hash(payload) != binary.LittleEndian.Uint64(trailer) {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrClientTableCorrupt)
	}
	count := binary.LittleEndian.Uint32(payload[4:8])
	if count > ict2CountMax || int(count) > max {
		return nil, fmt.Errorf("%w: %d clients, table holds %d", ErrClientTableCorrupt, count, max)
	}
	if uint64(count)*ict2EntryFixedBytes > uint64(len(payload)-8) {
		return nil, fmt.Errorf("%w: %d clients do not fit %d bytes", ErrClientTableCorrupt, count, len(payload))
	}
	t := NewClientTable(max)
	rest := payload[8:]
	var previous wire.Uint128
	for n := uint32(0); n < count; n++ {
		if len(rest) < ict2EntryFixedBytes {
			return nil, fmt.Errorf("%w: entry %d truncated", ErrClientTableCorrupt, n)
		}
		var e clientEntry
		e.used = true
		e.client = wire.GetUint128(rest)
		e.epoch = binary.LittleEndian.Uint64(rest[16:])
		e.userID = binary.LittleEndian.Uint32(rest[24:])
		e.watermark = binary.LittleEndian.Uint64(rest[28:])
		e.watermarkChecksum = wire.GetUint128(rest[36:])
		ringLen := rest[52]
		rest = rest[ict2EntryFixedBytes:]
		if e.client.IsZero() || ringLen < 1 || ringLen > CachedRepliesMax {
			return nil, fmt.Errorf("%w: entry %d: client id zero or ring length %d", ErrClientTableCorrupt, n, ringLen)
		}
		if n > 0 && !uint128Less(previous, e.client) {
			// Strictly ascending: one order for equal tables, and no duplicates.
			return nil, fmt.Errorf("%w: clients out of order or listed twice", ErrClientTableCorrupt)
		}
		previous = e.client
		for k := uint8(0); k < ringLen; k++ {
			if len(rest) < 4 {
				return nil, fmt.Errorf("%w: entry %d reply %d truncated", ErrClientTableCorrupt, n, k)
			}
			size := binary.LittleEndian.Uint32(rest)
			rest = rest[4:]
			if uint64(size) > uint64(len(rest)) || size < wire.HeaderSize {
				return nil, fmt.Errorf("%w: entry %d reply %d of %d bytes", ErrClientTableCorrupt, n, k, size)
			}
			reply := rest[:size]
			rest = rest[size:]
			request := binary.LittleEndian.Uint64(reply[200:])
			e.replies[k] = cachedReply{request: request, reply: append([]byte(nil), reply...)}
		}
		e.repliesCount = ringLen
		// The commit op of the newest reply is what orders evictions; a committed
		// reply carries it in its op field.
		e.latestCommit = binary.LittleEndian.Uint64(e.replies[ringLen-1].reply[176:])
		i, _ := t.allocate()
		t.entries[i] = e
		t.index[e.client] = i
	}
	if len(rest) != 0 {
		if err := t.decodeLogouts(rest); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func uint128Less(a, b wire.Uint128) bool {
	if a.Hi != b.Hi {
		return a.Hi < b.Hi
	}
	return a.Lo < b.Lo
}
