package httpapi

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math/big"
	"strconv"
	"strings"

	"github.com/iggy-shard/iggy-shard/wire"
)

// The JSON of messages (apache/iggy core/common/src/http/ and
// core/server/src/http/messages.rs): SendMessages bodies in, polled messages out.

// sendMessagesBody is SendMessages: only partitioning and messages may appear.
type sendMessagesBody struct {
	Partitioning *partitioningJSON `json:"partitioning"`
	Messages     *[]messageJSON    `json:"messages"`
}

type partitioningJSON struct {
	Kind  *string `json:"kind"`
	Value *string `json:"value"`
}

type messageJSON struct {
	ID          messageID        `json:"id"`
	Payload     *string          `json:"payload"`
	UserHeaders *userHeadersJSON `json:"user_headers"`
}

// decodeSendMessages reads a SendMessages body; unknown top-level keys are the
// wrong shape, unknown keys inside a message are ignored.
func decodeSendMessages(body []byte) (*sendMessagesBody, error) {
	var top map[string]json.RawMessage
	if err := unmarshalBody(body, &top); err != nil {
		return nil, err
	}
	for k := range top {
		if k != "partitioning" && k != "messages" {
			return nil, rejectJSONShape("unknown field `" + k + "`, expected `partitioning` or `messages`")
		}
	}
	var b sendMessagesBody
	if err := unmarshalBody(body, &b); err != nil {
		return nil, err
	}
	if b.Partitioning == nil || b.Partitioning.Kind == nil || b.Partitioning.Value == nil {
		return nil, rejectJSONShape("missing field `partitioning` (with `kind` and `value`)")
	}
	if b.Messages == nil {
		return nil, rejectJSONShape("missing field `messages`")
	}
	for i, m := range *b.Messages {
		if m.Payload == nil {
			return nil, rejectJSONShape("messages[" + strconv.Itoa(i) + "]: missing field `payload`")
		}
	}
	return &b, nil
}

// partitioning converts the JSON partitioning (messages.rs).
func (p *partitioningJSON) wire() (wire.Partitioning, error) {
	value, err := base64.StdEncoding.DecodeString(*p.Value)
	if err != nil {
		return wire.Partitioning{}, rejectJSONShape("partitioning.value: not standard base64")
	}
	if len(value) > 255 {
		return wire.Partitioning{}, wire.ErrInvalidKeyValueLength
	}
	switch *p.Kind {
	case "balanced":
		return wire.Partitioning{Kind: wire.PartitioningBalanced}, nil
	case "partition_id":
		if len(value) == 0 {
			return wire.Partitioning{}, wire.ErrInvalidKeyValueLength
		}
		if len(value) < 4 {
			return wire.Partitioning{}, wire.ErrInvalidCommand
		}
		return wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: binary.LittleEndian.Uint32(value)}, nil
	case "messages_key":
		if len(value) == 0 {
			return wire.Partitioning{}, wire.ErrInvalidKeyValueLength
		}
		return wire.Partitioning{Kind: wire.PartitioningMessagesKey, Key: value}, nil
	}
	return wire.Partitioning{}, rejectJSONShape("partitioning.kind: unknown variant `" + *p.Kind + "`")
}

// messageID is a message id in a request (apache/iggy core/common/src/http/): absent
// or 0 (the server mints a UUIDv4), a number up to u64, a decimal u128 string, or 32
// hex digits with optional dashes read as a big-endian 128-bit number.
type messageID struct {
	v   wire.Uint128
	set bool
}

var maxU128 = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 128), big.NewInt(1))

func (m *messageID) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	if len(b) > 0 && b[0] != '"' {
		n, err := strconv.ParseUint(string(b), 10, 64)
		if err != nil {
			return &shapeError{"id: not a u64 number"}
		}
		m.v, m.set = wire.Uint128{Lo: n}, true
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	if d, ok := new(big.Int).SetString(s, 10); ok && d.Sign() >= 0 && d.Cmp(maxU128) <= 0 && !strings.ContainsAny(s, "+-") {
		m.v, m.set = uint128FromBig(d), true
		return nil
	}
	h := strings.ReplaceAll(s, "-", "")
	raw, err := hex.DecodeString(h)
	if err != nil || len(raw) != 16 {
		return &shapeError{"id: not a u128 (a number, a decimal string or a UUID)"}
	}
	m.v, m.set = wire.Uint128{Hi: binary.BigEndian.Uint64(raw[:8]), Lo: binary.BigEndian.Uint64(raw[8:])}, true
	return nil
}

func uint128FromBig(d *big.Int) wire.Uint128 {
	lo := new(big.Int).And(d, new(big.Int).SetUint64(^uint64(0)))
	hi := new(big.Int).Rsh(d, 64)
	return wire.Uint128{Hi: hi.Uint64(), Lo: lo.Uint64()}
}

// orRandom is the id, or a random UUIDv4 (as a little-endian u128) for 0.
func (m messageID) orRandom() wire.Uint128 {
	if !m.v.IsZero() {
		return m.v
	}
	return randomMessageID()
}

// randomMessageID mints the id of a message sent without one; a variable so that a
// test can make two decoders' batches comparable byte for byte.
var randomMessageID = func() wire.Uint128 {
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return wire.GetUint128(u[:])
}

// userHeadersJSON is a message's user headers: an array of entries (stored in the
// reference's order, send_headers.go), or a string holding the base64 of an
// already-encoded block (stored as given).
type userHeadersJSON struct {
	block []byte
}

type headerEntryJSON struct {
	Key   *headerFieldJSON `json:"key"`
	Value *headerFieldJSON `json:"value"`
}

type headerFieldJSON struct {
	Kind  string `json:"kind"`
	Value string `json:"value"`
}

// headerKindsByName are the kinds by their JSON names (core/common/src/types/).
var headerKindsByName = func() map[string]wire.HeaderKind {
	m := map[string]wire.HeaderKind{}
	for k := wire.HeaderRaw; k <= wire.HeaderFloat64; k++ {
		m[k.String()] = k
	}
	return m
}()

func (h *userHeadersJSON) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		raw, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return &shapeError{"user_headers: not standard base64"}
		}
		h.block = raw
		return nil
	}
	var entries []headerEntryJSON
	if err := json.Unmarshal(b, &entries); err != nil {
		return err
	}
	for i, e := range entries {
		if e.Key == nil || e.Value == nil {
			return &shapeError{"user_headers[" + strconv.Itoa(i) + "]: missing `key` or `value`"}
		}
		kk, kv, err := e.Key.decode()
		if err != nil {
			return err
		}
		vk, vv, err := e.Value.decode()
		if err != nil {
			return err
		}
		if h.block, err = wire.AppendTLV(h.block, kk, kv, vk, vv); err != nil {
			return &shapeError{"user_headers[" + strconv.Itoa(i) + "]: " + err.Error()}
		}
	}
	var order headerOrder
	h.block = order.orderHeaders(h.block)
	return nil
}

func (f *headerFieldJSON) decode() (wire.HeaderKind, []byte, error) {
	kind, ok := headerKindsByName[f.Kind]
	if !ok {
		return 0, nil, &shapeError{"user_headers: unknown kind `" + f.Kind + "`"}
	}
	v, err := base64.StdEncoding.DecodeString(f.Value)
	if err != nil {
		return 0, nil, &shapeError{"user_headers: value not standard base64"}
	}
	return kind, v, nil
}

// messageJSONOverheadBytes is a generous bound on one message's JSON besides its
// base64 fields: the header's names and numbers.
const messageJSONOverheadBytes = 400

// decodeBase64 reads standard base64 with padding.
func decodeBase64(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }
