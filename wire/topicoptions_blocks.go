package wire

import (
	"bytes"
	"math"
	"slices"
)

// A topic's options blocks: CreateTopic and UpdateTopic admission of a client's
// block (each entry parsed as topicoptions_values.go does), the explicit and derived
// blocks a created or updated topic stores, and its effective values read back from
// them.

// CreateTopicOptions is what CreateTopic admission resolves from the client's block.
type CreateTopicOptions struct {
	Effective TopicOptions
	// Explicit holds the keys the client effectively set (server-default sentinels
	// dropped); every other key is derived.
	Explicit TopicOptionSet
}

// ResolveCreateTopicOptions runs CreateTopic admission over its options block and
// partition count as the reference admits it (apache/iggy core/server/src/dispatch.rs,
// core/metadata/src/impls/metadata.rs), first failure wins:
//
//  1. the block's structure (ValidateOptions): ErrInvalidCommand;
//  2. every entry in block order: ErrUnsupportedOptionKey or ErrInvalidOptionValue;
//  3. an explicit segment_size off its bounds or 512-byte grid: ErrInvalidOptionValue;
//  4. preallocation above 64 GiB (segment_size × partitions): ErrInvalidOptionValue;
//  5. more than 1000 partitions: ErrTooManyPartitions;
//  6. an explicit max_topic_size below the segment size: ErrInvalidTopicSize.
func ResolveCreateTopicOptions(block []byte, partitionsCount uint32) (CreateTopicOptions, error) {
	if _, err := ValidateOptions(block); err != nil {
		return CreateTopicOptions{}, err
	}
	r := CreateTopicOptions{Effective: DefaultTopicOptions()}
	it := NewTLVIterator(block)
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		v, err := ParseTopicOption(e.Key, e.ValueKind, e.Value)
		if err != nil {
			return CreateTopicOptions{}, err
		}
		if !v.ServerDefault {
			v.set(&r.Effective)
			r.Explicit.add(v.Key)
		}
	}
	o := &r.Effective
	if r.Explicit.Has(TopicOptionSegmentSize) && !validSegmentSize(o.SegmentSizeBytes) {
		return CreateTopicOptions{}, ErrInvalidOptionValue
	}
	if o.PreallocateSegments && saturatingMul(o.SegmentSizeBytes, uint64(partitionsCount)) > TopicPreallocatedBytesMax {
		return CreateTopicOptions{}, ErrInvalidOptionValue
	}
	if partitionsCount > TopicPartitionsCountMax {
		return CreateTopicOptions{}, ErrTooManyPartitions
	}
	if r.Explicit.Has(TopicOptionMaxTopicSize) && o.MaxTopicSizeBytes < o.SegmentSizeBytes {
		return CreateTopicOptions{}, ErrInvalidTopicSize
	}
	return r, nil
}

func validSegmentSize(v uint64) bool {
	return v >= TopicSegmentSizeBytesMin && v <= TopicSegmentSizeBytesMax && v%topicSegmentSizeAlignmentBytes == 0
}

func saturatingMul(a, b uint64) uint64 {
	if a != 0 && b > math.MaxUint64/a {
		return math.MaxUint64
	}
	return a * b
}

// AppendExplicitBlock encodes the keys the client set, in canonical kinds, sorted by
// key: the explicit block of the created topic (without a length prefix).
func (c *CreateTopicOptions) AppendExplicitBlock(b []byte) []byte {
	for _, k := range topicOptionsByKey {
		if c.Explicit.Has(k) {
			b = appendCanonicalOption(b, k, &c.Effective)
		}
	}
	return b
}

// AppendDerivedBlock encodes every other key at its default, sorted by key: the
// derived block of the created topic (without a length prefix).
func (c *CreateTopicOptions) AppendDerivedBlock(b []byte) []byte {
	for _, k := range topicOptionsByKey {
		if !c.Explicit.Has(k) {
			b = appendCanonicalOption(b, k, &c.Effective)
		}
	}
	return b
}

// appendCanonicalOption writes key k with its value from o in the canonical kind.
func appendCanonicalOption(b []byte, k TopicOptionKey, o *TopicOptions) []byte {
	spec := &topicOptionSpecs[k]
	b = appendTLVField(b, HeaderString, len(spec.Key))
	b = append(b, spec.Key...)
	switch k {
	case TopicOptionCompressionAlgorithm:
		name := "none"
		if o.CompressionAlgorithm == TopicCompressionGzip {
			name = "gzip"
		}
		b = appendTLVField(b, HeaderString, len(name))
		return append(b, name...)
	case TopicOptionMessageExpiry:
		return appendU64Option(b, o.MessageExpiryMicros)
	case TopicOptionMaxTopicSize:
		return appendU64Option(b, o.MaxTopicSizeBytes)
	case TopicOptionSegmentSize:
		return appendU64Option(b, o.SegmentSizeBytes)
	case TopicOptionSizeOfMessagesRequiredToSave:
		return appendU64Option(b, o.SizeOfMessagesRequiredToSaveBytes)
	case TopicOptionMessagesRequiredToSave:
		b = appendTLVField(b, HeaderUint32, 4)
		return appendU32(b, o.MessagesRequiredToSave)
	case TopicOptionEnforceFsync:
		return appendBoolOption(b, o.EnforceFsync)
	case TopicOptionPreallocateSegments:
		return appendBoolOption(b, o.PreallocateSegments)
	}
	panic("wire: unknown topic option key")
}

func appendU64Option(b []byte, v uint64) []byte {
	return appendU64(appendTLVField(b, HeaderUint64, 8), v)
}

func appendBoolOption(b []byte, v bool) []byte {
	return appendFlagByte(appendTLVField(b, HeaderBool, 1), v)
}

// TopicUpdate is a checked UpdateTopic options block.
type TopicUpdate struct {
	block  []byte
	values [3]TopicOptionValue
	count  int
}

// CheckTopicUpdate runs UpdateTopic admission over its options block against the
// topic's current segment size ("Create-only vs updatable" in
// iggy.apache.org/docs/server/topic-options): ErrInvalidCommand for a malformed block,
// ErrUnsupportedOptionKey for a key outside the catalog or not updatable,
// ErrInvalidOptionValue for a bad value, ErrInvalidTopicSize for a max_topic_size below
// the segment size. The result aliases block.
func CheckTopicUpdate(block []byte, segmentSizeBytes uint64) (TopicUpdate, error) {
	if _, err := ValidateOptions(block); err != nil {
		return TopicUpdate{}, err
	}
	u := TopicUpdate{block: block}
	it := NewTLVIterator(block)
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		k, known := LookupTopicOption(e.Key)
		if !known || !topicOptionSpecs[k].Updatable {
			return TopicUpdate{}, ErrUnsupportedOptionKey
		}
		v, err := ParseTopicOption(e.Key, e.ValueKind, e.Value)
		if err != nil {
			return TopicUpdate{}, err
		}
		// ValidateOptions refused duplicates, so at most the three updatable keys.
		u.values[u.count] = v
		u.count++
	}
	for _, v := range u.values[:u.count] {
		if v.Key == TopicOptionMaxTopicSize && !v.ServerDefault && v.Uint < segmentSizeBytes {
			return TopicUpdate{}, ErrInvalidTopicSize
		}
	}
	return u, nil
}

// ApplyTo updates a topic's effective values; a server-default sentinel leaves its
// field unchanged.
func (u *TopicUpdate) ApplyTo(o *TopicOptions) {
	for _, v := range u.values[:u.count] {
		v.set(o)
	}
}

// AppendBlocks writes the topic's new explicit and derived blocks after the update:
// the updated keys move into (or stay in) the explicit block with the client's kind
// and bytes verbatim, and leave the derived block. Every other entry of the old
// blocks is kept; the explicit block stays sorted by key.
func (u *TopicUpdate) AppendBlocks(explicitDst, derivedDst, oldExplicit, oldDerived []byte) (explicit, derived []byte) {
	var updates [3]TLVEntry
	n := 0
	it := NewTLVIterator(u.block)
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		updates[n] = e
		n++
	}
	pending := updates[:n]
	slices.SortFunc(pending, func(a, b TLVEntry) int { return bytes.Compare(a.Key, b.Key) })
	updated := func(key []byte) bool {
		for i := range n {
			if bytes.Equal(updates[i].Key, key) {
				return true
			}
		}
		return false
	}

	explicit = explicitDst
	old := NewTLVIterator(oldExplicit)
	for e, ok := old.Next(); ok; e, ok = old.Next() {
		for len(pending) > 0 && bytes.Compare(pending[0].Key, e.Key) < 0 {
			explicit = appendTLVEntry(explicit, pending[0])
			pending = pending[1:]
		}
		if !updated(e.Key) {
			explicit = appendTLVEntry(explicit, e)
		}
	}
	for _, e := range pending {
		explicit = appendTLVEntry(explicit, e)
	}

	derived = derivedDst
	old = NewTLVIterator(oldDerived)
	for e, ok := old.Next(); ok; e, ok = old.Next() {
		if !updated(e.Key) {
			derived = appendTLVEntry(derived, e)
		}
	}
	return explicit, derived
}

func appendTLVEntry(b []byte, e TLVEntry) []byte {
	b = appendTLVField(b, e.KeyKind, len(e.Key))
	b = append(b, e.Key...)
	b = appendTLVField(b, e.ValueKind, len(e.Value))
	return append(b, e.Value...)
}

// TopicOptionsFromBlocks reads a stored topic's effective values from its derived
// and explicit blocks (explicit wins), starting from the defaults. Entries this
// build cannot interpret are skipped, as a replica applying a committed block must.
// A server-default sentinel stored by an update reads as the default: the TopicHeader
// fixed fields, not the blocks, are authoritative for the three updatable keys.
func TopicOptionsFromBlocks(explicit, derived []byte) TopicOptions {
	o := DefaultTopicOptions()
	for _, block := range [2][]byte{derived, explicit} {
		it := NewTLVIterator(block)
		for e, ok := it.Next(); ok; e, ok = it.Next() {
			if v, err := ParseTopicOption(e.Key, e.ValueKind, e.Value); err == nil {
				v.set(&o)
			}
		}
	}
	return o
}
