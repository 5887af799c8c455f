package wire

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

func TestUserHeadersGolden(t *testing.T) {
	block := readGolden(t, "requests/user_headers.hex")
	var built []byte
	var err error
	built, err = AppendTLV(built, HeaderString, []byte("trace"), HeaderUint64, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	if err != nil {
		t.Fatal(err)
	}
	// A value kind this protocol does not define survives the walk untouched.
	built, err = AppendTLV(built, HeaderString, []byte("x"), HeaderKind(200), []byte{0xde, 0xad})
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "requests/user_headers.hex", built)

	pairs, err := ValidateUserHeaders(block)
	if err != nil || pairs != 2 {
		t.Fatalf("ValidateUserHeaders = %d, %v; want 2 pairs", pairs, err)
	}
	it := NewTLVIterator(block)
	want := []TLVEntry{
		{KeyKind: HeaderString, Key: []byte("trace"), ValueKind: HeaderUint64, Value: []byte{1, 0, 0, 0, 0, 0, 0, 0}},
		{KeyKind: HeaderString, Key: []byte("x"), ValueKind: 200, Value: []byte{0xde, 0xad}},
	}
	for i, w := range want {
		e, ok := it.Next()
		if !ok {
			t.Fatalf("pair %d missing: %v", i, it.Err())
		}
		if e.KeyKind != w.KeyKind || !bytes.Equal(e.Key, w.Key) || e.ValueKind != w.ValueKind || !bytes.Equal(e.Value, w.Value) {
			t.Fatalf("pair %d = %+v, want %+v", i, e, w)
		}
	}
	if _, ok := it.Next(); ok || it.Err() != nil {
		t.Fatalf("iteration did not end cleanly: %v", it.Err())
	}
}

func TestUserHeadersMalformed(t *testing.T) {
	field := func(kind byte, n uint32, data ...byte) []byte {
		return append(appendU32([]byte{kind}, n), data...)
	}
	valid := append(field(2, 1, 'k'), field(1, 1, 'v')...)
	tests := []struct {
		name  string
		block []byte
	}{
		{"key kind 0", append(field(0, 1, 'k'), field(1, 1, 'v')...)},
		{"value kind 0", append(field(2, 1, 'k'), field(0, 1, 'v')...)},
		{"key length 0", append(field(2, 0), field(1, 1, 'v')...)},
		{"value length 0", append(field(2, 1, 'k'), field(1, 0)...)},
		{"value length 256", append(field(2, 1, 'k'), field(1, 256, make([]byte, 256)...)...)},
		{"length near 4 GiB", append(field(2, 1, 'k'), field(1, 0xffffffff)...)},
		{"key without value", field(2, 1, 'k')},
		{"trailing byte", append(bytes.Clone(valid), 0)},
		{"truncated value", valid[:len(valid)-1]},
		{"truncated head", valid[:3]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ValidateUserHeaders(tt.block); !errors.Is(err, ErrInvalidCommand) {
				t.Fatalf("ValidateUserHeaders err = %v, want %v", err, ErrInvalidCommand)
			}
			if _, err := ValidateOptions(tt.block); !errors.Is(err, ErrInvalidCommand) {
				t.Fatalf("ValidateOptions err = %v, want %v", err, ErrInvalidCommand)
			}
		})
	}
	if n, err := ValidateUserHeaders(nil); n != 0 || err != nil {
		t.Fatalf("empty block: %d, %v", n, err)
	}
	// A non-String key is a valid user header (the reference validator accepts it) but
	// not a valid option.
	intKey := append(field(6, 4, 1, 0, 0, 0), field(2, 1, 'v')...)
	if _, err := ValidateUserHeaders(intKey); err != nil {
		t.Fatalf("int key user header: %v", err)
	}
	if _, err := ValidateOptions(intKey); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("int key option: %v", err)
	}
}

func TestOptionsGolden(t *testing.T) {
	var block []byte
	var err error
	block, err = AppendOption(block, "segment_size", HeaderUint64, appendU64(nil, 1048576))
	if err != nil {
		t.Fatal(err)
	}
	block, err = AppendOption(block, "enforce_fsync", HeaderString, []byte("true"))
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "requests/options_block.hex", block)
	if n, err := ValidateOptions(readGolden(t, "requests/options_block.hex")); n != 2 || err != nil {
		t.Fatalf("ValidateOptions = %d, %v", n, err)
	}
}

func TestOptionsRules(t *testing.T) {
	opt := func(b []byte, key string, value string) []byte {
		out, err := AppendOption(b, key, HeaderString, []byte(value))
		if err != nil {
			t.Fatalf("AppendOption(%q): %v", key, err)
		}
		return out
	}
	tests := []struct {
		name    string
		block   []byte
		pairs   int
		wantErr bool
	}{
		{name: "empty", block: nil, pairs: 0},
		{name: "one", block: opt(nil, "a", "1"), pairs: 1},
		{name: "duplicate", block: opt(opt(nil, "a", "1"), "a", "2"), wantErr: true},
		{name: "duplicate apart", block: opt(opt(opt(nil, "a", "1"), "b", "2"), "a", "3"), wantErr: true},
		{name: "prefix keys differ", block: opt(opt(nil, "ab", "1"), "a", "2"), pairs: 2},
		{name: "non utf-8 key", block: append(appendU32([]byte{2}, 1), 0xff, 2, 1, 0, 0, 0, 'v'), wantErr: true},
		{name: "unknown value kind", block: append(appendU32([]byte{2}, 1), 'k', 99, 1, 0, 0, 0, 'v'), pairs: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := ValidateOptions(tt.block)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidCommand) {
					t.Fatalf("err = %v, want %v", err, ErrInvalidCommand)
				}
				return
			}
			if err != nil || n != tt.pairs {
				t.Fatalf("ValidateOptions = %d, %v; want %d", n, err, tt.pairs)
			}
		})
	}
}

// manyOptions builds n distinct options; keys are 4-digit numbers, values 1 byte.
func manyOptions(tb testing.TB, n int) []byte {
	var block []byte
	for i := 0; i < n; i++ {
		var err error
		block, err = AppendOption(block, fmt.Sprintf("%04d", i), HeaderUint8, []byte{byte(i)})
		if err != nil {
			tb.Fatal(err)
		}
	}
	return block
}

func TestOptionsLimits(t *testing.T) {
	block := manyOptions(t, OptionsEntriesMax)
	if n, err := ValidateOptions(block); n != OptionsEntriesMax || err != nil {
		t.Fatalf("1024 entries: %d, %v", n, err)
	}
	over := manyOptions(t, OptionsEntriesMax+1)
	if _, err := ValidateOptions(over); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("1025 entries: %v", err)
	}
	// Make the last key repeat the first one: the duplicate is found across the
	// whole sorted set, not only between neighbours on the wire.
	dup := bytes.Clone(block)
	last := bytes.LastIndex(dup, []byte("1023"))
	copy(dup[last:], "0000")
	if _, err := ValidateOptions(dup); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("duplicate among 1024: %v", err)
	}

	// 200 maximal entries are just over 100000 bytes while far under 1024 entries,
	// so the byte cap is what trips.
	var big []byte
	value := bytes.Repeat([]byte{'v'}, 255)
	for i := 0; len(big) <= OptionsSizeBytesMax; i++ {
		key := fmt.Sprintf("%0255d", i)
		var err error
		if big, err = AppendOption(big, key, HeaderRaw, value); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ValidateUserHeaders(big); err != nil {
		t.Fatalf("structure of big block: %v", err)
	}
	if _, err := ValidateOptions(big); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("%d-byte block: %v", len(big), err)
	}
}

func TestOptionsValidateAllocs(t *testing.T) {
	block := manyOptions(t, OptionsEntriesMax)
	if n := testing.AllocsPerRun(20, func() { _, _ = ValidateOptions(block) }); n != 0 {
		t.Fatalf("ValidateOptions allocates %v times", n)
	}
	headers := readGolden(t, "requests/user_headers.hex")
	if n := testing.AllocsPerRun(100, func() { _, _ = ValidateUserHeaders(headers) }); n != 0 {
		t.Fatalf("ValidateUserHeaders allocates %v times", n)
	}
}

func TestAppendTLVRefuses(t *testing.T) {
	long := make([]byte, 256)
	tests := []struct {
		name       string
		kk, vk     HeaderKind
		key, value []byte
	}{
		{"key kind 0", 0, 1, []byte("k"), []byte("v")},
		{"value kind 0", 2, 0, []byte("k"), []byte("v")},
		{"empty key", 2, 1, nil, []byte("v")},
		{"empty value", 2, 1, []byte("k"), nil},
		{"long key", 2, 1, long, []byte("v")},
		{"long value", 2, 1, []byte("k"), long},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := AppendTLV([]byte{7}, tt.kk, tt.key, tt.vk, tt.value)
			if !errors.Is(err, ErrInvalidCommand) || !bytes.Equal(b, []byte{7}) {
				t.Fatalf("AppendTLV = % x, %v", b, err)
			}
		})
	}
	if b, err := AppendOption([]byte{7}, "\xff", HeaderRaw, []byte("v")); err == nil || len(b) != 1 {
		t.Fatalf("AppendOption non-UTF-8 key = % x, %v", b, err)
	}
	if b, err := AppendOption([]byte{7}, "k", HeaderRaw, nil); err == nil || len(b) != 1 {
		t.Fatalf("AppendOption empty value = % x, %v", b, err)
	}
}

// Blocks built by AppendTLV from random pairs validate, iterate back to the same
// pairs, and every truncation of them is refused.
func TestTLVRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for iter := 0; iter < 300; iter++ {
		n := r.IntN(20)
		var block []byte
		var want []TLVEntry
		boundaries := map[int]bool{0: true}
		for i := 0; i < n; i++ {
			e := TLVEntry{
				KeyKind:   HeaderString,
				Key:       []byte(fmt.Sprintf("k%d-%s", i, randomName(r, 10))),
				ValueKind: HeaderKind(1 + r.IntN(255)),
				Value:     randomName(r, 255),
			}
			var err error
			if block, err = AppendTLV(block, e.KeyKind, e.Key, e.ValueKind, e.Value); err != nil {
				t.Fatal(err)
			}
			want = append(want, e)
			boundaries[len(block)] = true
		}
		if got, err := ValidateOptions(block); err != nil || got != n {
			t.Fatalf("iteration %d: ValidateOptions = %d, %v; want %d", iter, got, err, n)
		}
		it := NewTLVIterator(block)
		for i := range want {
			e, ok := it.Next()
			if !ok || e.KeyKind != want[i].KeyKind || !bytes.Equal(e.Key, want[i].Key) ||
				e.ValueKind != want[i].ValueKind || !bytes.Equal(e.Value, want[i].Value) {
				t.Fatalf("iteration %d: pair %d = %+v, %v", iter, i, e, ok)
			}
		}
		if n > 0 {
			// A cut between pairs is a shorter valid block; any other cut is not.
			cut := r.IntN(len(block))
			if _, err := ValidateUserHeaders(block[:cut]); (err == nil) != boundaries[cut] {
				t.Fatalf("iteration %d: cut at %d/%d: err = %v", iter, cut, len(block), err)
			}
		}
	}
}

func FuzzUserHeaders(f *testing.F) {
	f.Add(readGolden(f, "requests/user_headers.hex"))
	f.Add([]byte{})
	f.Add([]byte{2, 1, 0, 0, 0, 'k', 0, 1, 0, 0, 0, 'v'})
	f.Fuzz(func(t *testing.T, block []byte) {
		pairs, err := ValidateUserHeaders(block)
		it := NewTLVIterator(block)
		var seen int
		var rebuilt []byte
		for e, ok := it.Next(); ok; e, ok = it.Next() {
			seen++
			var aerr error
			if rebuilt, aerr = AppendTLV(rebuilt, e.KeyKind, e.Key, e.ValueKind, e.Value); aerr != nil {
				t.Fatalf("iterated pair does not re-encode: %v", aerr)
			}
		}
		if err != nil {
			if it.Err() == nil {
				t.Fatalf("Validate failed (%v) but iteration ended cleanly", err)
			}
			return
		}
		if it.Err() != nil || seen != pairs {
			t.Fatalf("Validate = %d pairs, iteration saw %d, %v", pairs, seen, it.Err())
		}
		if !bytes.Equal(rebuilt, block) {
			t.Fatalf("re-encoding differs:\n% x\n% x", rebuilt, block)
		}
	})
}

func FuzzOptions(f *testing.F) {
	f.Add(readGolden(f, "requests/options_block.hex"))
	f.Add([]byte{})
	f.Add(manyOptions(f, 3))
	f.Fuzz(func(t *testing.T, block []byte) {
		pairs, err := ValidateOptions(block)
		if err != nil {
			if !errors.Is(err, ErrInvalidCommand) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if hp, herr := ValidateUserHeaders(block); herr != nil || hp != pairs {
			t.Fatalf("valid options are not valid headers: %d, %v", hp, herr)
		}
		seen := map[string]bool{}
		it := NewTLVIterator(block)
		for e, ok := it.Next(); ok; e, ok = it.Next() {
			if e.KeyKind != HeaderString || seen[string(e.Key)] {
				t.Fatalf("accepted key %q kind %v twice or non-string", e.Key, e.KeyKind)
			}
			seen[string(e.Key)] = true
		}
		if len(seen) != pairs || pairs > OptionsEntriesMax || len(block) > OptionsSizeBytesMax {
			t.Fatalf("limits: %d pairs, %d bytes", pairs, len(block))
		}
	})
}

func BenchmarkValidateOptions(b *testing.B) {
	block := manyOptions(b, OptionsEntriesMax)
	b.SetBytes(int64(len(block)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ValidateOptions(block); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidateUserHeaders is the baseline for BenchmarkValidateOptions: the same
// 1024-pair block through the structural walk alone, so the difference is the cost of
// the UTF-8 and duplicate-key checks.
func BenchmarkValidateUserHeaders(b *testing.B) {
	block := manyOptions(b, OptionsEntriesMax)
	b.SetBytes(int64(len(block)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ValidateUserHeaders(block); err != nil {
			b.Fatal(err)
		}
	}
}
