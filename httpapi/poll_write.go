package httpapi

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"sync"

	"github.com/iggy-shard/iggy-shard/jsonview"
	"github.com/iggy-shard/iggy-shard/wire"
)

// A poll's answer (apache/iggy core/server/src/http/messages.rs), written straight
// from the wire reply, a pooled buffer at a time: the bytes encoding/json would write
// for the reply's struct (TestPolledReplyMatchesEncodingJSON holds them equal),
// without a value per message.

// pollFlushBytes is how much of an answer is gathered before it is written: an
// answer this short goes out in one write, with a Content-Length, as before.
const pollFlushBytes = 64 << 10

// pollReplyPool holds the buffers poll answers are gathered in.
var pollReplyPool = sync.Pool{New: func() any { b := make([]byte, 0, pollFlushBytes+8<<10); return &b }}

// maxPooledReplyBytes keeps a buffer grown by an outsized message out of the pool.
const maxPooledReplyBytes = 1 << 20

// writePolled answers a poll with p. budgetBytes (0 = none) bounds the answer
// counted after base64; truncate allows dropping the messages past it (a poll
// without auto-commit: the client polls them next).
func writePolled(w http.ResponseWriter, p *wire.PolledMessages, budgetBytes int, truncate bool) {
	bufp := pollReplyPool.Get().(*[]byte)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	out := encodePolled((*bufp)[:0], p, budgetBytes, truncate, func(b []byte) []byte {
		_, _ = w.Write(b) // a client gone is the server's to notice: the rest is discarded
		return b[:0]
	})
	_, _ = w.Write(out)
	if cap(out) <= maxPooledReplyBytes {
		*bufp = out[:0]
		pollReplyPool.Put(bufp)
	}
}

// pollReplyCount is how many of p's messages the answer holds: all of them, or those
// within the budget (at least one) when it may truncate.
func pollReplyCount(p *wire.PolledMessages, budgetBytes int, truncate bool) (count int) {
	used := 0
	for it := p.Messages(); it.Next(); {
		m := it.Message()
		cost := messageJSONOverheadBytes + base64.StdEncoding.EncodedLen(len(m.Payload())) +
			2*base64.StdEncoding.EncodedLen(len(m.UserHeaders()))
		if budgetBytes > 0 && truncate && count > 0 && used+cost > budgetBytes {
			break
		}
		used += cost
		count++
	}
	return count
}

// appendPolled appends the answer's JSON to b.
func appendPolled(b []byte, p *wire.PolledMessages, budgetBytes int, truncate bool) []byte {
	return encodePolled(b, p, budgetBytes, truncate, nil)
}

// encodePolled appends the answer's JSON to b, handing b to flush (when not nil)
// each time it holds pollFlushBytes, and continuing in what flush returns.
func encodePolled(b []byte, p *wire.PolledMessages, budgetBytes int, truncate bool, flush func([]byte) []byte) []byte {
	count := pollReplyCount(p, budgetBytes, truncate)
	b = append(b, `{"partition_id":`...)
	b = strconv.AppendUint(b, uint64(p.PartitionID), 10)
	b = append(b, `,"current_offset":`...)
	b = strconv.AppendUint(b, p.CurrentOffset, 10)
	b = append(b, `,"count":`...)
	b = strconv.AppendInt(b, int64(count), 10)
	b = append(b, `,"messages":[`...)
	var refsInline [headerRefsInline]uint32
	refs := refsInline[:0]
	it := p.Messages()
	for i := 0; i < count && it.Next(); i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b, refs = appendPolledMessage(b, it.Message(), refs)
		if flush != nil && len(b) >= pollFlushBytes {
			b = flush(b)
		}
	}
	return append(b, "]}"...)
}

// appendPolledMessage appends m's JSON; refs is appendUserHeaders' scratch.
func appendPolledMessage(b []byte, m wire.PolledMessage, refs []uint32) ([]byte, []uint32) {
	payload, headers := m.Payload(), m.UserHeaders()
	id := m.ID()
	b = append(b, `{"header":{"checksum":`...)
	b = strconv.AppendUint(b, m.Checksum(), 10)
	b = append(b, `,"id":`...)
	b = jsonview.AppendU128(b, id)
	b = append(b, `,"offset":`...)
	b = strconv.AppendUint(b, m.Offset, 10)
	b = append(b, `,"timestamp":`...)
	b = strconv.AppendUint(b, m.Timestamp, 10)
	b = append(b, `,"origin_timestamp":`...)
	b = strconv.AppendUint(b, m.OriginTimestamp, 10)
	b = append(b, `,"user_headers_length":`...)
	b = strconv.AppendUint(b, uint64(len(headers)), 10)
	b = append(b, `,"payload_length":`...)
	b = strconv.AppendUint(b, uint64(len(payload)), 10)
	b = append(b, `,"reserved":0},"payload":"`...)
	b = appendBase64(b, payload)
	b = append(b, `","user_headers":`...)
	b, refs = appendUserHeaders(b, headers, refs)
	return append(b, '}'), refs
}
