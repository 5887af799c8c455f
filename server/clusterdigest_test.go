package server

import (
	"encoding/binary"
	"testing"

	"github.com/zeebo/xxh3"

	"github.com/iggy-shard/iggy-shard/wire"
)

// metaHolding is what a node's metadata plane holds at its applied op: a digest of
// its state's snapshot encoding, and of each client table entry's ICT2 encoding
// (vsr/ict2.go), by client.
type metaHolding struct {
	op      uint64
	state   uint64
	clients map[wire.Uint128]uint64
}

// ict2Entries digests each entry of an ICT2 encoding: client u128 | epoch u64 |
// user_id u32 | watermark u64 | watermark_checksum u128 | ring_len u8 | ring_len
// x (len u32 | reply).
func ict2Entries(t *testing.T, b []byte) map[wire.Uint128]uint64 {
	t.Helper()
	entries := make(map[wire.Uint128]uint64)
	count := binary.LittleEndian.Uint32(b[4:])
	at := 8
	for range count {
		start := at
		client := wire.Uint128{Lo: binary.LittleEndian.Uint64(b[at:]), Hi: binary.LittleEndian.Uint64(b[at+8:])}
		at += 16 + 8 + 4 + 8 + 16
		ring := int(b[at])
		at++
		for range ring {
			at += 4 + int(binary.LittleEndian.Uint32(b[at:]))
		}
		entries[client] = xxh3.Hash(b[start:at])
	}
	if at != len(b)-8 {
		t.Fatalf("client table encoding: %d entries end at %d of %d bytes", count, at, len(b))
	}
	return entries
}

// metaHoldings waits until every server applied the same op and returns what
// each holds then.
func metaHoldings(t *testing.T, servers []*Server) []metaHolding {
	t.Helper()
	holdings := make([]metaHolding, len(servers))
	waitUntil(t, "every node applies the same op", func() bool {
		for i, s := range servers {
			var table []byte
			onMetaShard(t, s, func(p *metaPlane) {
				holdings[i] = metaHolding{op: p.Applied().Op, state: xxh3.Hash(p.State().AppendSnapshot(nil, 0))}
				table = p.Table().AppendICT2(nil)
			})
			holdings[i].clients = ict2Entries(t, table)
		}
		for _, h := range holdings {
			if h.op != holdings[0].op {
				return false
			}
		}
		return true
	})
	return holdings
}

// sameMetadata fails the test unless every server holds the same metadata and the
// same client table entries, and returns the op they hold them at. A table entry
// may be missing on a node, not differ: a node drops the entry of a client whose
// connection to it closed, locally, as the reference does (metaRouter.clientGone),
// and the table is otherwise replicated state.
func sameMetadata(t *testing.T, servers []*Server) uint64 {
	t.Helper()
	holdings := metaHoldings(t, servers)
	shared := 0
	for i, h := range holdings {
		if h.state != holdings[0].state {
			t.Fatalf("node %d's metadata at op %d differs from node 0's", i, h.op)
		}
		for client, entry := range h.clients {
			if other, ok := holdings[0].clients[client]; ok && other != entry {
				t.Fatalf("node %d's client table entry of %v differs from node 0's at op %d", i, client, h.op)
			} else if ok && i > 0 {
				shared++
			}
		}
	}
	if shared == 0 && len(holdings[0].clients) > 0 {
		t.Fatalf("no client table entry is on two nodes at op %d", holdings[0].op)
	}
	return holdings[0].op
}
