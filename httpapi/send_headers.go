package httpapi

import (
	"slices"

	"github.com/iggy-shard/iggy-shard/jsonview"
	"github.com/iggy-shard/iggy-shard/wire"
)

// A message's user headers sent as an array of entries are stored as the reference
// stores them: it reads the array into a BTreeMap before encoding it (apache/iggy
// core/common/src/http/messages/send_messages.rs, its Deserialize), so the block
// holds the entries ordered by key (kind code, then bytes), a key given twice once
// with its last value. The stored bytes, their length and the message's checksum
// are then the reference's, and a consumer over TCP reads no key twice. Headers sent
// as a base64 string are stored as given, as there.

// headerOrder is the scratch orderHeaders works in, reused from message to message.
type headerOrder struct {
	entries []wire.TLVEntry
	block   []byte
}

// orderHeaders returns the valid block with its entries in the reference's order:
// block itself when they already are (keys strictly ascending, as one entry's are),
// else a block built in o's scratch, which the next call overwrites.
func (o *headerOrder) orderHeaders(block []byte) []byte {
	o.entries = o.entries[:0]
	ordered := true
	it := wire.NewTLVIterator(block)
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		if n := len(o.entries); n > 0 && jsonview.CompareHeaderKeys(o.entries[n-1], e) >= 0 {
			ordered = false
		}
		o.entries = append(o.entries, e)
	}
	if it.Err() != nil {
		panic("httpapi: an array of user headers encoded into an invalid block: " + it.Err().Error())
	}
	if ordered {
		return block
	}
	slices.SortStableFunc(o.entries, jsonview.CompareHeaderKeys)
	out := o.block[:0]
	for i, e := range o.entries {
		if i+1 < len(o.entries) && jsonview.CompareHeaderKeys(e, o.entries[i+1]) == 0 {
			continue // the last of a key's entries is its value
		}
		var err error
		if out, err = wire.AppendTLV(out, e.KeyKind, e.Key, e.ValueKind, e.Value); err != nil {
			panic("httpapi: a user header field valid when sent is refused when ordered: " + err.Error())
		}
	}
	o.block = out
	return out
}
