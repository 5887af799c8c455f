package partitionhost

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/request"
	"github.com/iggy-shard/iggy-shard/segment"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/wire"
)

// eventLog decides which occurrences of one kind of trouble get a log line: the
// first on each connection, and at most one line per interval over all of them,
// which counts the occurrences left out since the line before. Trouble that comes
// back after a quiet episodeGap is a new episode: every connection gets its line
// again. One shard owns one; time is an input (the shard's clock), so a test
// drives it without waiting.
//
// Why both bounds: a full disk refuses every send of every producer, thousands a
// second, and a line each would fill the disk the log lives on, or bury it; one line
// per connection names who is affected, the interval keeps a thousand producers to
// one line a second.
type eventLog struct {
	interval   time.Duration
	episodeGap time.Duration

	loggedNs int64 // when the last line was written (0: none yet)
	seenNs   int64 // the last occurrence
	omitted  int   // occurrences since the last line that got none
	// logged holds the connections that got their line in this episode, at most
	// eventLogConnsMax (beyond, it starts over: a connection may get a second line).
	logged map[shard.ConnID]struct{}
}

const (
	eventLogInterval   = time.Second
	eventLogEpisodeGap = time.Minute
	eventLogConnsMax   = 4096
)

func newEventLog() eventLog {
	return eventLog{interval: eventLogInterval, episodeGap: eventLogEpisodeGap, logged: make(map[shard.ConnID]struct{})}
}

// note records an occurrence on conn at nowNs and reports whether it gets a line,
// and then how many occurrences got none since the last line.
func (l *eventLog) note(conn shard.ConnID, nowNs int64) (log bool, omitted int) {
	if l.seenNs != 0 && nowNs-l.seenNs >= int64(l.episodeGap) {
		clear(l.logged)
	}
	l.seenNs = nowNs
	_, done := l.logged[conn]
	if done || (l.loggedNs != 0 && nowNs-l.loggedNs < int64(l.interval)) {
		l.omitted++
		return false, 0
	}
	if len(l.logged) >= eventLogConnsMax {
		clear(l.logged)
	}
	l.logged[conn] = struct{}{}
	omitted, l.omitted, l.loggedNs = l.omitted, 0, nowNs
	return true, omitted
}

// logSendRefused logs, when the owner shard's eventLog lets it, a send answered
// 4006 CannotSaveMessagesToSegment: the partition's storage failed (a full disk,
// an I/O error) and the batch was not stored. The line carries what explains it:
// the storage's error, the batch's size, the partition's size, and the space its
// filesystem has left.
func (h *Host) logSendRefused(j *request.Job, code wire.ErrorCode) {
	if code != wire.ErrCannotSaveMessagesToSegment {
		return
	}
	ok, omitted := h.sendRefused.note(j.Conn, h.shard.NowNs())
	if !ok {
		return
	}
	cause := h.Store.Err(j.Send.Key)
	attrs := []slog.Attr{
		slog.String("conn", j.Conn.String()),
		slog.String("partition", j.Send.Key.String()),
		slog.Int("code", int(code)),
		slog.Int("batch_bytes", len(j.Send.Batch.Batch)),
		slog.Int("messages", int(j.Send.Batch.MessagesCount)),
		slog.Int("omitted_since_last_line", omitted),
	}
	if cause != nil {
		attrs = append(attrs, slog.String("cause", cause.Error()))
	}
	if info, err := h.Store.Info(j.Send.Key); err == nil {
		attrs = append(attrs, slog.Uint64("partition_bytes", info.SizeBytes))
	}
	// A full disk shows as ENOSPC or, first, as a short write: the space left
	// says which it was.
	diskFull := segment.IsNoSpace(cause)
	if free, total, err := filesystemSpace(h.Store.Dir(j.Send.Key)); err == nil {
		diskFull = diskFull || free < uint64(len(j.Send.Batch.Batch))
		attrs = append(attrs, slog.Uint64("filesystem_free_bytes", free), slog.Uint64("filesystem_bytes", total))
	}
	attrs = append(attrs, slog.Bool("disk_full", diskFull))
	h.log.LogAttrs(context.Background(), slog.LevelError, "send refused: the partition's storage failed, the batch was not stored", attrs...)
}

// filesystemSpace is the space left to an unprivileged writer, and the size, of
// the filesystem holding dir.
func filesystemSpace(dir string) (free, total uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, errors.Join(errors.New("statfs "+dir), err)
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
}
