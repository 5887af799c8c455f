package wire

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

// decodeAll runs one decoder step over b and requires exact consumption, so the
// shared encodings are tested the way request bodies use them.
func decodeAll[T any](b []byte, step func(*decoder) T) (T, error) {
	d := newDecoder(b)
	v := step(&d)
	return v, d.end()
}

func TestIdentifierGolden(t *testing.T) {
	tests := []struct {
		file string
		id   Identifier
	}{
		{"requests/identifier_numeric.hex", NumericIdentifier(7)},
		{"requests/identifier_string.hex", StringIdentifier([]byte("orders"))},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := tt.id.Append(nil)
			if err != nil {
				t.Fatalf("Append: %v", err)
			}
			checkGolden(t, tt.file, got)
			if len(got) != tt.id.EncodedLen() {
				t.Errorf("EncodedLen = %d, wrote %d", tt.id.EncodedLen(), len(got))
			}
			golden := readGolden(t, tt.file)
			dec, n, err := DecodeIdentifier(golden)
			if err != nil || n != len(golden) || !dec.Equal(tt.id) {
				t.Fatalf("DecodeIdentifier = %#v, %d, %v; want %#v, %d", dec, n, err, tt.id, len(golden))
			}
		})
	}
}

func TestIdentifierDecodeMalformed(t *testing.T) {
	tests := []struct {
		name string
		body []byte
	}{
		{"empty", nil},
		{"kind only", []byte{1}},
		{"kind zero", []byte{0, 4, 1, 0, 0, 0}},
		{"kind three", []byte{3, 4, 1, 0, 0, 0}},
		{"numeric length 3", []byte{1, 3, 1, 0, 0}},
		{"numeric length 5", []byte{1, 5, 1, 0, 0, 0, 0}},
		{"numeric truncated", []byte{1, 4, 1, 0, 0}},
		{"string length 0", []byte{2, 0}},
		{"string truncated", []byte{2, 3, 'a', 'b'}},
		{"string not utf-8", []byte{2, 2, 0xff, 0xfe}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := DecodeIdentifier(tt.body)
			if !errors.Is(err, ErrInvalidCommand) {
				t.Fatalf("err = %v, want %v", err, ErrInvalidCommand)
			}
		})
	}
}

func TestIdentifierAppendRefuses(t *testing.T) {
	tests := []struct {
		name string
		id   Identifier
	}{
		{"zero kind", Identifier{}},
		{"empty string", StringIdentifier(nil)},
		{"long string", StringIdentifier(bytes.Repeat([]byte{'a'}, 256))},
		{"not utf-8", StringIdentifier([]byte{0xc0})},
		{"kind 9", Identifier{Kind: 9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix := []byte{0xaa}
			got, err := tt.id.Append(prefix)
			if !errors.Is(err, ErrInvalidIdentifier) {
				t.Fatalf("err = %v, want %v", err, ErrInvalidIdentifier)
			}
			if !bytes.Equal(got, prefix) {
				t.Fatalf("Append wrote % x on failure", got)
			}
		})
	}
	long := StringIdentifier(bytes.Repeat([]byte{'a'}, 255))
	if b, err := long.Append(nil); err != nil || len(b) != 257 {
		t.Fatalf("255-byte identifier: %d bytes, %v", len(b), err)
	}
}

func TestNameGolden(t *testing.T) {
	got, err := AppendName(nil, []byte("iggy"))
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "requests/name.hex", got)
	name, err := decodeAll(readGolden(t, "requests/name.hex"), (*decoder).name)
	if err != nil || string(name) != "iggy" {
		t.Fatalf("name = %q, %v", name, err)
	}
	for _, bad := range [][]byte{{0}, {2, 'a'}, {1, 0xff}, {}} {
		if _, err := decodeAll(bad, (*decoder).name); !errors.Is(err, ErrInvalidCommand) {
			t.Errorf("name(% x) err = %v, want %v", bad, err, ErrInvalidCommand)
		}
	}
	for _, bad := range [][]byte{nil, bytes.Repeat([]byte{'x'}, 256), {0xff}} {
		if _, err := AppendName(nil, bad); !errors.Is(err, ErrInvalidCommand) {
			t.Errorf("AppendName(%d bytes) err = %v", len(bad), err)
		}
	}
}

func TestConsumerGolden(t *testing.T) {
	tests := []struct {
		file string
		c    Consumer
	}{
		{"requests/consumer_single.hex", Consumer{Kind: ConsumerSingle, ID: NumericIdentifier(42)}},
		{"requests/consumer_group.hex", Consumer{Kind: ConsumerGroup, ID: StringIdentifier([]byte("g1"))}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := tt.c.Append(nil)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, tt.file, got)
			if len(got) != tt.c.EncodedLen() {
				t.Errorf("EncodedLen = %d, wrote %d", tt.c.EncodedLen(), len(got))
			}
			dec, err := decodeAll(readGolden(t, tt.file), (*decoder).consumer)
			if err != nil || dec.Kind != tt.c.Kind || !dec.ID.Equal(tt.c.ID) {
				t.Fatalf("consumer = %+v, %v", dec, err)
			}
		})
	}
	for _, kind := range []byte{0, 3, 255} {
		if _, err := decodeAll([]byte{kind, 1, 4, 0, 0, 0, 0}, (*decoder).consumer); !errors.Is(err, ErrInvalidCommand) {
			t.Errorf("consumer kind %d: err = %v", kind, err)
		}
	}
	if _, err := (Consumer{Kind: 3, ID: NumericIdentifier(1)}).Append(nil); !errors.Is(err, ErrInvalidCommand) {
		t.Errorf("Append kind 3: err = %v", err)
	}
}

func TestOptionalPartition(t *testing.T) {
	tests := []struct {
		name string
		body []byte
		want OptionalPartition
	}{
		{"unset, zero bytes", []byte{0, 0, 0, 0, 0}, OptionalPartition{}},
		{"set", []byte{1, 9, 0, 0, 0}, SomePartition(9)},
		{"set zero", []byte{1, 0, 0, 0, 0}, SomePartition(0)},
		// Only 1 means set; the reference server ignores the value otherwise.
		{"flag 0 with value", []byte{0, 9, 0, 0, 0}, OptionalPartition{}},
		{"flag 2", []byte{2, 9, 0, 0, 0}, OptionalPartition{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeAll(tt.body, (*decoder).optionalPartition)
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
	for n := 0; n < OptionalPartitionSizeBytes; n++ {
		if _, err := decodeAll(make([]byte, n), (*decoder).optionalPartition); !errors.Is(err, ErrInvalidCommand) {
			t.Errorf("%d bytes: err = %v", n, err)
		}
	}
	var e encoder
	e.optionalPartition(OptionalPartition{ID: 77}) // unset: value bytes are zero
	e.optionalPartition(SomePartition(0x01020304))
	if want := []byte{0, 0, 0, 0, 0, 1, 4, 3, 2, 1}; !bytes.Equal(e.b, want) {
		t.Fatalf("encoded % x, want % x", e.b, want)
	}
}

func TestPartitioningGolden(t *testing.T) {
	tests := []struct {
		file string
		p    Partitioning
	}{
		{"requests/partitioning_balanced.hex", Partitioning{Kind: PartitioningBalanced}},
		{"requests/partitioning_partition_id.hex", Partitioning{Kind: PartitioningPartitionID, PartitionID: 3}},
		{"requests/partitioning_messages_key.hex", Partitioning{Kind: PartitioningMessagesKey, Key: []byte("user-1")}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := tt.p.Append(nil)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, tt.file, got)
			if len(got) != tt.p.EncodedLen() {
				t.Errorf("EncodedLen = %d, wrote %d", tt.p.EncodedLen(), len(got))
			}
			golden := readGolden(t, tt.file)
			dec, n, err := DecodePartitioning(golden)
			if err != nil || n != len(golden) || dec.Kind != tt.p.Kind || dec.PartitionID != tt.p.PartitionID || !bytes.Equal(dec.Key, tt.p.Key) {
				t.Fatalf("DecodePartitioning = %+v, %d, %v", dec, n, err)
			}
		})
	}
	malformed := [][]byte{
		{}, {1}, {1, 1, 0}, {2, 3, 0, 0, 0}, {2, 5, 0, 0, 0, 0, 0}, {2, 4, 0, 0},
		{3, 0}, {3, 2, 'a'}, {0, 0}, {4, 0},
	}
	for _, b := range malformed {
		if _, _, err := DecodePartitioning(b); !errors.Is(err, ErrInvalidCommand) {
			t.Errorf("DecodePartitioning(% x) err = %v", b, err)
		}
	}
	if _, err := (Partitioning{Kind: PartitioningMessagesKey}).Append(nil); !errors.Is(err, ErrInvalidKeyValueLength) {
		t.Errorf("empty key: err = %v", err)
	}
	if _, err := (Partitioning{Kind: PartitioningMessagesKey, Key: make([]byte, 256)}).Append(nil); !errors.Is(err, ErrInvalidKeyValueLength) {
		t.Errorf("256-byte key: err = %v", err)
	}
	if _, err := (Partitioning{Kind: 9}).Append(nil); !errors.Is(err, ErrInvalidCommand) {
		t.Errorf("kind 9: err = %v", err)
	}
}

func TestPollingStrategyGolden(t *testing.T) {
	tests := []struct {
		file string
		s    PollingStrategy
	}{
		{"requests/polling_offset.hex", PollingStrategy{Kind: PollingOffset, Value: 1000}},
		{"requests/polling_next.hex", PollingStrategy{Kind: PollingNext}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := tt.s.Append(nil)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, tt.file, got)
			if len(got) != PollingStrategySizeBytes {
				t.Errorf("wrote %d bytes", len(got))
			}
			dec, err := decodeAll(readGolden(t, tt.file), (*decoder).pollingStrategy)
			if err != nil || dec != tt.s {
				t.Fatalf("got %+v, %v", dec, err)
			}
		})
	}
	for _, kind := range []byte{0, 6, 255} {
		body := append([]byte{kind}, make([]byte, 8)...)
		if _, err := decodeAll(body, (*decoder).pollingStrategy); !errors.Is(err, ErrInvalidCommand) {
			t.Errorf("kind %d: err = %v", kind, err)
		}
		if _, err := (PollingStrategy{Kind: PollingKind(kind)}).Append(nil); !errors.Is(err, ErrInvalidCommand) {
			t.Errorf("Append kind %d: err = %v", kind, err)
		}
	}
	if _, err := decodeAll([]byte{1, 0, 0, 0, 0, 0, 0, 0}, (*decoder).pollingStrategy); !errors.Is(err, ErrInvalidCommand) {
		t.Errorf("8 bytes: err = %v", err)
	}
}

func TestKindStrings(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{HeaderRaw.String(), "raw"},
		{HeaderString.String(), "string"},
		{HeaderFloat64.String(), "float64"},
		{HeaderKind(0).String(), "HeaderKind(0)"},
		{HeaderKind(16).String(), "HeaderKind(16)"},
		{IdentifierNumeric.String(), "numeric"},
		{IdentifierKind(7).String(), "IdentifierKind(7)"},
		{ConsumerGroup.String(), "consumer_group"},
		{PartitioningMessagesKey.String(), "messages_key"},
		{PollingTimestamp.String(), "timestamp"},
		{PollingKind(0).String(), "PollingKind(0)"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
	for k := HeaderKind(1); k <= 15; k++ {
		if !k.Known() || strings.HasPrefix(k.String(), "HeaderKind(") {
			t.Errorf("kind %d should be known and named", k)
		}
	}
	fixed := map[HeaderKind]int{
		HeaderRaw: 0, HeaderString: 0, HeaderBool: 1, HeaderInt8: 1, HeaderUint8: 1,
		HeaderInt16: 2, HeaderUint16: 2, HeaderInt32: 4, HeaderUint32: 4, HeaderFloat32: 4,
		HeaderInt64: 8, HeaderUint64: 8, HeaderFloat64: 8, HeaderInt128: 16, HeaderUint128: 16,
		HeaderKind(200): 0,
	}
	for k, want := range fixed {
		if got := k.FixedSizeBytes(); got != want {
			t.Errorf("%v.FixedSizeBytes() = %d, want %d", k, got, want)
		}
	}
}

// randomName returns 1..maxLen bytes of valid UTF-8 (ASCII plus an occasional
// multi-byte rune, so length and rune boundaries are both exercised).
func randomName(r *rand.Rand, maxLen int) []byte {
	n := 1 + r.IntN(maxLen)
	b := make([]byte, 0, n)
	for len(b) < n {
		if n-len(b) >= 3 && r.IntN(8) == 0 {
			b = append(b, "€"...)
			continue
		}
		b = append(b, byte('a'+r.IntN(26)))
	}
	return b
}

func randomIdentifier(r *rand.Rand) Identifier {
	if r.IntN(2) == 0 {
		return NumericIdentifier(r.Uint32())
	}
	return StringIdentifier(randomName(r, 255))
}

func TestSharedEncodingsRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		id := randomIdentifier(r)
		c := Consumer{Kind: ConsumerKind(1 + r.IntN(2)), ID: id}
		p := Partitioning{Kind: PartitioningKind(1 + r.IntN(3))}
		switch p.Kind {
		case PartitioningPartitionID:
			p.PartitionID = r.Uint32()
		case PartitioningMessagesKey:
			p.Key = randomName(r, 255)
		}
		s := PollingStrategy{Kind: PollingKind(1 + r.IntN(5)), Value: r.Uint64()}
		op := OptionalPartition{}
		if r.IntN(2) == 0 {
			op = SomePartition(r.Uint32())
		}

		e := encoder{}
		e.identifier(id)
		e.consumer(c)
		e.partitioning(p)
		e.pollingStrategy(s)
		e.optionalPartition(op)
		if e.err != nil {
			t.Fatalf("seed iteration %d: encode: %v", i, e.err)
		}
		d := newDecoder(e.b)
		gotID := d.identifier()
		gotC := d.consumer()
		gotP := d.partitioning()
		gotS := d.pollingStrategy()
		gotOP := d.optionalPartition()
		if err := d.end(); err != nil {
			t.Fatalf("iteration %d: decode: %v", i, err)
		}
		if !gotID.Equal(id) || gotC.Kind != c.Kind || !gotC.ID.Equal(c.ID) ||
			gotP.Kind != p.Kind || gotP.PartitionID != p.PartitionID || !bytes.Equal(gotP.Key, p.Key) ||
			gotS != s || gotOP != op {
			t.Fatalf("iteration %d: round trip mismatch", i)
		}
		// Every proper prefix of a valid encoding is a short body.
		cut := r.IntN(len(e.b))
		d = newDecoder(e.b[:cut])
		d.identifier()
		d.consumer()
		d.partitioning()
		d.pollingStrategy()
		d.optionalPartition()
		if err := d.end(); !errors.Is(err, ErrInvalidCommand) {
			t.Fatalf("iteration %d: prefix of %d/%d bytes decoded: %v", i, cut, len(e.b), err)
		}
	}
}

// FuzzSharedEncodings checks, for each shared encoding, that whatever decodes
// re-encodes to exactly the bytes it was read from.
func FuzzSharedEncodings(f *testing.F) {
	for _, name := range []string{
		"identifier_numeric.hex", "identifier_string.hex", "consumer_single.hex", "consumer_group.hex",
		"partitioning_balanced.hex", "partitioning_partition_id.hex", "partitioning_messages_key.hex",
		"polling_offset.hex", "polling_next.hex", "name.hex",
	} {
		f.Add(readGolden(f, "requests/"+name))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		check := func(what string, n int, re []byte, err error) {
			t.Helper()
			if err != nil || !bytes.Equal(re, b[:n]) {
				t.Fatalf("%s read from % x re-encodes to % x, %v", what, b[:n], re, err)
			}
		}
		if id, n, err := DecodeIdentifier(b); err == nil {
			re, aerr := id.Append(nil)
			check("identifier", n, re, aerr)
		}
		if p, n, err := DecodePartitioning(b); err == nil {
			re, aerr := p.Append(nil)
			check("partitioning", n, re, aerr)
		}
		d := newDecoder(b)
		if c := d.consumer(); d.err == nil {
			re, aerr := c.Append(nil)
			check("consumer", d.off, re, aerr)
		}
		d = newDecoder(b)
		if s := d.pollingStrategy(); d.err == nil {
			re, aerr := s.Append(nil)
			check("polling strategy", d.off, re, aerr)
		}
		d = newDecoder(b)
		if name := d.name(); d.err == nil {
			re, aerr := AppendName(nil, name)
			check("name", d.off, re, aerr)
		}
	})
}
