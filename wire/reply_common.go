package wire

import (
	"slices"
	"unicode/utf8"
)

// Reply bodies: the typed payload a server writes after the 256-byte reply header
// (and, for result-framed operations, after the result section of result.go).
//
// Every element type has
//
//	Append(b []byte) []byte   encode onto a caller-owned slice
//	EncodedLen() int          the exact size Append writes
//
// and is read from untrusted bytes in one of three ways:
//
//   - a whole body: (*T).Decode(body) error, which must consume the body exactly;
//   - a list, one element at a time without allocating: Iter*(body) returns a
//     ListIter whose Value is overwritten by each Next;
//   - a list into a caller slice: Append*(dst, body) ([]T, error), which reuses
//     dst's capacity.
//
// Decoded byte fields (names, addresses, option blocks) alias the body: copy them
// before the body's buffer is reused. Decoders check every count read from the wire
// against the bytes that remain before they size a slice, so a hostile body cannot
// make them allocate more than a small multiple of its own length.
//
// Which type reads which reply (* = after the result section of result.go):
//
//	1 Ping, 39 Logout, framed writes without payload   DecodeEmptyReply
//	10 GetStats                                        Stats
//	11 GetSnapshot                                     Snapshot
//	12 GetClusterMetadata                              ClusterMetadata, IterClusterNodes
//	13 DescribeOptions                                 IterOptionDescriptors, AppendOptionDescriptors
//	20 GetMe, 21 GetClient                             ClientDetails
//	22 GetClients                                      IterClients, AppendClients
//	31 GetUser, 33 CreateUser*                         UserDetails
//	32 GetUsers                                        IterUsers, AppendUsers
//	41 GetPersonalAccessTokens                         IterPersonalAccessTokens, AppendPersonalAccessTokens
//	42 CreatePersonalAccessToken*                      CreatedToken
//	120 GetConsumerOffset                              ConsumerOffset
//	200 GetStream, 202 CreateStream*                   StreamDetails
//	201 GetStreams                                     IterStreams, AppendStreams
//	300 GetTopic, 302 CreateTopic*                     TopicDetails
//	301 GetTopics                                      IterTopics, AppendTopics
//	600 GetConsumerGroup, 602 CreateConsumerGroup*     ConsumerGroupDetails
//	601 GetConsumerGroups                              IterConsumerGroups, AppendConsumerGroups
//	606 SyncConsumerGroup                              Assignment
//
// Login replies (40, 45) are LoginRegisterReply in login.go; PollMessages and
// SendMessages replies live in poll.go.
//
// Replies whose empty body means "not found" (GetStream, GetTopic, GetUser, ...)
// decode an empty body as the not-found error code the Go SDK reports for it, so a
// client can test errors.Is(err, ErrStreamIdNotFound) and the like.

// str32 reads a Str32, [len u32][UTF-8], possibly empty.
func (d *decoder) str32() []byte {
	b := d.block32()
	if b != nil && !utf8.Valid(b) {
		d.fail(ErrInvalidCommand)
		return nil
	}
	return b
}

// block32 reads [len u32][bytes]: an options block or a raw default value.
func (d *decoder) block32() []byte {
	n := d.u32()
	if d.err != nil {
		return nil
	}
	if uint64(n) > uint64(d.remaining()) {
		d.fail(ErrInvalidCommand)
		return nil
	}
	return d.take(int(n))
}

// countFits fails the decoder unless count elements of at least minSize bytes
// each can still fit in what remains; it guards every make() sized from the wire.
func (d *decoder) countFits(count uint32, minSize int) bool {
	if d.err != nil {
		return false
	}
	if uint64(count)*uint64(minSize) > uint64(d.remaining()) {
		d.fail(ErrInvalidCommand)
		return false
	}
	return true
}

// appendReplyName writes a Name. A reply carries names the server has already
// validated, so a length outside 1..255 is our bug, not the peer's.
func appendReplyName(b []byte, name []byte) []byte {
	if len(name) == 0 || len(name) > nameLengthMax {
		panic("wire: reply name length out of 1..255")
	}
	b = append(b, uint8(len(name)))
	return append(b, name...)
}

// appendBlock32 writes [len u32][bytes]; used for Str32 and option blocks.
func appendBlock32(b []byte, v []byte) []byte {
	b = appendU32(b, uint32(len(v)))
	return append(b, v...)
}

// replyElement is satisfied by a pointer to a reply element type. decodeFrom reads
// one element from the cursor, overwriting every field of the receiver.
type replyElement[T any] interface {
	*T
	decodeFrom(d *decoder)
}

// decodeElement calls v.decodeFrom(d) through a type switch rather than through the
// type parameter: a call through a generic method value makes escape analysis move
// the decoder (and the iterator holding it) to the heap, one allocation per list.
// The switch compiles to direct calls, so a ListIter stays on the caller's stack.
func decodeElement[T any, P replyElement[T]](d *decoder, v P) {
	switch e := any(v).(type) {
	case *StreamHeader:
		e.decodeFrom(d)
	case *TopicHeader:
		e.decodeFrom(d)
	case *PartitionInfo:
		e.decodeFrom(d)
	case *UserHeader:
		e.decodeFrom(d)
	case *ClientHeader:
		e.decodeFrom(d)
	case *PatEntry:
		e.decodeFrom(d)
	case *ConsumerGroupHeader:
		e.decodeFrom(d)
	case *ClusterNode:
		e.decodeFrom(d)
	case *OptionDescriptor:
		e.decodeFrom(d)
	case *CreatedToken:
		e.decodeFrom(d)
	case *ConsumerOffset:
		e.decodeFrom(d)
	default:
		panic("wire: decodeElement has no case for this element type")
	}
}

// ListIter walks the elements of a list reply one at a time. It never allocates:
// Value points at one element reused by every Next, whose byte fields alias the
// body.
//
//	it := wire.IterStreams(body)
//	for it.Next() {
//		h := it.Value()
//		...
//	}
//	if err := it.Err(); err != nil { ... }
type ListIter[T any, P replyElement[T]] struct {
	d decoder
	// left is how many elements a count-prefixed list still holds, or -1 for a list
	// that runs to the end of the body.
	left int64
	cur  T
}

func newUncountedIter[T any, P replyElement[T]](body []byte) ListIter[T, P] {
	return ListIter[T, P]{d: newDecoder(body), left: -1}
}

func newCountedIter[T any, P replyElement[T]](d decoder, count uint32, minSize int) ListIter[T, P] {
	d.countFits(count, minSize)
	return ListIter[T, P]{d: d, left: int64(count)}
}

// Next decodes the next element. It returns false at the end of the list or on
// the first malformed byte; Err tells the two apart.
func (it *ListIter[T, P]) Next() bool {
	if it.d.err != nil {
		return false
	}
	switch {
	case it.left == 0:
		it.d.end()
		return false
	case it.left < 0 && it.d.remaining() == 0:
		return false
	}
	decodeElement(&it.d, P(&it.cur))
	if it.d.err != nil {
		return false
	}
	if it.left > 0 {
		it.left--
	}
	return true
}

// Value is the element the last successful Next decoded.
func (it *ListIter[T, P]) Value() *T { return &it.cur }

// Err is the decoding error that stopped the iteration, or nil at a clean end.
func (it *ListIter[T, P]) Err() error { return it.d.err }

// collect appends every element of it to dst, each decoded straight into its own
// slot so that no two elements share memory. On error dst is returned unchanged.
func collect[T any, P replyElement[T]](dst []T, it ListIter[T, P]) ([]T, error) {
	start := len(dst)
	if it.d.err == nil && it.left > 0 {
		dst = slices.Grow(dst, int(it.left)) // bounded: newCountedIter checked the count
	}
	var zero T
	for it.d.err == nil {
		if it.left == 0 {
			it.d.end()
			break
		}
		if it.left < 0 && it.d.remaining() == 0 {
			break
		}
		dst = append(dst, zero)
		decodeElement(&it.d, P(&dst[len(dst)-1]))
		if it.left > 0 {
			it.left--
		}
	}
	if it.d.err != nil {
		clear(dst[start:])
		return dst[:start], it.d.err
	}
	return dst, nil
}

// decodeExact decodes one element that must fill body exactly.
func decodeExact[T any, P replyElement[T]](v P, body []byte) error {
	d := newDecoder(body)
	var tmp T
	decodeElement(&d, P(&tmp))
	if err := d.end(); err != nil {
		return err
	}
	*v = tmp
	return nil
}
