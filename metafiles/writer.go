package metafiles

import (
	"sync"
	"sync/atomic"
)

// Writer does the metadata plane's blocking file work on a goroutine of its
// own: a Ready's journal append and its fdatasync, a snapshot. An fdatasync takes
// from tens of microseconds to tens of milliseconds depending on the disk; on shard
// 0 it would stall every connection and partition that shard serves. Shard 0 hands
// the task over and goes on serving (the writes that arrive meanwhile wait in the
// plane, to share the next append and fdatasync); the writer wakes it
// (shard.Shard.Wake) when the task is done, and the router finishes it on its next
// turn (Files.Finish, from metahost/router.go). One task at a time: the plane hands out the next
// only once the last is finished.
type Writer struct {
	wake func() // shard 0's Wake

	mu       sync.Mutex
	cond     sync.Cond    // broadcast when a task arrives or finishes, or the writer closes
	task     *journalTask // to write, nil when there is none
	finished *journalTask // written, not yet collected
	closed   bool         // the goroutine exits once task is nil
	ready    atomic.Bool  // finished != nil, read by shard 0 without the lock
	exited   sync.WaitGroup
	// beforeSync runs on the writer's goroutine before each fdatasync; tests hold
	// the journal with it. Read and written under mu.
	beforeSync func()
}

// journalTask is blocking file work for the writer's goroutine (a Ready's append
// and fdatasync, a snapshot's files); then continues on shard 0 with its outcome.
type journalTask struct {
	work func(beforeSync func()) error
	then func(err error)
	err  error
}

func NewWriter(wake func()) *Writer {
	w := &Writer{wake: wake}
	w.cond.L = &w.mu
	w.exited.Go(w.run)
	return w
}

func (w *Writer) run() {
	for {
		w.mu.Lock()
		for w.task == nil && !w.closed {
			w.cond.Wait()
		}
		t := w.task
		beforeSync := w.beforeSync
		w.mu.Unlock()
		if t == nil {
			return
		}

		t.err = t.work(beforeSync)

		w.mu.Lock()
		w.task, w.finished = nil, t
		w.ready.Store(true)
		w.mu.Unlock()
		w.cond.Broadcast()
		w.wake()
	}
}

// submit hands the writer its next task; it never blocks. A task must not be in
// flight.
func (w *Writer) submit(t *journalTask) {
	w.mu.Lock()
	if w.task != nil || w.finished != nil {
		w.mu.Unlock()
		panic("metafiles: a metadata journal append while another is in flight")
	}
	w.task = t
	w.mu.Unlock()
	w.cond.Broadcast()
}

// collect returns the finished task, if any.
func (w *Writer) collect() *journalTask {
	if !w.ready.Load() {
		return nil
	}
	w.mu.Lock()
	t := w.finished
	w.finished = nil
	w.ready.Store(false)
	w.mu.Unlock()
	return t
}

// await blocks until the task in flight, if any, is finished and returns it: for
// shard 0's last turn, which must not leave a numbered prepare behind.
func (w *Writer) await() *journalTask {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.task != nil {
		w.cond.Wait()
	}
	t := w.finished
	w.finished = nil
	w.ready.Store(false)
	return t
}

// Close lets the goroutine finish the task it holds and waits for it to exit.
func (w *Writer) Close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.cond.Broadcast()
	w.exited.Wait()
}

// SetBeforeSync (tests) has f run on the writer's goroutine before each
// fdatasync: a test holds the journal with it.
func (w *Writer) SetBeforeSync(f func()) {
	w.mu.Lock()
	w.beforeSync = f
	w.mu.Unlock()
}
