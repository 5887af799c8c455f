package segment

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"sort"
	"strings"
)

// SimDisk is an in-memory Storage for deterministic tests, with faults: requests
// complete in a seeded order (linked chains stay in order), syncs and writes can be
// made to fail, the disk can fill up, bits can rot at rest, and Crash returns the
// disk a machine would find after losing power now.
//
// Each file keeps two images: what reads see (the page cache) and what a crash keeps
// (the platter). Writes change the first; a completed sync copies it to the second.
// Writes completed since the file's last sync are pending: Crash keeps a seeded
// subset of them, possibly torn, and drops the rest. File creation and removal are
// durable at once (OSStorage fsyncs the directory on create), and a truncation cuts
// both images, which can only lose bytes the log has already given up on.
//
// A reservation (OpReserve) allocates space past a file's end as ext4 does with
// fallocate KEEP_SIZE: it counts against CapacityBytes, changes neither image nor
// the size, survives Close and a crash, and is given back by a truncation (which
// frees every block past the new size, the same size included) or the removal.
//
// Like the storages it stands in for, a SimDisk belongs to one goroutine.
type SimDisk struct {
	// CapacityBytes is the disk size: a write that would make the files' total size
	// exceed it fails with ErrNoSpace and writes nothing. 0 is unlimited.
	CapacityBytes int64

	rng     *rand.Rand
	files   map[string]*simFile
	handles []*simFile // by File-1; nil when closed
	queue   []*Request
	ready   []*Request

	// NoReserve makes the disk one that cannot reserve: OpReserve fails with
	// ErrReserveUnsupported.
	NoReserve bool

	syncFailures  int
	writeFailures int
}

// ErrReserveUnsupported is the simulated disk's answer to OpReserve when it cannot
// reserve (NoReserve), as EOPNOTSUPP is a filesystem's.
var ErrReserveUnsupported = fmt.Errorf("segment: simdisk: reserve: %w", errors.ErrUnsupported)

type simFile struct {
	data    []byte
	durable []byte
	pending []simWrite
	// allocated is where the file's allocated space ends: its size, or further
	// when a reservation went past it.
	allocated int64
}

// allocatedBytes is the space the file takes on the disk.
func (f *simFile) allocatedBytes() int64 { return max(f.allocated, int64(len(f.data))) }

type simWrite struct {
	offset int64
	data   []byte
}

// NewSimDisk returns an empty disk whose completion order and crashes derive from
// seed: the same seed and the same calls give the same disk.
func NewSimDisk(seed uint64) *SimDisk {
	return &SimDisk{
		rng:   rand.New(rand.NewPCG(seed, seed^0x5EC7_0D15_C0FF_EE00)),
		files: make(map[string]*simFile),
	}
}

// FailNextSyncs makes the next n syncs fail with ErrInjectedIO. A failed sync makes
// nothing durable; the writes it would have covered stay pending.
func (d *SimDisk) FailNextSyncs(n int) { d.syncFailures = n }

// FailNextWrites makes the next n writes fail with ErrInjectedIO, writing nothing.
func (d *SimDisk) FailNextWrites(n int) { d.writeFailures = n }

// InFlight returns how many submitted requests have not completed yet.
func (d *SimDisk) InFlight() int { return len(d.queue) + len(d.ready) }

// Open implements Storage.
func (d *SimDisk) Open(name string, create bool, preallocateBytes int64) (File, int64, error) {
	name = path.Clean(name)
	f, ok := d.files[name]
	if !ok {
		if !create {
			return 0, 0, fmt.Errorf("segment: simdisk: open %s: no such file", name)
		}
		f = &simFile{}
		d.files[name] = f
	}
	for i, h := range d.handles {
		if h == nil {
			d.handles[i] = f
			return File(i + 1), int64(len(f.data)), nil
		}
	}
	d.handles = append(d.handles, f)
	return File(len(d.handles)), int64(len(f.data)), nil
}

// Close implements Storage.
func (d *SimDisk) Close(f File) error {
	d.file(f)
	d.handles[f-1] = nil
	return nil
}

func (d *SimDisk) file(f File) *simFile {
	if f == 0 || int(f) > len(d.handles) || d.handles[f-1] == nil {
		panic(fmt.Sprintf("segment: simdisk: file handle %d is not open", f))
	}
	return d.handles[f-1]
}

// List implements Storage.
func (d *SimDisk) List(dir string) ([]string, error) {
	dir = path.Clean(dir)
	if dir == "." {
		dir = ""
	}
	var names []string
	for name := range d.files {
		parent := path.Dir(name)
		if parent == "." {
			parent = ""
		}
		if parent == dir {
			names = append(names, path.Base(name))
		}
	}
	sort.Strings(names)
	return names, nil
}

// Submit implements Storage.
func (d *SimDisk) Submit(r *Request) { d.queue = append(d.queue, r) }

// Poll implements Storage. It carries out a seeded number (at least one) of the
// queued chains, in a seeded order, then runs the Done hooks of what completed.
func (d *SimDisk) Poll(wait bool) int {
	if len(d.queue) == 0 {
		return 0
	}
	// Split the queue into chains: a chain ends at a request without Link.
	chains := 0
	for i, r := range d.queue {
		if !r.Link || i == len(d.queue)-1 {
			chains++
		}
	}
	take := 1 + d.rng.IntN(chains)
	for ; take > 0; take-- {
		// Pick the k-th chain still queued.
		k := d.rng.IntN(chains)
		start := 0
		for c := 0; c < k; start++ {
			if !d.queue[start].Link {
				c++
			}
		}
		end := start
		for end < len(d.queue)-1 && d.queue[end].Link {
			end++
		}
		// A seeded prefix of the chain runs now (a write completes, the sync linked
		// to it runs later); the rest stays queued as a shorter chain. A failure
		// cancels the rest at once.
		stop := start + d.rng.IntN(end-start+1)
		canceled := false
		last := start
		for i := start; i <= end; i++ {
			r := d.queue[i]
			if i > stop && !canceled {
				break
			}
			if canceled {
				r.Result, r.Err = 0, ErrCanceled
			} else {
				r.Result, r.Err = d.execute(r)
			}
			canceled = r.Link && r.Err != nil
			d.ready = append(d.ready, r)
			last = i
		}
		d.queue = append(d.queue[:start], d.queue[last+1:]...)
		if last == end {
			chains--
		}
	}
	n := len(d.ready)
	ready := d.ready
	d.ready = nil
	for _, r := range ready {
		r.Done(r)
	}
	return n
}

func (d *SimDisk) totalBytes() int64 {
	var n int64
	for _, f := range d.files {
		n += f.allocatedBytes()
	}
	return n
}

func (d *SimDisk) execute(r *Request) (int64, error) {
	switch r.Op {
	case OpWrite:
		f := d.file(r.File)
		if d.writeFailures > 0 {
			d.writeFailures--
			return 0, ErrInjectedIO
		}
		end := r.Offset + int64(len(r.Data))
		if grow := end - f.allocatedBytes(); grow > 0 && d.CapacityBytes > 0 && d.totalBytes()+grow > d.CapacityBytes {
			return 0, ErrNoSpace
		}
		f.data = writeAt(f.data, r.Offset, r.Data)
		f.pending = append(f.pending, simWrite{offset: r.Offset, data: append([]byte(nil), r.Data...)})
		return int64(len(r.Data)), nil
	case OpRead:
		f := d.file(r.File)
		if r.Offset >= int64(len(f.data)) {
			return 0, nil
		}
		return int64(copy(r.Data, f.data[r.Offset:])), nil
	case OpSync:
		f := d.file(r.File)
		if d.syncFailures > 0 {
			d.syncFailures--
			return 0, ErrInjectedIO
		}
		// What reads see becomes durable: the writes since the last sync, in order
		// (the rest of the page cache is durable already), and a size a
		// truncation grew with zeros. Cheaper than copying the whole file, which a
		// journal file synced after each append made quadratic.
		for _, w := range f.pending {
			f.durable = writeAt(f.durable, w.offset, w.data)
		}
		if len(f.durable) != len(f.data) {
			f.durable = resize(f.durable, int64(len(f.data)))
		}
		f.pending = f.pending[:0]
		return 0, nil
	case OpReserve:
		f := d.file(r.File)
		if d.NoReserve {
			return 0, ErrReserveUnsupported
		}
		end := r.Offset + r.Length
		if grow := end - f.allocatedBytes(); grow > 0 && d.CapacityBytes > 0 && d.totalBytes()+grow > d.CapacityBytes {
			return 0, ErrNoSpace
		}
		f.allocated = max(f.allocated, end)
		return 0, nil
	case OpTruncate:
		f := d.file(r.File)
		f.allocated = 0 // what is past the new size is freed
		f.data = resize(f.data, r.Offset)
		if int64(len(f.durable)) > r.Offset {
			f.durable = f.durable[:r.Offset]
		}
		kept := f.pending[:0]
		for _, w := range f.pending {
			if w.offset >= r.Offset {
				continue
			}
			if end := w.offset + int64(len(w.data)); end > r.Offset {
				w.data = w.data[:r.Offset-w.offset]
			}
			kept = append(kept, w)
		}
		f.pending = kept
		return 0, nil
	case OpRemove:
		name := path.Clean(r.Name)
		for _, h := range d.handles {
			if h != nil && h == d.files[name] {
				panic("segment: simdisk: remove of an open file " + name)
			}
		}
		delete(d.files, name)
		return 0, nil
	}
	panic(fmt.Sprintf("segment: simdisk: unknown op %d", r.Op))
}

func writeAt(b []byte, offset int64, data []byte) []byte {
	if end := offset + int64(len(data)); end > int64(len(b)) {
		b = resize(b, end)
	}
	copy(b[offset:], data)
	return b
}

func resize(b []byte, size int64) []byte {
	if size <= int64(len(b)) {
		return b[:size]
	}
	if size <= int64(cap(b)) {
		old := len(b)
		b = b[:size]
		clear(b[old:])
		return b
	}
	grown := make([]byte, size, size+size/2)
	copy(grown, b)
	return grown
}

// Crash returns the disk as it would be found after a power loss now: every synced
// byte, plus a subset of the writes completed since each file's last sync chosen by
// seed, each kept whole, torn (a prefix of it), or lost. Requests still queued never
// happened. The receiver is left unchanged (tests crash one disk many ways).
func (d *SimDisk) Crash(seed uint64) *SimDisk {
	rng := rand.New(rand.NewPCG(seed, seed^0xC4A5_4000_0000_0001))
	after := NewSimDisk(seed ^ 0xD15C)
	after.CapacityBytes = d.CapacityBytes
	names := d.Files()
	for _, name := range names {
		f := d.files[name]
		image := append([]byte(nil), f.durable...)
		for _, w := range f.pending {
			switch rng.IntN(3) {
			case 0: // lost
			case 1:
				image = writeAt(image, w.offset, w.data)
			case 2:
				image = writeAt(image, w.offset, w.data[:rng.IntN(len(w.data)+1)])
			}
		}
		after.files[name] = &simFile{data: image, durable: append([]byte(nil), image...), allocated: f.allocated}
	}
	return after
}

// Files returns the names of every file on the disk, sorted.
func (d *SimDisk) Files() []string {
	names := make([]string, 0, len(d.files))
	for name := range d.files {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// ReadFile returns a copy of what a read of the whole file would see, or nil.
func (d *SimDisk) ReadFile(name string) []byte {
	f, ok := d.files[path.Clean(name)]
	if !ok {
		return nil
	}
	return append([]byte(nil), f.data...)
}

// WriteFile replaces a file's content, durably (test setup and damage).
func (d *SimDisk) WriteFile(name string, data []byte) {
	d.files[path.Clean(name)] = &simFile{data: append([]byte(nil), data...), durable: append([]byte(nil), data...)}
}

// RemoveFile deletes a file at once (test damage: a lost index, say).
func (d *SimDisk) RemoveFile(name string) { delete(d.files, path.Clean(name)) }

// FlipBit inverts one bit, at bitOffset bits into the file, in both images: rot at
// rest, which no sync or crash undoes.
func (d *SimDisk) FlipBit(name string, bitOffset int64) error {
	f, ok := d.files[path.Clean(name)]
	if !ok {
		return fmt.Errorf("segment: simdisk: flip bit: no file %s", name)
	}
	i := bitOffset / 8
	if i >= int64(len(f.data)) {
		return fmt.Errorf("segment: simdisk: flip bit %d past the end of %s (%d bytes)", bitOffset, name, len(f.data))
	}
	f.data[i] ^= 1 << (bitOffset % 8)
	if i < int64(len(f.durable)) {
		f.durable[i] ^= 1 << (bitOffset % 8)
	}
	return nil
}

// AllocatedBytes returns the space a file takes on the disk: its size, or more
// when a reservation went past it.
func (d *SimDisk) AllocatedBytes(name string) int64 {
	f, ok := d.files[path.Clean(name)]
	if !ok {
		return 0
	}
	return f.allocatedBytes()
}

// SizeOf returns a file's size and whether it exists.
func (d *SimDisk) SizeOf(name string) (int64, bool) {
	f, ok := d.files[path.Clean(name)]
	if !ok {
		return 0, false
	}
	return int64(len(f.data)), true
}

// hasPrefix reports whether any file name starts with prefix (test helper).
func (d *SimDisk) hasPrefix(prefix string) bool {
	for name := range d.files {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}
