package jsonview

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"slices"

	"github.com/iggy-shard/iggy-shard/wire"
)

// SendConfirmations is a send's answer: where each batch went.
type SendConfirmations struct {
	Confirmations []SendConfirmation `json:"confirmations"`
}

type SendConfirmation struct {
	StreamID    uint32 `json:"stream_id"`
	TopicID     uint32 `json:"topic_id"`
	PartitionID uint32 `json:"partition_id"`
	BaseOffset  uint64 `json:"base_offset"`
}

// AppendSendConfirmations appends c's entries to dst.
func AppendSendConfirmations(dst []SendConfirmation, c wire.SendConfirmations) []SendConfirmation {
	for i := range c.Len() {
		e := c.At(i)
		dst = append(dst, SendConfirmation{StreamID: e.StreamID, TopicID: e.TopicID, PartitionID: e.PartitionID, BaseOffset: e.BaseOffset})
	}
	return dst
}

// Polled is a poll's answer (apache/iggy core/server/src/http/messages.rs).
type Polled struct {
	PartitionID   uint32          `json:"partition_id"`
	CurrentOffset uint64          `json:"current_offset"`
	Count         int             `json:"count"`
	Messages      []PolledMessage `json:"messages"`
}

// PolledMessage is one message of a poll: its payload in base64, its user headers
// as UserHeaders renders them.
type PolledMessage struct {
	Header      MessageHeader `json:"header"`
	Payload     []byte        `json:"payload"`
	UserHeaders any           `json:"user_headers"`
}

type MessageHeader struct {
	Checksum          uint64 `json:"checksum"`
	ID                U128   `json:"id"`
	Offset            uint64 `json:"offset"`
	Timestamp         uint64 `json:"timestamp"`
	OriginTimestamp   uint64 `json:"origin_timestamp"`
	UserHeadersLength int    `json:"user_headers_length"`
	PayloadLength     int    `json:"payload_length"`
	Reserved          uint64 `json:"reserved"`
}

// PolledMessageOf is m with payload (m's own, or what the CLI decrypted of it: its
// payload_length is then the decrypted one's).
func PolledMessageOf(m *wire.PolledMessage, payload []byte) PolledMessage {
	if payload == nil {
		payload = []byte{} // "", not null
	}
	return PolledMessage{
		Header: MessageHeader{Checksum: m.Checksum(), ID: U128(m.ID()), Offset: m.Offset, Timestamp: m.Timestamp,
			OriginTimestamp: m.OriginTimestamp, UserHeadersLength: len(m.UserHeaders()), PayloadLength: len(payload)},
		Payload:     payload,
		UserHeaders: UserHeaders(m.UserHeaders()),
	}
}

// HeaderEntry is one user header: kinds by name, the raw bytes in base64.
type HeaderEntry struct {
	Key   HeaderField `json:"key"`
	Value HeaderField `json:"value"`
}

type HeaderField struct {
	Kind  string `json:"kind"`
	Value []byte `json:"value"`
}

// UserHeaders is a polled message's user headers as the reference renders them
// (apache/iggy core/common/src/types/message/iggy_message.rs, its Serialize: the
// block read into a BTreeMap by core/common/src/wire_conversions.rs): [] for none;
// the entries ordered by key (kind code, then bytes), a key given twice shown once
// with its last value, when the block parses, every kind has a name and every
// fixed-size field its size; else the whole block as one base64 string.
func UserHeaders(block []byte) any {
	var pairs []wire.TLVEntry
	it := wire.NewTLVIterator(block)
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		if !HeaderFieldShown(e.KeyKind, e.Key) || !HeaderFieldShown(e.ValueKind, e.Value) {
			return base64.StdEncoding.EncodeToString(block)
		}
		pairs = append(pairs, e)
	}
	if it.Err() != nil {
		return base64.StdEncoding.EncodeToString(block)
	}
	slices.SortStableFunc(pairs, CompareHeaderKeys)
	entries := []HeaderEntry{}
	for i, e := range pairs {
		if i+1 < len(pairs) && CompareHeaderKeys(e, pairs[i+1]) == 0 {
			continue // the last of a key's entries is its value
		}
		entries = append(entries, HeaderEntry{Key: HeaderField{e.KeyKind.String(), e.Key}, Value: HeaderField{e.ValueKind.String(), e.Value}})
	}
	return entries
}

// HeaderFieldShown reports whether a header field can be shown as an entry: its
// kind has a name, and a fixed-size kind its size.
func HeaderFieldShown(kind wire.HeaderKind, v []byte) bool {
	n := kind.FixedSizeBytes()
	return kind.Known() && (n == 0 || len(v) == n)
}

// CompareHeaderKeys orders two entries by key as the reference's BTreeMap does:
// kind code, then bytes.
func CompareHeaderKeys(x, y wire.TLVEntry) int {
	return cmp.Or(cmp.Compare(x.KeyKind, y.KeyKind), bytes.Compare(x.Key, y.Key))
}
