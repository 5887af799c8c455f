package httpapi

import (
	"encoding/base64"
	"sort"

	"github.com/iggy-shard/iggy-shard/jsonview"
	"github.com/iggy-shard/iggy-shard/wire"
)

// The poll answer as it was rendered before writePolled and appendUserHeaders: a
// struct per message (and per user header) marshalled by encoding/json. Kept as the
// reference they must match byte for byte (TestPolledReplyMatchesEncodingJSON,
// TestPolledHeadersMatchEncodingJSON and their fuzz tests).

// polledJSON is a poll's answer (messages.rs).
type polledJSON struct {
	PartitionID   uint32              `json:"partition_id"`
	CurrentOffset uint64              `json:"current_offset"`
	Count         int                 `json:"count"`
	Messages      []polledMessageJSON `json:"messages"`
}

type polledMessageJSON struct {
	Header      messageHeaderJSON `json:"header"`
	Payload     string            `json:"payload"`
	UserHeaders any               `json:"user_headers"`
}

type messageHeaderJSON struct {
	Checksum          uint64        `json:"checksum"`
	ID                jsonview.U128 `json:"id"`
	Offset            uint64        `json:"offset"`
	Timestamp         uint64        `json:"timestamp"`
	OriginTimestamp   uint64        `json:"origin_timestamp"`
	UserHeadersLength uint32        `json:"user_headers_length"`
	PayloadLength     uint32        `json:"payload_length"`
	Reserved          uint64        `json:"reserved"`
}

// renderPolled renders a poll reply. budgetBytes (0 = none) bounds the answer
// counted after base64; truncate allows dropping the messages past it (a poll
// without auto-commit: the client polls them next).
func renderPolled(p *wire.PolledMessages, budgetBytes int, truncate bool) polledJSON {
	out := polledJSON{PartitionID: p.PartitionID, CurrentOffset: p.CurrentOffset, Messages: []polledMessageJSON{}}
	used := 0
	for it := p.Messages(); it.Next(); {
		m := it.Message()
		payload, headers := m.Payload(), m.UserHeaders()
		cost := messageJSONOverheadBytes + base64.StdEncoding.EncodedLen(len(payload)) + 2*base64.StdEncoding.EncodedLen(len(headers))
		if budgetBytes > 0 && truncate && len(out.Messages) > 0 && used+cost > budgetBytes {
			break
		}
		used += cost
		out.Messages = append(out.Messages, polledMessageJSON{
			Header: messageHeaderJSON{Checksum: m.Checksum(), ID: jsonview.U128(m.ID()), Offset: m.Offset, Timestamp: m.Timestamp,
				OriginTimestamp: m.OriginTimestamp, UserHeadersLength: uint32(len(headers)), PayloadLength: uint32(len(payload))},
			Payload:     base64.StdEncoding.EncodeToString(payload),
			UserHeaders: renderUserHeaders(headers),
		})
	}
	out.Count = len(out.Messages)
	return out
}

// renderUserHeaders is a polled message's user headers: [] for none, the entries
// sorted by key when the block parses, else the block as a base64 string.
func renderUserHeaders(block []byte) any {
	entries := []headerEntryJSON{}
	it := wire.NewTLVIterator(block)
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		entries = append(entries, headerEntryJSON{
			Key:   &headerFieldJSON{Kind: e.KeyKind.String(), Value: base64.StdEncoding.EncodeToString(e.Key)},
			Value: &headerFieldJSON{Kind: e.ValueKind.String(), Value: base64.StdEncoding.EncodeToString(e.Value)},
		})
	}
	if it.Err() != nil || unknownKinds(block) {
		return base64.StdEncoding.EncodeToString(block)
	}
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].Key.Value < entries[j].Key.Value })
	return entries
}

// unknownKinds reports a kind code JSON has no name for: such a block is shown raw
// so that nothing is renamed on its way through.
func unknownKinds(block []byte) bool {
	it := wire.NewTLVIterator(block)
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		if !e.KeyKind.Known() || !e.ValueKind.Known() {
			return true
		}
	}
	return false
}
