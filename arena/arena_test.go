package arena

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// smallConfig keeps tests quick: three classes, a few buffers each.
func smallConfig() Config {
	return Config{Classes: []ClassConfig{
		{BufferSizeBytes: 64, BufferCount: 130, Populate: true}, // 130: spans three bitmap words
		{BufferSizeBytes: 4096, BufferCount: 4},
		{BufferSizeBytes: 65536, BufferCount: 2},
	}}
}

func newArena(t testing.TB, cfg Config) *Arena {
	t.Helper()
	a, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return a
}

// mustPanic runs f and fails unless it panics with a message containing want.
func mustPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Fatalf("no panic, want one containing %q", want)
		}
		if msg := fmt.Sprint(r); !strings.Contains(msg, want) {
			t.Fatalf("panic %q, want one containing %q", msg, want)
		}
	}()
	f()
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		classes []ClassConfig
		wantErr string
	}{
		{"frames up to 64 MiB", largeConfig().Classes, ""},
		{"none", nil, "no size classes"},
		{"zero size", []ClassConfig{{BufferSizeBytes: 0, BufferCount: 1}}, "not a positive multiple of 16"},
		{"unaligned size", []ClassConfig{{BufferSizeBytes: 24, BufferCount: 1}}, "not a positive multiple of 16"},
		{"negative size", []ClassConfig{{BufferSizeBytes: -16, BufferCount: 1}}, "not a positive multiple of 16"},
		{"zero count", []ClassConfig{{BufferSizeBytes: 16, BufferCount: 0}}, "buffer count 0"},
		{"count above u32", []ClassConfig{{BufferSizeBytes: 16, BufferCount: 1 << 33}}, "buffer count"},
		{"region too large", []ClassConfig{{BufferSizeBytes: 1 << 30, BufferCount: 1 << 11}}, "class maximum"},
		{"not ascending", []ClassConfig{{BufferSizeBytes: 64, BufferCount: 1}, {BufferSizeBytes: 64, BufferCount: 1}}, "not above class 0"},
		{"too many classes", make([]ClassConfig, ClassCountMax+1), "size classes > maximum"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Config{Classes: tt.classes}.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tt.wantErr)
			}
			if _, err := New(Config{Classes: tt.classes}); err == nil {
				t.Fatal("New accepted an invalid config")
			}
		})
	}
}

func TestAcquireChoosesSmallestFittingClass(t *testing.T) {
	a := newArena(t, smallConfig())
	tests := []struct {
		sizeBytes int
		wantClass int
		wantErr   error
	}{
		{0, 0, nil},
		{1, 0, nil},
		{64, 0, nil},
		{65, 1, nil},
		{4096, 1, nil},
		{4097, 2, nil},
		{65536, 2, nil},
		{65537, 0, ErrTooLarge},
		{-1, 0, ErrNegativeSize},
	}
	for _, tt := range tests {
		b, err := a.Acquire(tt.sizeBytes)
		if !errors.Is(err, tt.wantErr) {
			t.Fatalf("Acquire(%d) error = %v, want %v", tt.sizeBytes, err, tt.wantErr)
		}
		if err != nil {
			if !b.IsZero() {
				t.Fatalf("Acquire(%d) failed but returned a buffer", tt.sizeBytes)
			}
			continue
		}
		if b.Class() != tt.wantClass || len(b.Bytes()) != tt.sizeBytes || cap(b.Bytes()) != a.Class(tt.wantClass).BufferSizeBytes {
			t.Fatalf("Acquire(%d) = class %d len %d cap %d, want class %d len %d cap %d", tt.sizeBytes,
				b.Class(), len(b.Bytes()), cap(b.Bytes()), tt.wantClass, tt.sizeBytes, a.Class(tt.wantClass).BufferSizeBytes)
		}
		if len(b.Full()) != cap(b.Bytes()) {
			t.Fatalf("Full length %d, want %d", len(b.Full()), cap(b.Bytes()))
		}
		a.Release(b)
	}
	if err := a.CheckNoLeaks(); err != nil {
		t.Fatal(err)
	}
}

func TestEveryBufferAlignedDisjointAndCapped(t *testing.T) {
	a := newArena(t, smallConfig())
	for ci := range a.ClassCount() {
		info := a.Class(ci)
		held := make([]Buffer, 0, info.BufferCount)
		seen := make(map[int]bool)
		for range info.BufferCount {
			b, err := a.AcquireClass(ci)
			if err != nil {
				t.Fatalf("class %d: AcquireClass: %v", ci, err)
			}
			addr := uintptr(unsafe.Pointer(unsafe.SliceData(b.Bytes())))
			if addr%BufferAlignBytes != 0 {
				t.Fatalf("class %d buffer %d at %#x is not %d-byte aligned", ci, b.Index(), addr, BufferAlignBytes)
			}
			if want := info.Base + uintptr(b.Index()*info.BufferSizeBytes); addr != want {
				t.Fatalf("class %d buffer %d at %#x, want %#x", ci, b.Index(), addr, want)
			}
			if seen[b.Index()] {
				t.Fatalf("class %d buffer %d handed out twice", ci, b.Index())
			}
			seen[b.Index()] = true
			// Fill the buffer with its own index; an overlap would show as a mismatch.
			full := b.Full()
			for i := range full {
				full[i] = byte(b.Index())
			}
			held = append(held, b)
		}
		if _, err := a.AcquireClass(ci); !errors.Is(err, ErrExhausted) {
			t.Fatalf("class %d: Acquire past the count = %v, want ErrExhausted", ci, err)
		}
		for _, b := range held {
			for i, v := range b.Full() {
				if v != byte(b.Index()) {
					t.Fatalf("class %d buffer %d byte %d = %d: overwritten by a neighbour", ci, b.Index(), i, v)
				}
			}
			// An append past capacity must reallocate, not write into the neighbour.
			grown := append(b.Full(), 0xEE)
			if unsafe.SliceData(grown) == unsafe.SliceData(b.Full()) {
				t.Fatalf("class %d buffer %d: append past capacity stayed in the arena", ci, b.Index())
			}
		}
		for _, b := range held {
			a.Release(b)
		}
	}
	if err := a.CheckNoLeaks(); err != nil {
		t.Fatal(err)
	}
}

func TestStatsAndLeakReport(t *testing.T) {
	a := newArena(t, smallConfig())
	b1, _ := a.Acquire(10)
	b2, _ := a.Acquire(10)
	b3, _ := a.Acquire(5000)
	if _, err := a.Acquire(70000); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Acquire(70000) = %v", err)
	}
	a.Release(b1)
	st := a.ClassStats(0)
	if st.InUseCount != 1 || st.InUseBytes != 64 || st.HighWaterCount != 2 || st.AcquireCount != 2 || st.BufferCount != 130 {
		t.Fatalf("class 0 stats %+v", st)
	}
	if got := a.InUseCount(); got != 2 {
		t.Fatalf("InUseCount = %d, want 2", got)
	}
	err := a.CheckNoLeaks()
	if err == nil {
		t.Fatal("CheckNoLeaks = nil with two buffers held")
	}
	for _, want := range []string{"class 0 (64 bytes): 1 buffers leaked, first indices [1]", "class 2 (65536 bytes): 1 buffers leaked, first indices [0]"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("CheckNoLeaks = %q, want it to contain %q", err, want)
		}
	}
	a.Release(b2)
	a.Release(b3)
	if err := a.CheckNoLeaks(); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := a.AcquireClass(1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.AcquireClass(1); !errors.Is(err, ErrExhausted) {
		t.Fatalf("fifth AcquireClass(1) = %v, want ErrExhausted", err)
	}
	stats := a.Stats()
	if len(stats) != 3 || stats[1].ExhaustedCount != 1 || stats[1].InUseCount != 4 || stats[1].HighWaterCount != 4 {
		t.Fatalf("Stats = %+v", stats)
	}
	for i := range 4 {
		a.Release(a.BufferAt(1, i))
	}
}

func TestLIFOReuse(t *testing.T) {
	a := newArena(t, smallConfig())
	b1, _ := a.Acquire(1)
	b2, _ := a.Acquire(1)
	if b1.Index() != 0 || b2.Index() != 1 {
		t.Fatalf("first buffers are %d, %d, want 0, 1", b1.Index(), b2.Index())
	}
	a.Release(b1)
	b3, _ := a.Acquire(1)
	if b3.Index() != b1.Index() {
		t.Fatalf("reacquired buffer %d, want the one released last (%d)", b3.Index(), b1.Index())
	}
	a.Release(b2)
	a.Release(b3)
}

func TestMisuseIsCaught(t *testing.T) {
	a := newArena(t, smallConfig())
	other := newArena(t, smallConfig())

	b, _ := a.Acquire(8)
	a.Release(b)
	mustPanic(t, "not acquired (double release?)", func() { a.Release(b) })
	mustPanic(t, "zero Buffer", func() { a.Release(Buffer{}) })

	ob, _ := other.Acquire(8)
	mustPanic(t, "foreign buffer", func() { a.Release(ob) })
	other.Release(ob)

	heap := Buffer{buf: make([]byte, 8, 64)}
	mustPanic(t, "foreign buffer", func() { a.Release(heap) })
	mustPanic(t, "foreign buffer", func() { a.Release(Buffer{buf: make([]byte, 1), class: 9}) })
	mustPanic(t, "foreign buffer", func() { a.Release(Buffer{buf: make([]byte, 1), index: 1000}) })

	// A handle whose slice was swapped for another buffer of the same class.
	b1, _ := a.Acquire(8)
	b2, _ := a.Acquire(8)
	forged := b1
	forged.buf = b2.buf
	mustPanic(t, "foreign buffer", func() { a.Release(forged) })
	a.Release(b1)
	a.Release(b2)

	mustPanic(t, "not acquired", func() { a.BufferAt(0, 3) })
	mustPanic(t, "out of range", func() { a.BufferAt(0, 130) })
	mustPanic(t, "class 3 out of range", func() { a.AcquireClass(3) })

	if err := a.CheckNoLeaks(); err != nil {
		t.Fatal(err)
	}
	closed, err := New(smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	cb, _ := closed.Acquire(1)
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	if err := closed.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	mustPanic(t, "Acquire after Close", func() { closed.Acquire(1) })
	mustPanic(t, "Release after Close", func() { closed.Release(cb) })
}

func TestIovecs(t *testing.T) {
	a := newArena(t, smallConfig())
	info := a.Class(1)
	iovs := a.AppendIovecs(nil, 1)
	if len(iovs) != info.BufferCount {
		t.Fatalf("%d iovecs, want %d", len(iovs), info.BufferCount)
	}
	for i, iov := range iovs {
		if got, want := uintptr(unsafe.Pointer(iov.Base)), info.Base+uintptr(i*info.BufferSizeBytes); got != want || iov.Len != uint64(info.BufferSizeBytes) {
			t.Fatalf("iovec %d = %#x+%d, want %#x+%d", i, got, iov.Len, want, info.BufferSizeBytes)
		}
	}
	b, _ := a.AcquireClass(1)
	if got := uintptr(unsafe.Pointer(iovs[b.Index()].Base)); got != uintptr(unsafe.Pointer(unsafe.SliceData(b.Bytes()))) {
		t.Fatalf("iovec of buffer %d does not point at the buffer", b.Index())
	}
	a.Release(b)
	region := a.RegionIovec(1)
	if uintptr(unsafe.Pointer(region.Base)) != info.Base || region.Len != uint64(info.BufferCount*info.BufferSizeBytes) {
		t.Fatalf("region iovec %#x+%d", uintptr(unsafe.Pointer(region.Base)), region.Len)
	}
}

func TestBufferAtRoundTrip(t *testing.T) {
	a := newArena(t, smallConfig())
	b, _ := a.Acquire(3)
	copy(b.Full(), "hello")
	again := a.BufferAt(b.Class(), b.Index())
	if string(again.Bytes()[:5]) != "hello" || len(again.Bytes()) != 64 {
		t.Fatalf("BufferAt = %q (len %d)", again.Bytes()[:5], len(again.Bytes()))
	}
	a.Release(again)
	if err := a.CheckNoLeaks(); err != nil {
		t.Fatal(err)
	}
}

func TestLockIsOptional(t *testing.T) {
	cfg := smallConfig()
	cfg.Lock = true
	a := newArena(t, cfg)
	// Class 0 is 8 KiB and populated: it fits any sane RLIMIT_MEMLOCK (64 KiB minimum on
	// Linux), but a refusal is allowed too. Unpopulated classes are never locked.
	if a.ClassStats(1).Locked || a.ClassStats(2).Locked {
		t.Fatal("an unpopulated class was locked")
	}
	b, err := a.Acquire(1)
	if err != nil {
		t.Fatal(err)
	}
	a.Release(b)
}

// largeConfig spans the sizes a shard uses, up to its largest frames, with every
// option of a class set somewhere.
func largeConfig() Config {
	const kib, mib = 1 << 10, 1 << 20
	return Config{Classes: []ClassConfig{
		{BufferSizeBytes: 4 * kib, BufferCount: 256, Populate: true},
		{BufferSizeBytes: 64 * kib, BufferCount: 64, IdlePages: IdlePagesKeep},
		{BufferSizeBytes: 1*mib + 256*kib, BufferCount: 8},
		{BufferSizeBytes: 16 * mib, BufferCount: 2, IdlePages: IdlePagesReturn},
		{BufferSizeBytes: 64 * mib, BufferCount: 2},
	}}
}

func TestLargeClassesMap(t *testing.T) {
	a := newArena(t, largeConfig())
	big, err := a.Acquire(64 << 20)
	if err != nil {
		t.Fatal(err)
	}
	// Touch only the first and last page: the rest stays address space.
	full := big.Full()
	full[0], full[len(full)-1] = 1, 2
	a.Release(big)
	if err := a.CheckNoLeaks(); err != nil {
		t.Fatal(err)
	}
}

func TestAcquireReleaseDoNotAllocate(t *testing.T) {
	a := newArena(t, smallConfig())
	allocs := testing.AllocsPerRun(1000, func() {
		b, err := a.Acquire(100)
		if err != nil {
			panic(err)
		}
		a.Release(b)
		if _, err := a.Acquire(1 << 20); err == nil {
			panic("no error")
		}
		c, _ := a.AcquireClass(2)
		a.Release(a.BufferAt(2, c.Index()))
	})
	if allocs != 0 {
		t.Fatalf("Acquire/Release allocate %v times per run", allocs)
	}
}

// FuzzAcquireRelease drives an arena with an operation script and checks it against a
// model: which buffers are held, their sizes, and that contents survive other traffic.
func FuzzAcquireRelease(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 0x80, 0x81})
	f.Add([]byte{0xff, 0xfe, 0x10, 0x90, 0x90, 0x00, 0x00, 0x00, 0x00, 0x00})
	f.Add([]byte("acquire release acquire acquire release"))
	f.Fuzz(func(t *testing.T, script []byte) {
		a, err := New(Config{Classes: []ClassConfig{
			{BufferSizeBytes: 16, BufferCount: 3},
			{BufferSizeBytes: 48, BufferCount: 2},
			{BufferSizeBytes: 256, BufferCount: 1},
		}})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		var held []Buffer
		for _, op := range script {
			if err := a.checkInvariants(); err != nil {
				t.Fatal(err)
			}
			if op == 0xfe {
				// Give idle pages back: never a held buffer's bytes.
				a.TrimIdle()
				continue
			}
			if op == 0xff {
				// Lend the largest class to a ring and take it back, when it is free.
				if _, err := a.LendClass(2); err == nil {
					if err := a.checkInvariants(); err != nil {
						t.Fatal(err)
					}
					a.ReturnClass(2)
				}
				continue
			}
			if op&0x80 != 0 && len(held) > 0 {
				i := int(op&0x7f) % len(held)
				b := held[i]
				for j, v := range b.Bytes() {
					if v != byte(b.Index())^byte(b.Class()<<4)^byte(j) {
						t.Fatalf("buffer class %d index %d byte %d changed while held", b.Class(), b.Index(), j)
					}
				}
				a.Release(b)
				held = append(held[:i], held[i+1:]...)
				continue
			}
			sizeBytes := int(op&0x7f) * 3 // 0..381: every class and too large
			want := a.ClassFor(sizeBytes)
			full := want >= 0 && a.ClassStats(want).InUseCount == a.ClassStats(want).BufferCount
			b, err := a.Acquire(sizeBytes)
			switch {
			case want < 0:
				if !errors.Is(err, ErrTooLarge) {
					t.Fatalf("Acquire(%d) = %v, want ErrTooLarge", sizeBytes, err)
				}
				continue
			case full && err == nil:
				t.Fatalf("Acquire(%d) succeeded past the class count", sizeBytes)
			case err != nil:
				if !errors.Is(err, ErrExhausted) || !full {
					t.Fatalf("Acquire(%d) = %v with class %d at %+v", sizeBytes, err, want, a.ClassStats(want))
				}
				continue
			}
			if b.Class() != want || len(b.Bytes()) != sizeBytes {
				t.Fatalf("Acquire(%d) = class %d len %d", sizeBytes, b.Class(), len(b.Bytes()))
			}
			for _, h := range held {
				if h.Class() == b.Class() && h.Index() == b.Index() {
					t.Fatalf("class %d buffer %d handed out while held", b.Class(), b.Index())
				}
			}
			for j := range b.Bytes() {
				b.Bytes()[j] = byte(b.Index()) ^ byte(b.Class()<<4) ^ byte(j)
			}
			held = append(held, b)
		}
		if a.InUseCount() != len(held) {
			t.Fatalf("InUseCount = %d, model holds %d", a.InUseCount(), len(held))
		}
		for _, b := range held {
			a.Release(b)
		}
		if err := a.CheckNoLeaks(); err != nil {
			t.Fatal(err)
		}
	})
}

func BenchmarkAcquireRelease(b *testing.B) {
	for _, sizeBytes := range []int{4 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("arena/size=%d", sizeBytes), func(b *testing.B) {
			a := newArena(b, Config{Classes: []ClassConfig{
				{BufferSizeBytes: 4 << 10, BufferCount: 64, Populate: true},
				{BufferSizeBytes: 64 << 10, BufferCount: 64, Populate: true},
			}})
			b.ReportAllocs()
			for b.Loop() {
				buf, err := a.Acquire(sizeBytes)
				if err != nil {
					b.Fatal(err)
				}
				buf.Bytes()[0] = 1
				a.Release(buf)
			}
		})
		// The same classes returning idle pages (IdlePagesReturn): Acquire and
		// Release also mark the buffer used, for TrimIdle.
		b.Run(fmt.Sprintf("arena-returns-idle/size=%d", sizeBytes), func(b *testing.B) {
			a := newArena(b, Config{Classes: []ClassConfig{
				{BufferSizeBytes: 4 << 10, BufferCount: 64, Populate: true, IdlePages: IdlePagesReturn},
				{BufferSizeBytes: 64 << 10, BufferCount: 64, Populate: true, IdlePages: IdlePagesReturn},
			}})
			b.ReportAllocs()
			for b.Loop() {
				buf, err := a.Acquire(sizeBytes)
				if err != nil {
					b.Fatal(err)
				}
				buf.Bytes()[0] = 1
				a.Release(buf)
			}
		})
		// The baseline a Go programmer reaches for first: a sync.Pool of byte slices
		// (pointers to them, so Put does not allocate).
		b.Run(fmt.Sprintf("syncpool/size=%d", sizeBytes), func(b *testing.B) {
			pool := sync.Pool{New: func() any { s := make([]byte, sizeBytes); return &s }}
			b.ReportAllocs()
			for b.Loop() {
				p := pool.Get().(*[]byte)
				(*p)[0] = 1
				pool.Put(p)
			}
		})
	}
}

func TestLendAndReturnClass(t *testing.T) {
	a := newArena(t, smallConfig())
	b, _ := a.AcquireClass(1)
	if _, err := a.LendClass(1); !errors.Is(err, ErrClassInUse) {
		t.Fatalf("LendClass with a buffer acquired = %v, want ErrClassInUse", err)
	}
	a.Release(b)
	mem, err := a.LendClass(0) // 130 buffers: the last bitmap word is partial
	if err != nil {
		t.Fatal(err)
	}
	if err := a.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	info := a.Class(0)
	if uintptr(unsafe.Pointer(unsafe.SliceData(mem))) != info.Base || len(mem) != info.BufferCount*info.BufferSizeBytes {
		t.Fatalf("lent memory %p+%d, want %#x+%d", unsafe.SliceData(mem), len(mem), info.Base, info.BufferCount*info.BufferSizeBytes)
	}
	if _, err := a.LendClass(0); !errors.Is(err, ErrClassInUse) {
		t.Fatalf("second LendClass = %v", err)
	}
	st := a.ClassStats(0)
	if !st.Lent || st.InUseCount != st.BufferCount {
		t.Fatalf("lent class stats %+v", st)
	}
	// Small sizes now come from the next class instead of failing.
	small, err := a.Acquire(10)
	if err != nil || small.Class() != 1 {
		t.Fatalf("Acquire(10) with class 0 lent = class %d, %v", small.Class(), err)
	}
	a.Release(small)
	if err := a.CheckNoLeaks(); err == nil || !strings.Contains(err.Error(), "lent to a ring and not returned") {
		t.Fatalf("CheckNoLeaks with a lent class = %v", err)
	}
	mustPanic(t, "lent to a ring", func() { a.BufferAt(0, 5) })
	forged := Buffer{buf: mem[64:66:128], index: 1, class: 0}
	mustPanic(t, "lent to a ring", func() { a.Release(forged) })

	a.ReturnClass(0)
	if err := a.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	mustPanic(t, "not lent", func() { a.ReturnClass(0) })
	if err := a.CheckNoLeaks(); err != nil {
		t.Fatal(err)
	}
	for i := range 130 {
		b, err := a.Acquire(1)
		if err != nil || b.Class() != 0 || b.Index() != i {
			t.Fatalf("after ReturnClass, Acquire %d = class %d index %d, %v", i, b.Class(), b.Index(), err)
		}
	}
	if _, err := a.Acquire(1); err == nil {
		t.Fatal("class 0 handed out more than its count after ReturnClass")
	}
	region := a.RegionBytes(2)
	if len(region) != cap(region) || len(region) != 2*65536 {
		t.Fatalf("RegionBytes(2) len %d cap %d", len(region), cap(region))
	}
}

// BenchmarkAcquireReleaseBatch holds 64 buffers before releasing them, as a shard with
// many receives in flight does; sync.Pool's per-P cache holds one item, so it falls
// back to its shared lists here. ns/op is per buffer.
func BenchmarkAcquireReleaseBatch(b *testing.B) {
	const batch, sizeBytes = 64, 4 << 10
	b.Run("arena", func(b *testing.B) {
		a := newArena(b, Config{Classes: []ClassConfig{{BufferSizeBytes: sizeBytes, BufferCount: batch, Populate: true}}})
		var held [batch]Buffer
		b.ReportAllocs()
		for b.Loop() {
			for i := range held {
				buf, err := a.Acquire(sizeBytes)
				if err != nil {
					b.Fatal(err)
				}
				held[i] = buf
			}
			for _, buf := range held {
				a.Release(buf)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/buffer")
	})
	b.Run("syncpool", func(b *testing.B) {
		pool := sync.Pool{New: func() any { s := make([]byte, sizeBytes); return &s }}
		var held [batch]*[]byte
		b.ReportAllocs()
		for b.Loop() {
			for i := range held {
				held[i] = pool.Get().(*[]byte)
			}
			for _, p := range held {
				pool.Put(p)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/buffer")
	})
}
