package wire

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// The DescribeOptions topic catalog, transcribed from the reference
// (topic_option_descriptors in apache/iggy core/server/src/responses.rs).
func TestTopicOptionsCatalogMatchesReference(t *testing.T) {
	want := []struct {
		key        string
		kind       HeaderKind
		defaultHex string
		updatable  bool
	}{
		{"compression_algorithm", 2, "6e6f6e65", true},
		{"message_expiry", 12, "ffffffffffffffff", true},
		{"max_topic_size", 12, "ffffffffffffffff", true},
		{"segment_size", 12, "0000004000000000", false},
		{"enforce_fsync", 3, "00", false},
		{"messages_required_to_save", 11, "00040000", false},
		{"size_of_messages_required_to_save", 12, "0000100000000000", false},
		{"preallocate_segments", 3, "00", false},
	}
	body := AppendTopicOptionsCatalogReply(nil)
	got, err := AppendOptionDescriptors(nil, body)
	if err != nil {
		t.Fatalf("decode catalog: %v", err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d descriptors, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if string(g.Key) != w.key || g.Kind != w.kind || hex.EncodeToString(g.Default) != w.defaultHex {
			t.Errorf("descriptor %d = %s kind %d default %x, want %s kind %d default %s",
				i, g.Key, g.Kind, g.Default, w.key, w.kind, w.defaultHex)
		}
		if len(g.Description) == 0 {
			t.Errorf("%s has no description", w.key)
		}
		k, ok := LookupTopicOption([]byte(w.key))
		if !ok || int(k) != i || k.Spec().Updatable != w.updatable || k.String() != w.key {
			t.Errorf("LookupTopicOption(%s) = %d %v, updatable %v", w.key, k, ok, k.Spec().Updatable)
		}
	}
	if n := len(AppendTopicOptionDescriptors(nil)); n != len(want) {
		t.Errorf("AppendTopicOptionDescriptors gave %d", n)
	}
	checkGolden(t, "replies/describe_options_empty.hex", AppendDescribeOptionsReply(nil, nil))

	for _, scope := range []OptionsScope{OptionsScopeStream, OptionsScopeUser} {
		got, err := AppendOptionsCatalogReply(nil, scope)
		if err != nil {
			t.Fatal(err)
		}
		checkGolden(t, "replies/describe_options_empty.hex", got)
	}
	if got, err := AppendOptionsCatalogReply(nil, OptionsScopeTopic); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("topic scope: %v", err)
	}
	if _, err := AppendOptionsCatalogReply(nil, OptionsScope(4)); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("scope 4: %v", err)
	}
}

// A topic created with an empty block: nothing explicit, all eight keys derived.
func TestTopicOptionsDerivedDefaultsGolden(t *testing.T) {
	c, err := ResolveCreateTopicOptions(nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	if c.Explicit != 0 || c.Effective != DefaultTopicOptions() {
		t.Fatalf("resolved %+v", c)
	}
	if b := c.AppendExplicitBlock(nil); len(b) != 0 {
		t.Fatalf("explicit block % x", b)
	}
	checkGolden(t, "replies/topic_derived_defaults.hex", c.AppendDerivedBlock(nil))
}

func opt(key string, kind HeaderKind, value []byte) []byte { return mustOptions(key, kind, value) }

func optString(key, value string) []byte { return opt(key, HeaderString, []byte(value)) }

func blockOf(entries ...[]byte) []byte { return bytes.Join(entries, nil) }

// entryOf finds key in block and returns its kind and value.
func entryOf(t *testing.T, block []byte, key string) (HeaderKind, []byte, bool) {
	t.Helper()
	it := NewTLVIterator(block)
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		if string(e.Key) == key {
			return e.ValueKind, e.Value, true
		}
	}
	if it.Err() != nil {
		t.Fatalf("block does not walk: %v", it.Err())
	}
	return 0, nil, false
}

// What the Go e2e suite asks of CreateTopic (apache/iggy foreign/go/tests/e2e_test.go).
func TestCreateTopicOptionsGoE2E(t *testing.T) {
	t.Run("string true is stored as Bool 01", func(t *testing.T) {
		c, err := ResolveCreateTopicOptions(optString("enforce_fsync", "true"), 1)
		if err != nil {
			t.Fatal(err)
		}
		explicit, derived := c.AppendExplicitBlock(nil), c.AppendDerivedBlock(nil)
		if kind, v, ok := entryOf(t, explicit, "enforce_fsync"); !ok || kind != HeaderBool || !bytes.Equal(v, []byte{1}) {
			t.Fatalf("explicit enforce_fsync = %v % x %v", kind, v, ok)
		}
		if _, _, ok := entryOf(t, derived, "enforce_fsync"); ok {
			t.Fatal("enforce_fsync is also derived")
		}
		if _, _, ok := entryOf(t, derived, "max_topic_size"); !ok {
			t.Fatal("max_topic_size not derived")
		}
		if !c.Effective.EnforceFsync {
			t.Fatal("effective enforce_fsync false")
		}
	})
	t.Run("typed helpers keep their kinds and bytes", func(t *testing.T) {
		sent := []struct {
			key   string
			kind  HeaderKind
			value []byte
		}{
			{"segment_size", HeaderUint64, u64Bytes(1048576)},
			{"enforce_fsync", HeaderBool, []byte{1}},
			{"messages_required_to_save", HeaderUint32, u32Bytes(7)},
			{"size_of_messages_required_to_save", HeaderUint64, u64Bytes(4096)},
			{"preallocate_segments", HeaderBool, []byte{0}},
		}
		var block []byte
		for _, s := range sent {
			block = append(block, opt(s.key, s.kind, s.value)...)
		}
		c, err := ResolveCreateTopicOptions(block, 1)
		if err != nil {
			t.Fatal(err)
		}
		explicit, derived := c.AppendExplicitBlock(nil), c.AppendDerivedBlock(nil)
		for _, s := range sent {
			kind, v, ok := entryOf(t, explicit, s.key)
			if !ok || kind != s.kind || !bytes.Equal(v, s.value) {
				t.Errorf("explicit %s = %v % x %v, want %v % x", s.key, kind, v, ok, s.kind, s.value)
			}
			if _, _, ok := entryOf(t, derived, s.key); ok {
				t.Errorf("%s is also derived", s.key)
			}
		}
	})
	t.Run("segment_size 0 is accepted and derived", func(t *testing.T) {
		c, err := ResolveCreateTopicOptions(opt("segment_size", HeaderUint64, u64Bytes(0)), 1)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, ok := entryOf(t, c.AppendExplicitBlock(nil), "segment_size"); ok {
			t.Fatal("segment_size 0 is explicit")
		}
		if kind, v, ok := entryOf(t, c.AppendDerivedBlock(nil), "segment_size"); !ok || kind != HeaderUint64 || !bytes.Equal(v, u64Bytes(1<<30)) {
			t.Fatalf("derived segment_size = %v % x %v", kind, v, ok)
		}
	})
	refused := []struct {
		name  string
		block []byte
		want  ErrorCode
	}{
		{"messages_required_to_save 0", opt("messages_required_to_save", HeaderUint32, u32Bytes(0)), ErrInvalidOptionValue},
		{"segment_size 1048577", opt("segment_size", HeaderUint64, u64Bytes(1048577)), ErrInvalidOptionValue},
		{"unknown key", optString("not_a_real_option", "x"), ErrUnsupportedOptionKey},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ResolveCreateTopicOptions(tt.block, 1); !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestParseTopicOption(t *testing.T) {
	type result struct {
		uint          uint64
		boolean       bool
		serverDefault bool
	}
	const never = math.MaxUint64
	tests := []struct {
		key   string
		kind  HeaderKind
		value []byte
		want  result
		err   ErrorCode
	}{
		{key: "compression_algorithm", kind: HeaderString, value: []byte("none"), want: result{uint: 1}},
		{key: "compression_algorithm", kind: HeaderString, value: []byte("GZip"), want: result{uint: 2}},
		{key: "compression_algorithm", kind: HeaderUint8, value: []byte{2}, want: result{uint: 2}},
		{key: "compression_algorithm", kind: HeaderUint8, value: []byte{3}, err: ErrInvalidOptionValue},
		{key: "compression_algorithm", kind: HeaderUint8, value: []byte{2, 0}, err: ErrInvalidOptionValue},
		{key: "compression_algorithm", kind: HeaderUint32, value: u32Bytes(2), err: ErrInvalidOptionValue},
		{key: "compression_algorithm", kind: HeaderString, value: []byte("zstd"), err: ErrInvalidOptionValue},

		{key: "message_expiry", kind: HeaderUint64, value: u64Bytes(5_000_000), want: result{uint: 5_000_000}},
		{key: "message_expiry", kind: HeaderUint64, value: u64Bytes(0), want: result{serverDefault: true}},
		{key: "message_expiry", kind: HeaderUint64, value: u64Bytes(never), want: result{uint: never}},
		{key: "message_expiry", kind: HeaderUint64, value: u32Bytes(5), err: ErrInvalidOptionValue},
		{key: "message_expiry", kind: HeaderString, value: []byte("7 days"), want: result{uint: 604_800_000_000}},
		{key: "message_expiry", kind: HeaderString, value: []byte("1h 30m"), want: result{uint: 5_400_000_000}},
		{key: "message_expiry", kind: HeaderString, value: []byte("1h30m15s"), want: result{uint: 5_415_000_000}},
		{key: "message_expiry", kind: HeaderString, value: []byte("5s"), want: result{uint: 5_000_000}},
		{key: "message_expiry", kind: HeaderString, value: []byte("1500ns"), want: result{uint: 1}},
		{key: "message_expiry", kind: HeaderString, value: []byte("none"), want: result{uint: never}},
		{key: "message_expiry", kind: HeaderString, value: []byte("never_expire"), want: result{uint: never}},
		{key: "message_expiry", kind: HeaderString, value: []byte("server_default"), want: result{serverDefault: true}},
		{key: "message_expiry", kind: HeaderString, value: []byte("136 years"), want: result{uint: 136 * 31_557_600_000_000}},
		{key: "message_expiry", kind: HeaderString, value: []byte("137 years"), err: ErrInvalidOptionValue}, // > u32::MAX s
		{key: "message_expiry", kind: HeaderString, value: []byte("5"), err: ErrInvalidOptionValue},
		{key: "message_expiry", kind: HeaderString, value: []byte("5 fortnights"), err: ErrInvalidOptionValue},
		{key: "message_expiry", kind: HeaderString, value: []byte("99999999999999999999s"), err: ErrInvalidOptionValue},
		{key: "message_expiry", kind: HeaderString, value: []byte{0xff}, err: ErrInvalidOptionValue},

		{key: "max_topic_size", kind: HeaderString, value: []byte("1 GiB"), want: result{uint: 1 << 30}},
		{key: "max_topic_size", kind: HeaderString, value: []byte("2GB"), want: result{uint: 2_000_000_000}},
		{key: "max_topic_size", kind: HeaderString, value: []byte("1073741824"), want: result{uint: 1 << 30}},
		{key: "max_topic_size", kind: HeaderString, value: []byte("1.5 KiB"), want: result{uint: 1536}},
		{key: "max_topic_size", kind: HeaderString, value: []byte("unlimited"), want: result{uint: never}},
		{key: "max_topic_size", kind: HeaderString, value: []byte("0"), want: result{serverDefault: true}},
		{key: "max_topic_size", kind: HeaderString, value: []byte("server_default"), want: result{serverDefault: true}},
		{key: "max_topic_size", kind: HeaderString, value: []byte("16 EiB"), err: ErrInvalidOptionValue},
		{key: "max_topic_size", kind: HeaderString, value: []byte("1 XB"), err: ErrInvalidOptionValue},
		{key: "max_topic_size", kind: HeaderString, value: []byte("1..5 KB"), err: ErrInvalidOptionValue},
		{key: "max_topic_size", kind: HeaderString, value: []byte("0.1234567890123456789999 KiB"), want: result{uint: 126}},
		{key: "max_topic_size", kind: HeaderString, value: []byte("1.00000000000000000000x KiB"), err: ErrInvalidOptionValue},
		{key: "max_topic_size", kind: HeaderString, value: []byte("1 kb"), want: result{uint: 1000}},
		{key: "max_topic_size", kind: HeaderUint64, value: u64Bytes(0), want: result{serverDefault: true}},

		{key: "segment_size", kind: HeaderString, value: []byte("128MiB"), want: result{uint: 128 << 20}},
		{key: "segment_size", kind: HeaderString, value: []byte("unlimited"), want: result{serverDefault: true}},
		{key: "segment_size", kind: HeaderUint64, value: u64Bytes(1048577), want: result{uint: 1048577}}, // bounds: at create

		{key: "enforce_fsync", kind: HeaderBool, value: []byte{1}, want: result{boolean: true}},
		{key: "enforce_fsync", kind: HeaderBool, value: []byte{0}, want: result{}},
		{key: "enforce_fsync", kind: HeaderBool, value: []byte{2}, err: ErrInvalidOptionValue},
		{key: "enforce_fsync", kind: HeaderBool, value: []byte{1, 0}, err: ErrInvalidOptionValue},
		{key: "enforce_fsync", kind: HeaderString, value: []byte("true"), want: result{boolean: true}},
		{key: "enforce_fsync", kind: HeaderString, value: []byte("True"), err: ErrInvalidOptionValue},
		{key: "preallocate_segments", kind: HeaderString, value: []byte("false"), want: result{}},
		{key: "preallocate_segments", kind: HeaderUint8, value: []byte{1}, err: ErrInvalidOptionValue},

		{key: "messages_required_to_save", kind: HeaderUint32, value: u32Bytes(16 << 20), want: result{uint: 16 << 20}},
		{key: "messages_required_to_save", kind: HeaderUint32, value: u32Bytes(16<<20 + 1), err: ErrInvalidOptionValue},
		{key: "messages_required_to_save", kind: HeaderString, value: []byte("7"), want: result{uint: 7}},
		{key: "messages_required_to_save", kind: HeaderString, value: []byte("0"), err: ErrInvalidOptionValue},
		{key: "messages_required_to_save", kind: HeaderString, value: []byte("-1"), err: ErrInvalidOptionValue},
		{key: "messages_required_to_save", kind: HeaderUint64, value: u64Bytes(7), err: ErrInvalidOptionValue},

		{key: "size_of_messages_required_to_save", kind: HeaderString, value: []byte("1 GiB"), want: result{uint: 1 << 30}},
		{key: "size_of_messages_required_to_save", kind: HeaderString, value: []byte("1.1 GiB"), err: ErrInvalidOptionValue},
		{key: "size_of_messages_required_to_save", kind: HeaderUint64, value: u64Bytes(0), want: result{serverDefault: true}},

		{key: "segment_size", kind: HeaderKind(20), value: []byte{1}, err: ErrInvalidOptionValue},
		{key: "partitions_count", kind: HeaderUint32, value: u32Bytes(1), err: ErrUnsupportedOptionKey},
		{key: "Segment_Size", kind: HeaderUint64, value: u64Bytes(1 << 20), err: ErrUnsupportedOptionKey},
	}
	for _, tt := range tests {
		t.Run(tt.key+"="+string(tt.value), func(t *testing.T) {
			v, err := ParseTopicOption([]byte(tt.key), tt.kind, tt.value)
			if tt.err != 0 {
				if !errors.Is(err, tt.err) {
					t.Fatalf("err = %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			got := result{uint: v.Uint, boolean: v.Bool, serverDefault: v.ServerDefault}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestResolveCreateTopicOptionsOrder(t *testing.T) {
	bad := opt("enforce_fsync", HeaderBool, []byte{7})
	unknown := optString("nope", "1")
	tests := []struct {
		name       string
		block      []byte
		partitions uint32
		want       error
	}{
		{"malformed block", []byte{2, 1, 0}, 1, ErrInvalidCommand},
		{"duplicate key", blockOf(optString("enforce_fsync", "true"), optString("enforce_fsync", "false")), 1, ErrInvalidCommand},
		{"unknown before bad value", blockOf(unknown, bad), 1, ErrUnsupportedOptionKey},
		{"bad value before unknown", blockOf(bad, unknown), 1, ErrInvalidOptionValue},
		{"entry errors beat partition count", blockOf(unknown), 5000, ErrUnsupportedOptionKey},
		{"segment bounds beat partition count", opt("segment_size", HeaderUint64, u64Bytes(512)), 5000, ErrInvalidOptionValue},
		{"segment off the 512-byte grid", opt("segment_size", HeaderUint64, u64Bytes(1<<20+256)), 1, ErrInvalidOptionValue},
		{"segment above 1 GiB", opt("segment_size", HeaderUint64, u64Bytes(1<<30+512)), 1, ErrInvalidOptionValue},
		{"preallocation cap beats partition count", optString("preallocate_segments", "true"), 5000, ErrInvalidOptionValue},
		{"preallocation at the cap", optString("preallocate_segments", "true"), 64, nil},
		{"preallocation above the cap", optString("preallocate_segments", "true"), 65, ErrInvalidOptionValue},
		{"small segments preallocate more partitions", blockOf(optString("preallocate_segments", "true"), optString("segment_size", "1MiB")), 1000, nil},
		{"1000 partitions", nil, 1000, nil},
		{"1001 partitions", nil, 1001, ErrTooManyPartitions},
		{"partition count beats topic size", opt("max_topic_size", HeaderUint64, u64Bytes(1)), 1001, ErrTooManyPartitions},
		{"max_topic_size below default segment", opt("max_topic_size", HeaderUint64, u64Bytes(1<<20)), 1, ErrInvalidTopicSize},
		{"max_topic_size above explicit segment", blockOf(optString("max_topic_size", "2MiB"), optString("segment_size", "1MiB")), 1, nil},
		{"max_topic_size sentinel is not checked", optString("max_topic_size", "0"), 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ResolveCreateTopicOptions(tt.block, tt.partitions)
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

// Create re-encodes the client's values in canonical kinds and drops sentinels.
func TestCreateTopicOptionsCanonicalises(t *testing.T) {
	block := blockOf(
		opt("message_expiry", HeaderUint64, u64Bytes(0)), // sentinel: dropped
		optString("segment_size", "128MiB"),
		opt("compression_algorithm", HeaderUint8, []byte{2}),
		optString("messages_required_to_save", "9"),
	)
	c, err := ResolveCreateTopicOptions(block, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := blockOf(
		optString("compression_algorithm", "gzip"),
		opt("messages_required_to_save", HeaderUint32, u32Bytes(9)),
		opt("segment_size", HeaderUint64, u64Bytes(128<<20)),
	)
	if got := c.AppendExplicitBlock(nil); !bytes.Equal(got, want) {
		t.Fatalf("explicit block\n got % x\nwant % x", got, want)
	}
	if _, _, ok := entryOf(t, c.AppendDerivedBlock(nil), "message_expiry"); !ok {
		t.Fatal("message_expiry sentinel not derived")
	}
	if c.Effective.CompressionAlgorithm != TopicCompressionGzip || c.Effective.SegmentSizeBytes != 128<<20 {
		t.Fatalf("effective %+v", c.Effective)
	}
	var h TopicHeader
	c.Effective.SetHeaderFields(&h)
	if h.CompressionAlgorithm != TopicCompressionGzip || h.MessageExpiryMicros != DefaultMessageExpiryMicros || h.MaxTopicSizeBytes != DefaultMaxTopicSizeBytes {
		t.Fatalf("header fields %+v", h)
	}
}

func TestCheckTopicUpdate(t *testing.T) {
	tests := []struct {
		name  string
		block []byte
		want  error
	}{
		{"empty", nil, nil},
		{"all three", blockOf(optString("compression_algorithm", "gzip"), optString("message_expiry", "1h"), optString("max_topic_size", "2GiB")), nil},
		{"create-only key", opt("segment_size", HeaderUint64, u64Bytes(1<<20)), ErrUnsupportedOptionKey},
		{"unknown key", optString("nope", "x"), ErrUnsupportedOptionKey},
		{"bad value", optString("compression_algorithm", "lz4"), ErrInvalidOptionValue},
		{"below segment size", opt("max_topic_size", HeaderUint64, u64Bytes(1<<20)), ErrInvalidTopicSize},
		{"sentinel", opt("max_topic_size", HeaderUint64, u64Bytes(0)), nil},
		{"malformed", []byte{1}, ErrInvalidCommand},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := CheckTopicUpdate(tt.block, 1<<30)
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

// An update moves its keys into the explicit block verbatim and out of the derived
// one; a sentinel is stored as sent but leaves the effective value alone.
func TestTopicUpdateApply(t *testing.T) {
	created, err := ResolveCreateTopicOptions(optString("enforce_fsync", "true"), 1)
	if err != nil {
		t.Fatal(err)
	}
	oldExplicit, oldDerived := created.AppendExplicitBlock(nil), created.AppendDerivedBlock(nil)
	update := blockOf(
		opt("message_expiry", HeaderUint64, u64Bytes(0)), // sentinel
		opt("compression_algorithm", HeaderUint8, []byte{2}),
	)
	u, err := CheckTopicUpdate(update, created.Effective.SegmentSizeBytes)
	if err != nil {
		t.Fatal(err)
	}
	explicit, derived := u.AppendBlocks(nil, nil, oldExplicit, oldDerived)
	wantExplicit := blockOf(
		opt("compression_algorithm", HeaderUint8, []byte{2}), // client's kind kept
		opt("enforce_fsync", HeaderBool, []byte{1}),
		opt("message_expiry", HeaderUint64, u64Bytes(0)),
	)
	if !bytes.Equal(explicit, wantExplicit) {
		t.Fatalf("explicit\n got % x\nwant % x", explicit, wantExplicit)
	}
	for _, key := range []string{"compression_algorithm", "message_expiry", "enforce_fsync"} {
		if _, _, ok := entryOf(t, derived, key); ok {
			t.Errorf("%s still derived", key)
		}
	}
	if n, err := ValidateOptions(derived); err != nil || n != 5 {
		t.Fatalf("derived block: %d entries, %v", n, err)
	}
	effective := created.Effective
	u.ApplyTo(&effective)
	if effective.CompressionAlgorithm != TopicCompressionGzip || effective.MessageExpiryMicros != DefaultMessageExpiryMicros {
		t.Fatalf("effective %+v", effective)
	}
}

func randomCreateBlock(r *rand.Rand) []byte {
	var block []byte
	if r.IntN(2) == 0 {
		block = append(block, optString("compression_algorithm", []string{"none", "gzip", "GZIP"}[r.IntN(3)])...)
	}
	if r.IntN(2) == 0 {
		block = append(block, opt("message_expiry", HeaderUint64, u64Bytes(r.Uint64N(1<<40)))...)
	}
	segment := uint64(2+r.IntN(2047)) * 512 * 1024 // 1 MiB ..= 1 GiB
	if r.IntN(2) == 0 {
		block = append(block, opt("segment_size", HeaderUint64, u64Bytes(segment))...)
	} else {
		segment = DefaultSegmentSizeBytes
	}
	if r.IntN(2) == 0 {
		block = append(block, opt("max_topic_size", HeaderUint64, u64Bytes(segment+r.Uint64N(1<<40)))...)
	}
	if r.IntN(2) == 0 {
		block = append(block, opt("enforce_fsync", HeaderBool, []byte{byte(r.IntN(2))})...)
	}
	if r.IntN(2) == 0 {
		block = append(block, opt("messages_required_to_save", HeaderUint32, u32Bytes(1+r.Uint32N(16<<20)))...)
	}
	if r.IntN(2) == 0 {
		block = append(block, opt("size_of_messages_required_to_save", HeaderUint64, u64Bytes(r.Uint64N(1<<30)))...)
	}
	if r.IntN(4) == 0 {
		block = append(block, opt("preallocate_segments", HeaderBool, []byte{1})...)
	}
	return block
}

// For every accepted create, the two stored blocks hold each key exactly once, are
// sorted, and read back to the effective values.
func TestCreateTopicOptionsRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 2000 {
		block := randomCreateBlock(r)
		c, err := ResolveCreateTopicOptions(block, 1)
		if err != nil {
			t.Fatalf("case %d: %v for % x", i, err, block)
		}
		checkCreatedBlocks(t, &c)
	}
}

func checkCreatedBlocks(t *testing.T, c *CreateTopicOptions) {
	t.Helper()
	explicit, derived := c.AppendExplicitBlock(nil), c.AppendDerivedBlock(nil)
	ne, err := ValidateOptions(explicit)
	if err != nil {
		t.Fatalf("explicit block invalid: %v", err)
	}
	nd, err := ValidateOptions(derived)
	if err != nil {
		t.Fatalf("derived block invalid: %v", err)
	}
	if ne+nd != int(topicOptionCount) {
		t.Fatalf("%d explicit + %d derived entries", ne, nd)
	}
	for _, block := range [][]byte{explicit, derived} {
		var last []byte
		it := NewTLVIterator(block)
		for e, ok := it.Next(); ok; e, ok = it.Next() {
			if last != nil && bytes.Compare(last, e.Key) >= 0 {
				t.Fatalf("block not sorted: %s after %s", e.Key, last)
			}
			last = e.Key
		}
	}
	if got := TopicOptionsFromBlocks(explicit, derived); got != c.Effective {
		t.Fatalf("read back %+v, want %+v", got, c.Effective)
	}
}

func FuzzTopicOptions(f *testing.F) {
	r := rand.New(rand.NewPCG(7, 8))
	for range 8 {
		f.Add(randomCreateBlock(r), uint32(1), uint64(1<<30))
	}
	f.Add(optString("not_a_real_option", "x"), uint32(1), uint64(1<<20))
	f.Add(blockOf(optString("message_expiry", "1h 30m"), optString("max_topic_size", "2 GiB")), uint32(3), uint64(1<<30))
	f.Fuzz(func(t *testing.T, block []byte, partitions uint32, segmentSize uint64) {
		if c, err := ResolveCreateTopicOptions(block, partitions); err == nil {
			checkCreatedBlocks(t, &c)
		} else if !errors.As(err, new(ErrorCode)) {
			t.Fatalf("error %v is not an ErrorCode", err)
		}
		u, err := CheckTopicUpdate(block, segmentSize)
		if err != nil {
			return
		}
		base, _ := ResolveCreateTopicOptions(nil, 1)
		explicit, derived := u.AppendBlocks(nil, nil, base.AppendExplicitBlock(nil), base.AppendDerivedBlock(nil))
		ne, err := ValidateOptions(explicit)
		if err != nil {
			t.Fatalf("explicit after update: %v", err)
		}
		nd, err := ValidateOptions(derived)
		if err != nil {
			t.Fatalf("derived after update: %v", err)
		}
		if ne+nd != int(topicOptionCount) {
			t.Fatalf("%d + %d entries after update", ne, nd)
		}
	})
}

func BenchmarkResolveCreateTopicOptions(b *testing.B) {
	block := blockOf(optString("enforce_fsync", "true"), optString("segment_size", "128MiB"), opt("message_expiry", HeaderUint64, u64Bytes(5_000_000)))
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		c, err := ResolveCreateTopicOptions(block, 3)
		if err != nil {
			b.Fatal(err)
		}
		buf = c.AppendDerivedBlock(c.AppendExplicitBlock(buf[:0]))
	}
}
