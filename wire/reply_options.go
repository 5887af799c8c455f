package wire

// OptionDescriptor is one entry of the DescribeOptions reply (apache/iggy
// core/binary_protocol/src/responses/system/describe_options.rs):
//
//	[key: Name][kind u8][default_len u32][default][description_len u32][description UTF-8]
//
// Kind is the key's canonical header-kind code, and Default is encoded in that kind
// (empty when the key has no default).
type OptionDescriptor struct {
	Key         []byte
	Kind        HeaderKind
	Default     []byte
	Description []byte
}

const optionDescriptorMinBytes = 1 + 1 + 1 + 4 + 4

// EncodedLen is the exact number of bytes Append writes.
func (o *OptionDescriptor) EncodedLen() int {
	return 1 + len(o.Key) + 1 + 4 + len(o.Default) + 4 + len(o.Description)
}

// Append encodes o onto b.
func (o *OptionDescriptor) Append(b []byte) []byte {
	b = appendReplyName(b, o.Key)
	b = appendU8(b, uint8(o.Kind))
	b = appendBlock32(b, o.Default)
	return appendBlock32(b, o.Description)
}

func (o *OptionDescriptor) decodeFrom(d *decoder) {
	o.Key = d.name()
	o.Kind = HeaderKind(d.u8())
	o.Default = d.block32()
	o.Description = d.str32()
}

// Decode reads a body that holds exactly one OptionDescriptor.
func (o *OptionDescriptor) Decode(body []byte) error { return decodeExact(o, body) }

// IterOptionDescriptors walks a DescribeOptions body, [count u32][OptionDescriptor]*.
// The stream and user scopes answer with a count of 0.
func IterOptionDescriptors(body []byte) ListIter[OptionDescriptor, *OptionDescriptor] {
	d := newDecoder(body)
	count := d.u32()
	return newCountedIter[OptionDescriptor](d, count, optionDescriptorMinBytes)
}

// AppendOptionDescriptors decodes a DescribeOptions body onto dst.
func AppendOptionDescriptors(dst []OptionDescriptor, body []byte) ([]OptionDescriptor, error) {
	return collect(dst, IterOptionDescriptors(body))
}

// AppendDescribeOptionsReply encodes a DescribeOptions body from descriptors.
func AppendDescribeOptionsReply(b []byte, descriptors []OptionDescriptor) []byte {
	b = appendU32(b, uint32(len(descriptors)))
	for i := range descriptors {
		b = descriptors[i].Append(b)
	}
	return b
}
