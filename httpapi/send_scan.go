package httpapi

import (
	"bytes"
	"encoding/base64"
	"errors"
	"math"
	"math/bits"
	"net/http"
	"sync"
	"time"

	"github.com/iggy-shard/iggy-shard/wire"
)

// The fast way of a SendMessages body: one pass over the JSON, each payload's base64
// decoded into a reused scratch and appended to the batch the request is built in,
// no value per message on the heap.
//
// It takes only the plain shape the SDKs and the Web UI send: each key exactly as
// named and once, strings without escapes, ids as numbers or strings, user headers
// null, a base64 string or an array of {"key": field, "value": field} entries, each
// decoded into a reused block. Anything else, and every error, falls back to
// decodeSendMessages and buildSend, the encoding/json decoder it must agree with: an
// accepted body builds the same bytes, and a refused one is refused with the old
// decoder's own words (FuzzScanSendMatchesDecoder and
// FuzzScanSendMatchesDecoderHeaders hold the two together).

// buildSendBody is a SendMessages request from its JSON body.
func buildSendBody(stream, topic wire.Identifier, raw []byte, now time.Time) ([]byte, error) {
	if out, ok := scanSend(stream, topic, raw, now); ok {
		return out, nil
	}
	b, err := decodeSendMessages(raw)
	if err != nil {
		return nil, err
	}
	return buildSend(stream, topic, b, now)
}

// sendScratch holds what a message is decoded into before the batch copies it: its
// payload, and its user headers block (with the scratch that orders an array's).
type sendScratch struct {
	payload, headers []byte
	order            headerOrder
}

// sendScratchPool holds the scratch of the sends under way.
var sendScratchPool = sync.Pool{New: func() any { return new(sendScratch) }}

// sendScanner walks a body; any surprise makes scanSend give up (ok false).
type sendScanner struct {
	b []byte
	i int
}

// scanSend builds the request from raw, or reports !ok for a body the fast way does
// not take (which the old decoder then reads, accepting or refusing).
func scanSend(stream, topic wire.Identifier, raw []byte, now time.Time) (out []byte, ok bool) {
	s := sendScanner{b: raw}
	if !s.consume('{') {
		return nil, false
	}
	// The metadata goes in front of the batch but the partitioning may come after
	// the messages (encoding/json writes a map's keys sorted): the batch is built
	// behind room for the longest metadata, which is written in place at the end.
	// The decoded payloads are at most three quarters of the body: room for them
	// and the frame headers of most batches.
	req := wire.SendMessages{StreamID: stream, TopicID: topic}
	room := 4 + stream.EncodedLen() + topic.EncodedLen() + maxPartitioningBytes + 4
	var bb wire.BatchBuilder
	bb.Reset(make([]byte, room, room+len(raw)))
	var sawPartitioning, sawMessages bool
	for first := true; !s.consume('}'); first = false {
		key, ok := s.memberKey(first)
		if !ok {
			return nil, false
		}
		switch string(key) {
		case "partitioning":
			if sawPartitioning {
				return nil, false
			}
			if req.Partitioning, ok = s.partitioning(); !ok {
				return nil, false
			}
			sawPartitioning = true
		case "messages":
			if sawMessages || !s.messages(&bb, uint64(now.UnixMicro())) {
				return nil, false
			}
			sawMessages = true
		default:
			return nil, false
		}
	}
	if !sawPartitioning || !sawMessages || !s.atEnd() || bb.Count() == 0 {
		return nil, false
	}
	body, err := bb.Finish()
	if err != nil {
		return nil, false
	}
	req.MessagesCount = bb.Count()
	metadataBytes := 4 + stream.EncodedLen() + topic.EncodedLen() + req.Partitioning.EncodedLen() + 4
	if metadataBytes > room {
		return nil, false
	}
	at := room - metadataBytes
	if m, err := req.AppendMetadata(body[at:at]); err != nil || len(m) != metadataBytes {
		return nil, false
	}
	return body[at:], true
}

// maxPartitioningBytes is the longest partitioning: a 255-byte messages key.
var maxPartitioningBytes = wire.Partitioning{Kind: wire.PartitioningMessagesKey, Key: make([]byte, 255)}.EncodedLen()

// messages reads the array of messages into bb.
func (s *sendScanner) messages(bb *wire.BatchBuilder, ts uint64) bool {
	if !s.consume('[') {
		return false
	}
	if s.consume(']') {
		return true
	}
	scratch := sendScratchPool.Get().(*sendScratch)
	defer sendScratchPool.Put(scratch)
	for {
		if !s.message(bb, ts, scratch) {
			return false
		}
		if s.consume(']') {
			return true
		}
		if !s.consume(',') {
			return false
		}
	}
}

func (s *sendScanner) skipSpace() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// consume skips white space and then c, if c is next.
func (s *sendScanner) consume(c byte) bool {
	s.skipSpace()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *sendScanner) atEnd() bool {
	s.skipSpace()
	return s.i == len(s.b)
}

// str reads a string of printable ASCII without escapes and returns its contents.
func (s *sendScanner) str() ([]byte, bool) {
	if !s.consume('"') {
		return nil, false
	}
	start := s.i
	for ; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return s.b[start : s.i-1], true
		case c < 0x20 || c >= 0x80 || c == '\\':
			return nil, false
		}
	}
	return nil, false
}

// base64Text reads a string meant to hold base64, at memchr's speed: it leaves to
// the base64 decoder the refusal of every byte outside the alphabet (an escape, a
// control character, non-ASCII) but the line breaks, which it would skip.
func (s *sendScanner) base64Text() ([]byte, bool) {
	if !s.consume('"') {
		return nil, false
	}
	n := bytes.IndexByte(s.b[s.i:], '"')
	if n < 0 {
		return nil, false
	}
	text := s.b[s.i : s.i+n]
	s.i += n + 1
	return text, bytes.IndexByte(text, '\n') < 0 && bytes.IndexByte(text, '\r') < 0
}

// key reads an object key and its colon.
func (s *sendScanner) key() ([]byte, bool) {
	k, ok := s.str()
	return k, ok && s.consume(':')
}

// memberKey reads the key of an object's next member: after a comma unless it is
// the first.
func (s *sendScanner) memberKey(first bool) ([]byte, bool) {
	if !first && !s.consume(',') {
		return nil, false
	}
	return s.key()
}

// null reads the literal null if it is next.
func (s *sendScanner) null() bool {
	s.skipSpace()
	if len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		return true
	}
	return false
}

// partitioning reads {"kind":..., "value":...}, either order, and converts it.
func (s *sendScanner) partitioning() (wire.Partitioning, bool) {
	var p partitioningJSON
	if !s.consume('{') {
		return wire.Partitioning{}, false
	}
	for n := 0; n < 2; n++ {
		k, ok := s.memberKey(n == 0)
		if !ok {
			return wire.Partitioning{}, false
		}
		v, ok := s.str()
		if !ok {
			return wire.Partitioning{}, false
		}
		text := string(v)
		switch {
		case string(k) == "kind" && p.Kind == nil:
			p.Kind = &text
		case string(k) == "value" && p.Value == nil:
			p.Value = &text
		default:
			return wire.Partitioning{}, false
		}
	}
	if !s.consume('}') {
		return wire.Partitioning{}, false
	}
	w, err := p.wire()
	return w, err == nil
}

const (
	sawID = 1 << iota
	sawPayload
	sawUserHeaders
)

// message reads one message object and appends it to bb.
func (s *sendScanner) message(bb *wire.BatchBuilder, ts uint64, scratch *sendScratch) bool {
	if !s.consume('{') {
		return false
	}
	var (
		id      messageID
		payload []byte
		headers []byte
		seen    int
	)
	for first := true; !s.consume('}'); first = false {
		k, ok := s.memberKey(first)
		if !ok {
			return false
		}
		switch string(k) {
		case "id":
			if seen&sawID != 0 || !s.id(&id) {
				return false
			}
			seen |= sawID
		case "payload":
			if seen&sawPayload != 0 {
				return false
			}
			seen |= sawPayload
			text, ok := s.base64Text()
			if !ok || len(text) == 0 {
				return false
			}
			if cap(scratch.payload) < base64.StdEncoding.DecodedLen(len(text)) {
				scratch.payload = make([]byte, base64.StdEncoding.DecodedLen(len(text)))
			}
			n, ok := decodeBase64To(scratch.payload[:cap(scratch.payload)], text)
			if !ok || n == 0 {
				return false
			}
			payload = scratch.payload[:n]
		case "user_headers":
			if seen&sawUserHeaders != 0 {
				return false
			}
			seen |= sawUserHeaders
			var array bool
			if headers, array, ok = s.userHeaders(scratch.headers[:0]); !ok {
				return false
			}
			scratch.headers = headers[:0]
			if array {
				headers = scratch.order.orderHeaders(headers)
			}
		default:
			return false
		}
	}
	if seen&sawPayload == 0 {
		return false
	}
	return bb.Append(id.orRandom(), ts, payload, headers) == nil
}

// id reads a message id: null, a u64 number, or a string the old decoder reads.
func (s *sendScanner) id(id *messageID) bool {
	if s.null() {
		return true
	}
	s.skipSpace()
	if s.i < len(s.b) && s.b[s.i] == '"' {
		start := s.i
		text, ok := s.str()
		if !ok {
			return false
		}
		if v, ok := idFromText(text); ok {
			id.v, id.set = v, true
			return true
		}
		return id.UnmarshalJSON(s.b[start:s.i]) == nil
	}
	start := s.i
	var n uint64
	for ; s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9'; s.i++ {
		d := uint64(s.b[s.i] - '0')
		if n > (math.MaxUint64-d)/10 {
			return false
		}
		n = n*10 + d
	}
	digits := s.i - start
	if digits == 0 || digits > 1 && s.b[start] == '0' {
		return false
	}
	// A fraction or an exponent would make it a number ParseUint refuses.
	if s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		return false
	}
	id.v, id.set = wire.Uint128{Lo: n}, true
	return true
}

// userHeaders reads a message's user headers into block (which it returns, grown):
// null, a string of base64, or an array of entries (array true) as userHeadersJSON
// reads them, in the order given.
func (s *sendScanner) userHeaders(block []byte) (_ []byte, array, ok bool) {
	if s.null() {
		return block, false, true
	}
	s.skipSpace()
	if s.i < len(s.b) && s.b[s.i] == '"' {
		text, ok := s.base64Text()
		if !ok {
			return nil, false, false
		}
		if len(text) == 0 {
			return block, false, true
		}
		if n := base64.StdEncoding.DecodedLen(len(text)); cap(block) < n {
			block = make([]byte, 0, n)
		}
		n, ok := decodeBase64To(block[:cap(block)], text)
		return block[:n], false, ok
	}
	if !s.consume('[') {
		return nil, false, false
	}
	if s.consume(']') {
		return block, true, true
	}
	for {
		if block, ok = s.headerEntry(block); !ok {
			return nil, false, false
		}
		if s.consume(']') {
			return block, true, true
		}
		if !s.consume(',') {
			return nil, false, false
		}
	}
}

// headerEntry reads {"key": field, "value": field}, either order, and appends the
// pair to block.
func (s *sendScanner) headerEntry(block []byte) ([]byte, bool) {
	if !s.consume('{') {
		return nil, false
	}
	var key, value headerFieldText
	for n := 0; n < 2; n++ {
		k, ok := s.memberKey(n == 0)
		if !ok {
			return nil, false
		}
		var f *headerFieldText
		switch string(k) {
		case "key":
			f = &key
		case "value":
			f = &value
		default:
			return nil, false
		}
		if f.kind != 0 || !s.headerField(f) {
			return nil, false
		}
	}
	if !s.consume('}') {
		return nil, false
	}
	// A field of 1..255 bytes is at most 340 characters of base64.
	var keyBytes, valueBytes [255]byte
	if len(key.text) > 340 || len(value.text) > 340 {
		return nil, false
	}
	kn, ok := decodeBase64To(keyBytes[:], key.text)
	if !ok {
		return nil, false
	}
	vn, ok := decodeBase64To(valueBytes[:], value.text)
	if !ok {
		return nil, false
	}
	block, err := wire.AppendTLV(block, key.kind, keyBytes[:kn], value.kind, valueBytes[:vn])
	return block, err == nil
}

// headerFieldText is a header field as read: its kind, and its value's base64.
type headerFieldText struct {
	kind wire.HeaderKind
	text []byte
}

// headerField reads {"kind": name, "value": base64}, either order.
func (s *sendScanner) headerField(f *headerFieldText) bool {
	if !s.consume('{') {
		return false
	}
	var sawText bool
	for n := 0; n < 2; n++ {
		k, ok := s.memberKey(n == 0)
		if !ok {
			return false
		}
		switch string(k) {
		case "kind":
			name, ok := s.str()
			if !ok || f.kind != 0 {
				return false
			}
			if f.kind, ok = headerKindsByName[string(name)]; !ok {
				return false
			}
		case "value":
			if sawText {
				return false
			}
			if f.text, ok = s.base64Text(); !ok {
				return false
			}
			sawText = true
		default:
			return false
		}
	}
	return s.consume('}')
}

// sendBodyPool holds the buffers send bodies are read into: a body is done with once
// the request is built from it.
var sendBodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBodyBytes keeps an outsized body's buffer from staying in the pool.
const maxPooledBodyBytes = 8 << 20

// readSendBody reads a SendMessages body (as readBody does) and builds the request.
func readSendBody(r *http.Request, stream, topic wire.Identifier, now time.Time) ([]byte, error) {
	buf := sendBodyPool.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledBodyBytes {
			buf.Reset()
			sendBodyPool.Put(buf)
		}
	}()
	buf.Reset()
	if r.ContentLength > 0 && r.ContentLength <= maxPooledBodyBytes {
		buf.Grow(int(r.ContentLength) + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(r.Body); err != nil {
		var overLimit *http.MaxBytesError
		if errors.As(err, &overLimit) {
			return nil, errBodyTooLarge
		}
		return nil, err
	}
	return buildSendBody(stream, topic, buf.Bytes(), now)
}

// idFromText reads the two usual id strings as messageID.UnmarshalJSON does,
// without allocating: decimal digits (a u128), or 32 hex digits with dashes
// anywhere (a UUID, big-endian). Any other text is left to UnmarshalJSON.
func idFromText(text []byte) (wire.Uint128, bool) {
	var v wire.Uint128
	decimal := len(text) > 0
	for _, c := range text {
		if c < '0' || c > '9' {
			decimal = false
			break
		}
		// v = v*10 + digit, refused past 128 bits.
		hiHi, hiLo := bits.Mul64(v.Hi, 10)
		loHi, loLo := bits.Mul64(v.Lo, 10)
		lo, carry := bits.Add64(loLo, uint64(c-'0'), 0)
		hi, overflow := bits.Add64(hiLo, loHi, carry)
		if hiHi != 0 || overflow != 0 {
			return wire.Uint128{}, false
		}
		v = wire.Uint128{Hi: hi, Lo: lo}
	}
	if decimal {
		return v, true
	}
	v, digits := wire.Uint128{}, 0
	for _, c := range text {
		var d byte
		switch {
		case c == '-':
			continue
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return wire.Uint128{}, false
		}
		if digits++; digits > 32 {
			return wire.Uint128{}, false
		}
		v = wire.Uint128{Hi: v.Hi<<4 | v.Lo>>60, Lo: v.Lo<<4 | uint64(d)}
	}
	return v, digits == 32
}
