package arena

import (
	"bytes"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// residentPages counts the pages of b that are resident (mincore).
func residentPages(t testing.TB, b []byte) int {
	t.Helper()
	vec := make([]byte, (len(b)+pageBytes-1)/pageBytes)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)),
		uintptr(unsafe.Pointer(unsafe.SliceData(vec)))); errno != 0 {
		t.Fatal(errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// statmResidentBytes is this process's resident set, from /proc/self/statm.
func statmResidentBytes(t testing.TB) int {
	t.Helper()
	text, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(text))
	if len(fields) < 2 {
		t.Fatalf("/proc/self/statm: %q", text)
	}
	pages, err := strconv.Atoi(fields[1])
	if err != nil {
		t.Fatal(err)
	}
	return pages * pageBytes
}

// lazyFreeBytes is this process's LazyFree of /proc/self/smaps_rollup: pages
// MADV_FREE marked that the kernel has not taken yet (still counted resident).
func lazyFreeBytes(t testing.TB) int {
	t.Helper()
	text, err := os.ReadFile("/proc/self/smaps_rollup")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(text)) {
		if rest, ok := strings.CutPrefix(line, "LazyFree:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no LazyFree in /proc/self/smaps_rollup")
	return 0
}

// burst acquires every buffer of class ci, writes every page of it (as a receive
// of a frame that size does) and releases them all.
func burst(t testing.TB, a *Arena, ci int) {
	t.Helper()
	var held []Buffer
	for range a.Class(ci).BufferCount {
		b, err := a.AcquireClass(ci)
		if err != nil {
			t.Fatal(err)
		}
		full := b.Full()
		for i := 0; i < len(full); i += pageBytes {
			full[i] = byte(i/pageBytes) | 1
		}
		full[len(full)-1] = 1
		held = append(held, b)
	}
	for _, b := range held {
		a.Release(b)
	}
}

// A node that took one burst of the largest frames gives their pages back once
// they have lain idle a whole TrimIdle interval, and only the classes that
// return idle pages do: the resident set (/proc/self/statm) falls by them. The
// log shows the same burst with its pages kept, and marked MADV_FREE at Release
// as ClassConfig.FreePagesOnRelease did (still resident without memory pressure:
// LazyFree).
func TestTrimIdleGivesABurstsPagesBack(t *testing.T) {
	const mib = 1 << 20
	a := newArena(t, Config{Classes: []ClassConfig{
		{BufferSizeBytes: 1*mib + 256<<10, BufferCount: 8},
		{BufferSizeBytes: 16 * mib, BufferCount: 2},
		{BufferSizeBytes: 64 * mib, BufferCount: 2},
		{BufferSizeBytes: 128 * mib, BufferCount: 1, IdlePages: IdlePagesKeep},
	}})
	returning := 10*mib + 32*mib + 128*mib
	for ci := range a.ClassCount() {
		burst(t, a, ci)
	}
	afterBurst := statmResidentBytes(t)
	if got := a.TrimIdle(); got != 0 {
		t.Fatalf("TrimIdle right after the burst gave back %d bytes, want 0 (every buffer used since the last TrimIdle)", got)
	}
	if got := a.TrimIdle(); got != returning {
		t.Fatalf("TrimIdle after an idle interval gave back %d bytes, want %d", got, returning)
	}
	afterTrim := statmResidentBytes(t)
	t.Logf("TrimIdle (MADV_DONTNEED): resident %d MiB after the burst, %d MiB after an idle interval (%d MiB given back)",
		afterBurst/mib, afterTrim/mib, (afterBurst-afterTrim)/mib)
	if fell := afterBurst - afterTrim; fell < returning-8*mib {
		t.Errorf("the resident set fell by %d MiB, want about %d MiB", fell/mib, returning/mib)
	}
	for ci := range a.ClassCount() {
		resident := residentPages(t, a.classes[ci].mem)
		want := 0
		if ci == 3 {
			want = len(a.classes[ci].mem) / pageBytes
		}
		if resident != want {
			t.Errorf("class %d: %d pages resident after TrimIdle, want %d", ci, resident, want)
		}
	}
	if got := a.TrimIdle(); got != 0 {
		t.Errorf("a TrimIdle with nothing used since the last: %d bytes, want 0", got)
	}
	// A given-back buffer is used again as if new (its pages come back zeroed).
	b, err := a.AcquireClass(2)
	if err != nil {
		t.Fatal(err)
	}
	if full := b.Full(); full[12345] != 0 {
		t.Errorf("a given-back buffer's byte: %d, want 0", full[12345])
	}
	b.Full()[0] = 7
	a.Release(b)

	// The same burst marked MADV_FREE at each Release, for the log.
	free := newArena(t, Config{Classes: []ClassConfig{{BufferSizeBytes: 64 * mib, BufferCount: 2, IdlePages: IdlePagesKeep}}})
	before, lazyBefore := statmResidentBytes(t), lazyFreeBytes(t)
	burst(t, free, 0)
	afterFreeBurst := statmResidentBytes(t)
	if err := unix.Madvise(free.classes[0].mem, unix.MADV_FREE); err != nil {
		t.Fatal(err)
	}
	t.Logf("kept: +%d MiB resident after a burst of 2 x 64 MiB, for good; MADV_FREE at Release: %d MiB resident after it, of which %d MiB LazyFree",
		(afterFreeBurst-before)/mib, (statmResidentBytes(t)-before)/mib, (lazyFreeBytes(t)-lazyBefore)/mib)
}

// TrimIdle gives back only idle buffers: never one in use or lent, never one used
// since the previous TrimIdle, and never a byte of a page a buffer in use shares
// (a class whose buffers are not whole pages). A long life of random traffic
// checks every held buffer's bytes after each TrimIdle, and crosses the idle
// bound many times.
func TestTrimIdleOnlyIdleBuffers(t *testing.T) {
	a := newArena(t, Config{Classes: []ClassConfig{
		{BufferSizeBytes: 4 << 10, BufferCount: 130},
		{BufferSizeBytes: 6000, BufferCount: 40},    // buffers share pages
		{BufferSizeBytes: 8 << 10, BufferCount: 64}, // lent to a ring now and then
		{BufferSizeBytes: 64 << 10, BufferCount: 16},
		{BufferSizeBytes: 1<<20 + 256<<10, BufferCount: 4},
	}})
	rng := rand.New(rand.NewPCG(1, 2))
	var held []Buffer
	pattern := func(b Buffer, i int) byte { return byte(b.Index()*7+b.Class()*31+i) | 1 }
	// The bytes written and checked: all of a small buffer; of a large one,
	// those around each page boundary and the middle of each page.
	marked := func(b Buffer, visit func(i int)) {
		full := b.Full()
		if len(full) < 16<<10 {
			for i := range full {
				visit(i)
			}
			return
		}
		for page := 0; page < len(full); page += pageBytes {
			for i := range 16 {
				visit(page + i)
				visit(page + pageBytes/2 + i)
				visit(min(page+pageBytes, len(full)) - 1 - i)
			}
		}
	}
	fill := func(b Buffer) {
		marked(b, func(i int) { b.Full()[i] = pattern(b, i) })
	}
	check := func(when string, b Buffer) {
		marked(b, func(i int) {
			if v := b.Full()[i]; v != pattern(b, i) {
				t.Fatalf("%s: class %d buffer %d byte %d = %d, want %d", when, b.Class(), b.Index(), i, v, pattern(b, i))
			}
		})
	}
	var returnedBytes int
	lent := false
	for step := range 10_000 {
		switch op := rng.IntN(100); {
		case op < 45:
			ci := rng.IntN(a.ClassCount())
			if b, err := a.AcquireClass(ci); err == nil {
				fill(b)
				held = append(held, b)
			}
		case op < 90 && len(held) > 0:
			i := rng.IntN(len(held))
			check("at Release", held[i])
			a.Release(held[i])
			held = append(held[:i], held[i+1:]...)
		case op < 92:
			if lent {
				a.ReturnClass(2)
			} else if mem, err := a.LendClass(2); err == nil {
				clear(mem) // the ring receives into them
			} else {
				continue
			}
			lent = !lent
		default:
			returnedBytes += a.TrimIdle()
			for _, b := range held {
				check("after TrimIdle", b)
			}
		}
		if err := a.checkInvariants(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
	for ci := range a.ClassCount() {
		if s := a.ClassStats(ci); s.TrimmedCount < uint64(s.BufferCount) {
			t.Errorf("class %d: %d buffers given back over the run, want the class's %d crossed at least once", ci, s.TrimmedCount, s.BufferCount)
		}
	}
	if returnedBytes == 0 {
		t.Fatal("nothing given back over the run")
	}
}

// A class used in every interval keeps its pages: TrimIdle takes none of a
// buffer acquired or released since the previous TrimIdle.
func TestTrimIdleSteadyUseKeepsPages(t *testing.T) {
	a := newArena(t, Config{Classes: []ClassConfig{{BufferSizeBytes: 64 << 10, BufferCount: 4}}})
	for interval := range 100 {
		b, err := a.Acquire(100)
		if err != nil {
			t.Fatal(err)
		}
		b.Full()[0] = 1
		if interval%2 == 0 {
			a.Release(b)
		}
		if got := a.TrimIdle(); got != 0 {
			t.Fatalf("interval %d: TrimIdle gave back %d bytes of a buffer in steady use", interval, got)
		}
		if interval%2 == 1 {
			a.Release(b)
		}
	}
	if s := a.ClassStats(0); s.TrimmedCount != 0 || s.HighWaterCount != 1 {
		t.Fatalf("%+v: want nothing given back, one buffer used", s)
	}
}

// Which classes give idle pages back: by default those not populated; never one
// that is locked, registered with a ring or lent to one.
func TestTrimIdleClasses(t *testing.T) {
	a := newArena(t, Config{Classes: []ClassConfig{
		{BufferSizeBytes: 4096, BufferCount: 2, Populate: true},                                 // default: kept
		{BufferSizeBytes: 8192, BufferCount: 2},                                                 // default: returned
		{BufferSizeBytes: 3 * 4096, BufferCount: 2, IdlePages: IdlePagesKeep},                   // kept
		{BufferSizeBytes: 4 * 4096, BufferCount: 2, IdlePages: IdlePagesReturn, Populate: true}, // returned
		{BufferSizeBytes: 5 * 4096, BufferCount: 2},                                             // registered
		{BufferSizeBytes: 6 * 4096, BufferCount: 2},                                             // registered
		{BufferSizeBytes: 7 * 4096, BufferCount: 2},                                             // registered
	}})
	a.RegionBytes(4)
	a.RegionIovec(5)
	a.AppendIovecs(nil, 6)
	want := []bool{false, true, false, true, false, false, false}
	for ci := range a.ClassCount() {
		if got := a.ClassStats(ci).ReturnsIdlePages; got != want[ci] {
			t.Errorf("class %d: ReturnsIdlePages %t, want %t", ci, got, want[ci])
		}
		burst(t, a, ci)
	}
	a.TrimIdle()
	a.TrimIdle()
	for ci := range a.ClassCount() {
		resident := residentPages(t, a.classes[ci].mem)
		if kept := resident == len(a.classes[ci].mem)/pageBytes; kept == want[ci] || (!kept && resident != 0) {
			t.Errorf("class %d: %d of %d pages resident after an idle interval (returns idle pages: %t)",
				ci, resident, len(a.classes[ci].mem)/pageBytes, want[ci])
		}
	}

	// A lent class is the ring's: TrimIdle leaves it whole until it comes back.
	mem, err := a.LendClass(1)
	if err != nil {
		t.Fatal(err)
	}
	copy(mem, bytes.Repeat([]byte{9}, len(mem)))
	a.TrimIdle()
	a.TrimIdle()
	if mem[0] != 9 || mem[len(mem)-1] != 9 {
		t.Fatal("TrimIdle gave back the pages of a lent class")
	}
	a.ReturnClass(1)
	if got := a.TrimIdle(); got != 0 {
		t.Fatalf("TrimIdle just after ReturnClass: %d bytes, want 0", got)
	}
	if got := a.TrimIdle(); got != len(mem) {
		t.Fatalf("TrimIdle an interval after ReturnClass: %d bytes, want the class's %d", got, len(mem))
	}

	if n := testing.AllocsPerRun(100, func() { a.TrimIdle() }); n != 0 {
		t.Errorf("TrimIdle allocates %v times", n)
	}
}

// BenchmarkReleasePages is one large frame's life: its buffer acquired, written
// whole (as a receive writes it), released; kept resident, or with its pages
// marked MADV_FREE (what ClassConfig.FreePagesOnRelease did at each Release) or
// given back with MADV_DONTNEED (what TrimIdle does to an idle buffer) before the
// Release. The cost of advice is the madvise and the next write's page faults.
func BenchmarkReleasePages(b *testing.B) {
	const mib = 1 << 20
	for _, size := range []int{1*mib + 256<<10, 16 * mib, 64 * mib} {
		frame := bytes.Repeat([]byte{0x5a}, size)
		for _, mode := range []struct {
			name   string
			advice int
		}{{"keep", -1}, {"MADV_FREE", unix.MADV_FREE}, {"MADV_DONTNEED", unix.MADV_DONTNEED}} {
			b.Run(strconv.Itoa(size>>10)+"KiB/"+mode.name, func(b *testing.B) {
				a := newArena(b, Config{Classes: []ClassConfig{{BufferSizeBytes: size, BufferCount: 1, IdlePages: IdlePagesKeep}}})
				b.SetBytes(int64(size))
				for b.Loop() {
					buf, err := a.AcquireClass(0)
					if err != nil {
						b.Fatal(err)
					}
					copy(buf.Full(), frame)
					if mode.advice >= 0 {
						if err := unix.Madvise(buf.Full(), mode.advice); err != nil {
							b.Fatal(err)
						}
					}
					a.Release(buf)
				}
			})
		}
	}
}
