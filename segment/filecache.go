package segment

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// FileCache bounds the files open at once under many storages (one per partition
// directory): a log keeps a handle to every file it has (each segment's .log and
// .index, each consumer's offset file), and the partition plane its group state and
// journal files, so ten thousand partitions would hold some thirty thousand
// descriptors, past a common open-file limit. The storages a FileCache wraps
// (Storage) hand out handles of their own and keep at most openMax of the files
// behind them open: the least recently used are closed and opened again, by name,
// when a request next needs them. A partition that works keeps its files open; a
// sealed segment nobody reads and a partition nobody writes give theirs back.
//
// A request in flight pins its file from Submit until its Done runs, so a file is
// never closed under a request, and its descriptor never reused by another file
// while a request holds it: the shard's ring resolves a request's descriptor when
// it issues it, which may be long after the submit (behind a link, or in the
// kernel's workers). When every open file is pinned, a file is opened past the
// budget (counted in OverBudget) and closed again once its requests are done:
// requests never wait for a descriptor, so no wait can deadlock on another's.
// The budget should leave room for the requests a shard has in flight at once.
//
// Closing a file whose writes are not yet synced and syncing it later through
// another descriptor makes them durable just the same (fdatasync writes back the
// file's dirty pages, whoever wrote them), and a writeback error in between is
// reported to that later sync: Linux reports an error no descriptor has seen to
// the next one that syncs (since 4.16, errseq).
//
// A FileCache and its storages belong to one goroutine, the shard's.
type FileCache struct {
	openMax int
	// lru lists the open files no request pins, most recently used first.
	lru   cachedFile // sentinel: lru.next is the newest, lru.prev the oldest
	stats FileCacheStats
}

// FileCacheStats is what a FileCache did.
type FileCacheStats struct {
	Open       int    // files open now
	OpenPeak   int    // the most open at once
	Opens      uint64 // files opened by their storage's Open
	Reopens    uint64 // files opened again for a request after they were closed
	Evictions  uint64 // files closed to make room
	OverBudget uint64 // files opened past the budget: every open one was pinned
}

// NewFileCache returns a cache that keeps at most openMax files open (at least 1).
func NewFileCache(openMax int) *FileCache {
	c := &FileCache{openMax: max(openMax, 1)}
	c.lru.next, c.lru.prev = &c.lru, &c.lru
	return c
}

// OpenMax is the budget.
func (c *FileCache) OpenMax() int { return c.openMax }

// Stats returns what the cache did so far.
func (c *FileCache) Stats() FileCacheStats { return c.stats }

// FilesBudget is the share of this process's open-file limit (the soft
// RLIMIT_NOFILE) for one of shares file caches: half the limit split evenly, at
// least FilesBudgetMin each. The other half is for everything else the process
// opens: connections, rings, the metadata journal and snapshots, replica links.
func FilesBudget(shares int) int {
	var lim unix.Rlimit
	limit := uint64(1024) // the usual default soft limit, when it cannot be read
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) == nil {
		limit = lim.Cur
	}
	limit = min(limit, 1<<24) // RLIM_INFINITY
	return max(int(limit/2/uint64(max(shares, 1))), FilesBudgetMin)
}

// FilesBudgetMin is the smallest budget FilesBudget gives: a few partitions'
// worth of working files.
const FilesBudgetMin = 64

// cachedFile is one file a storage handed out a handle for.
type cachedFile struct {
	owner *CachedStorage
	name  string
	inner File // the owner's inner handle; 0 while closed
	pins  int  // requests in flight on it
	// closed: the owner's handle was closed while requests pinned the file; it
	// closes once they are done.
	closed     bool
	prev, next *cachedFile // in the cache's lru while open and unpinned
}

func (c *FileCache) pushFront(f *cachedFile) {
	f.prev, f.next = &c.lru, c.lru.next
	f.next.prev, c.lru.next = f, f
}

func unlink(f *cachedFile) {
	f.prev.next, f.next.prev = f.next, f.prev
	f.prev, f.next = nil, nil
}

// makeRoom closes the least recently used unpinned files until one more may open.
func (c *FileCache) makeRoom() {
	for c.stats.Open >= c.openMax && c.lru.prev != &c.lru {
		c.evict(c.lru.prev)
	}
	if c.stats.Open >= c.openMax {
		c.stats.OverBudget++
	}
}

// trim closes unpinned files while more than the budget are open (after files
// were opened past it).
func (c *FileCache) trim() {
	for c.stats.Open > c.openMax && c.lru.prev != &c.lru {
		c.evict(c.lru.prev)
	}
}

func (c *FileCache) evict(f *cachedFile) {
	unlink(f)
	_ = c.closeInner(f) // nothing was in flight on it: an error here loses nothing
	c.stats.Evictions++
}

func (c *FileCache) closeInner(f *cachedFile) error {
	err := f.owner.inner.Close(f.inner)
	f.inner = 0
	c.stats.Open--
	return err
}

func (c *FileCache) opened() {
	c.stats.Open++
	c.stats.OpenPeak = max(c.stats.OpenPeak, c.stats.Open)
}

// Storage wraps inner (a storage no one else uses) so that its files count
// against the cache's budget.
func (c *FileCache) Storage(inner Storage) *CachedStorage {
	s := &CachedStorage{cache: c, inner: inner}
	s.onDone = s.done
	return s
}

// CachedStorage is a Storage whose files a FileCache keeps open or closes; see
// FileCache.
type CachedStorage struct {
	cache  *FileCache
	inner  Storage
	files  []*cachedFile // by File-1; nil when free
	free   []File
	onDone func(*Request) // s.done, bound once: a submit allocates nothing

	// failed holds requests completed at Submit (their file could not be opened
	// again, or an earlier linked request failed): their Done runs at the next
	// Poll, as the contract wants.
	failed     []*Request
	running    []*Request
	cancelNext bool
	depth      int
}

// Open implements Storage. The file counts against the budget until Close.
func (s *CachedStorage) Open(name string, create bool, preallocateBytes int64) (File, int64, error) {
	c := s.cache
	c.makeRoom()
	inner, size, err := s.inner.Open(name, create, preallocateBytes)
	if err != nil {
		return 0, 0, err
	}
	c.opened()
	c.stats.Opens++
	f := &cachedFile{owner: s, name: name, inner: inner}
	c.pushFront(f)
	var h File
	if n := len(s.free); n > 0 {
		h = s.free[n-1]
		s.free = s.free[:n-1]
		s.files[h-1] = f
	} else {
		s.files = append(s.files, f)
		h = File(len(s.files))
	}
	return h, size, nil
}

func (s *CachedStorage) file(h File) *cachedFile {
	if h == 0 || int(h) > len(s.files) || s.files[h-1] == nil {
		panic(fmt.Sprintf("segment: CachedStorage: file handle %d is not open", h))
	}
	return s.files[h-1]
}

// Close implements Storage. A file requests still pin (a bug of the caller's, as
// for every storage) closes once they are done.
func (s *CachedStorage) Close(h File) error {
	f := s.file(h)
	s.files[h-1] = nil
	s.free = append(s.free, h)
	if f.pins > 0 {
		f.closed = true
		return nil
	}
	if f.inner == 0 {
		return nil
	}
	unlink(f)
	return s.cache.closeInner(f)
}

// List implements Storage.
func (s *CachedStorage) List(dir string) ([]string, error) { return s.inner.List(dir) }

// Submit implements Storage: the request's file is opened again if it was closed,
// and pinned until the request's Done runs.
func (s *CachedStorage) Submit(r *Request) {
	if s.cancelNext {
		s.cancelNext = r.Link
		s.fail(r, ErrCanceled)
		return
	}
	if r.File == 0 { // a removal, by name
		s.inner.Submit(r)
		return
	}
	f := s.file(r.File)
	if f.inner == 0 {
		if err := s.reopen(f); err != nil {
			s.cancelNext = r.Link
			s.fail(r, err)
			return
		}
	} else if f.pins == 0 {
		unlink(f)
	}
	f.pins++
	r.cached, r.callerDone, r.callerFile = f, r.Done, r.File
	r.Done, r.File = s.onDone, f.inner
	s.inner.Submit(r)
}

// reopen opens a file the cache had closed, making room for it first.
func (s *CachedStorage) reopen(f *cachedFile) error {
	c := s.cache
	c.makeRoom()
	inner, _, err := s.inner.Open(f.name, false, 0)
	if err != nil {
		return fmt.Errorf("segment: open %s again: %w", f.name, err)
	}
	f.inner = inner
	c.opened()
	c.stats.Reopens++
	return nil
}

// done unpins a request's file and hands the request back to its submitter.
func (s *CachedStorage) done(r *Request) {
	f := r.cached
	r.Done, r.File = r.callerDone, r.callerFile
	r.cached, r.callerDone = nil, nil
	c := s.cache
	f.pins--
	if f.pins == 0 {
		if f.closed {
			_ = c.closeInner(f)
		} else {
			c.pushFront(f)
			c.trim()
		}
	}
	r.Done(r)
}

func (s *CachedStorage) fail(r *Request, err error) {
	r.Result, r.Err = 0, err
	s.failed = append(s.failed, r)
}

// Poll implements Storage.
func (s *CachedStorage) Poll(wait bool) int {
	if len(s.failed) == 0 {
		return s.inner.Poll(wait)
	}
	n := s.inner.Poll(false)
	// A Done hook may Poll again: the nested call works on its own batch.
	s.depth++
	defer func() { s.depth-- }()
	var batch []*Request
	if s.depth == 1 {
		batch = s.running[:0]
	}
	batch = append(batch, s.failed...)
	clear(s.failed)
	s.failed = s.failed[:0]
	for _, r := range batch {
		r.Done(r)
	}
	if s.depth == 1 {
		clear(batch)
		s.running = batch[:0]
	}
	return n + len(batch)
}

// Inner returns the wrapped storage.
func (s *CachedStorage) Inner() Storage { return s.inner }
