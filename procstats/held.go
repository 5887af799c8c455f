package procstats

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"slices"
	"time"
)

// reopenInterval is how long a file that could not be opened is left before a
// sample tries it again: a cgroup file that a host lacks for good (memory.max
// at the root of a v1 host) costs an open and an error at most this often,
// not at every sample, and one that appears later is read within it.
const reopenInterval = 10 * time.Second

// heldFileFirstBytes is a held file's first buffer, doubled (up to
// fileMaxBytes) while a read fills it: /proc/<pid>/stat and /proc/<pid>/io fit
// at once, /proc/meminfo and a 2-core machine's /proc/stat after one doubling.
const heldFileFirstBytes = 1 << 10

var errNotReopenedYet = errors.New("procstats: the file could not be opened lately")

// heldFile is a file every sample reads again, opened at the first sample and
// kept open: each sample reads it from offset 0 into the buffer it keeps. The
// files of /proc and of the cgroup tree answer every read at offset 0 with
// their current text, so a sample neither opens a file nor allocates once the
// buffers fit (a file of an fs.FS without io.ReaderAt is opened at each read).
type heldFile struct {
	name string
	// file is open, and reader is its io.ReaderAt; nil when not opened yet,
	// after a read failed, or after an open failed at openFailedAt.
	file         fs.File
	reader       io.ReaderAt
	openFailed   bool
	openFailedAt time.Time
	// buf holds the text of the last read.
	buf []byte
}

// read gives the file's current text (at most fileMaxBytes), valid until the
// next read. A read that fails closes the file, and the next read opens it
// again; an open that fails is not tried again before reopenInterval has
// passed on now's clock (or now has gone back).
func (h *heldFile) read(fsys fs.FS, now time.Time) ([]byte, error) {
	if h.file == nil {
		if h.openFailed && now.Sub(h.openFailedAt) < reopenInterval && !now.Before(h.openFailedAt) {
			return nil, errNotReopenedYet
		}
		f, err := fsys.Open(h.name)
		if err != nil {
			h.openFailed, h.openFailedAt = true, now
			return nil, err
		}
		h.openFailed = false
		reader, ok := f.(io.ReaderAt)
		if !ok {
			defer f.Close()
			return h.readSequentially(f)
		}
		h.file, h.reader = f, reader
	}
	if cap(h.buf) == 0 {
		h.buf = make([]byte, heldFileFirstBytes)
	}
	for {
		buf := h.buf[:cap(h.buf)]
		n, err := h.reader.ReadAt(buf, 0)
		if err != nil && err != io.EOF {
			h.close()
			return nil, err
		}
		if n < len(buf) || err == io.EOF || len(buf) >= fileMaxBytes {
			return buf[:n], nil
		}
		// The text may go on past the buffer: read it all again into a larger
		// one, so that its parts come from one moment.
		h.buf = make([]byte, min(2*len(buf), fileMaxBytes))
	}
}

// readSequentially reads f whole (at most fileMaxBytes) into the buffer.
func (h *heldFile) readSequentially(f fs.File) ([]byte, error) {
	buf := h.buf[:0]
	for len(buf) < fileMaxBytes {
		buf = slices.Grow(buf, heldFileFirstBytes)
		n, err := f.Read(buf[len(buf):min(cap(buf), fileMaxBytes)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	h.buf = buf
	return buf, nil
}

// close closes the file if it is open; the next read opens it again.
func (h *heldFile) close() {
	if h.file != nil {
		h.file.Close()
	}
	h.file, h.reader = nil, nil
}

// heldCgroups are the cgroup files a Sampler reads, held as heldFile holds
// them, for the walk of the process's cgroups as /proc/<pid>/cgroup last
// named them: a process moved to another cgroup is walked anew.
type heldCgroups struct {
	made  bool
	text  []byte
	walk  cgroupWalk
	files [len(cgroupVersions)][][cgroupFiles]heldFile
}

// memory is CgroupMemory's answer for a process whose /proc/<pid>/cgroup
// reads cgroupText, on the cgroup tree root.
func (c *heldCgroups) memory(root fs.FS, cgroupText []byte, host Memory, now time.Time) (Memory, bool) {
	if !c.made || !bytes.Equal(cgroupText, c.text) {
		c.remake(cgroupText)
	}
	return c.walk.memory(host, func(version, level int, file cgroupFile) ([]byte, error) {
		return c.files[version][level][file].read(root, now)
	})
}

func (c *heldCgroups) remake(cgroupText []byte) {
	c.close()
	c.made, c.text = true, append(c.text[:0], cgroupText...)
	c.walk = newCgroupWalk(cgroupText)
	for version, levels := range c.walk.levels {
		c.files[version] = make([][cgroupFiles]heldFile, len(levels))
		for level := range levels {
			for file := range cgroupFiles {
				c.files[version][level][file].name = c.walk.path(version, level, file)
			}
		}
	}
}

func (c *heldCgroups) close() {
	for _, levels := range c.files {
		for level := range levels {
			for file := range levels[level] {
				levels[level][file].close()
			}
		}
	}
}
