package server

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/jsonview"
	"github.com/iggy-shard/iggy-shard/procstats"
	"github.com/iggy-shard/iggy-shard/wire"
)

// GET_STATS's process and machine figures are the process's and the machine's
// (procstats/doc.go): storage bytes written by sends and read by polls, CPU
// spent between two calls, the resident set, MemAvailable, the threads, the
// distribution.
func TestNodeStatsProcessFigures(t *testing.T) {
	dir := t.TempDir()
	var fsStat unix.Statfs_t
	if err := unix.Statfs(dir, &fsStat); err != nil || fsStat.Type == unix.TMPFS_MAGIC {
		t.Skipf("%s is on tmpfs (or unknown: %v): no storage traffic to count", dir, err)
	}
	s := testServer(t, dir, 2)
	c := dialRoot(t, s)
	ctx := testContext(t)

	before, err := c.GetStats(ctx)
	mustOK(t, "GetStats", err)
	measuredFrom := time.Now()

	st, err := c.CreateStream(ctx, "stats")
	mustOK(t, "CreateStream", err)
	_, err = c.CreateTopic(ctx, client.ID(st.ID), "t", 1, nil)
	mustOK(t, "CreateTopic", err)
	payload := bytes.Repeat([]byte("x"), 64<<10)
	batch := make([]client.Message, 16)
	for i := range batch {
		batch[i] = client.Message{Payload: payload}
	}
	var sentBytes uint64
	for sentBytes < 4<<20 {
		_, err := c.SendMessages(ctx, client.ID(st.ID), client.ID(0), wire.Partitioning{Kind: wire.PartitioningBalanced}, batch)
		mustOK(t, "SendMessages", err)
		sentBytes += uint64(len(batch) * len(payload))
	}
	// Busy for as long as a CPU measurement needs: the process's CPU over the
	// interval is then not 0.
	for pings := 0; time.Since(measuredFrom) < procstats.MinimumCPUInterval; pings++ {
		mustOK(t, "Ping", c.Ping(ctx))
		if pings > 10_000_000 {
			t.Fatal("10 million pings and the CPU interval has not passed")
		}
	}
	after, err := c.GetStats(ctx)
	mustOK(t, "GetStats", err)
	if written := after.WrittenBytes - before.WrittenBytes; after.WrittenBytes < before.WrittenBytes || written < sentBytes {
		t.Errorf("written bytes %d -> %d after sending %d bytes", before.WrittenBytes, after.WrittenBytes, sentBytes)
	}
	cores := float32(runtime.NumCPU())
	if after.CPUUsage <= 0 || after.CPUUsage > 100*cores || after.TotalCPUUsage <= 0 || after.TotalCPUUsage > 100 {
		t.Errorf("CPU over %v of sends and pings: process %v%%, machine %v%%; want in (0, %v] and (0, 100]",
			time.Since(measuredFrom), after.CPUUsage, after.TotalCPUUsage, 100*cores)
	}
	if after.MemoryUsageBytes < 1<<20 || after.MemoryUsageBytes > 24<<30 {
		t.Errorf("memory usage %d bytes, want a resident set within [1 MiB, 24 GiB]", after.MemoryUsageBytes)
	}
	if after.TotalMemoryBytes == 0 || after.AvailableMemoryBytes == 0 || after.AvailableMemoryBytes > after.TotalMemoryBytes {
		t.Errorf("memory: total %d, available %d", after.TotalMemoryBytes, after.AvailableMemoryBytes)
	}
	if after.ThreadsCount < 2 { // two shards' threads at least
		t.Errorf("threads %d", after.ThreadsCount)
	}
	if !bytes.HasPrefix(after.OSVersion, []byte("Linux")) || len(after.OSName) == 0 {
		t.Errorf("os %q, version %q; want the distribution and Linux (<distribution> <version>)", after.OSName, after.OSVersion)
	}

	// Reads from storage: the segments leave the page cache and a second
	// server on the same directory reads them back from the disk (its start
	// reads the segments' tails, its polls the rest).
	stopServer(t, s)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := f.Sync(); err != nil {
			return err
		}
		return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	})
	if err != nil {
		t.Fatalf("dropping the segments from the page cache: %v", err)
	}
	s = testServer(t, dir, 2)
	c = dialRoot(t, s)
	var polledBytes uint64
	for offset := uint64(0); polledBytes < sentBytes; {
		p, err := c.PollMessages(ctx, &wire.PollMessages{Consumer: client.SingleConsumer(client.ID(1)), StreamID: client.ID(st.ID),
			TopicID: client.ID(0), Partition: wire.SomePartition(0), Strategy: wire.PollingStrategy{Kind: wire.PollingOffset, Value: offset}, Count: 64})
		mustOK(t, "PollMessages", err)
		if p.MessagesCount == 0 {
			t.Fatalf("poll at offset %d: no messages, %d of %d bytes polled", offset, polledBytes, sentBytes)
		}
		offset += uint64(p.MessagesCount)
		polledBytes += uint64(p.MessagesCount) * uint64(len(payload))
	}
	afterPoll, err := c.GetStats(ctx)
	mustOK(t, "GetStats", err)
	t.Logf("sent %d bytes: written %d -> %d; CPU process %.2f%%, machine %.2f%%; resident %d, total %d, available %d; threads %d; %s, %s; read %d -> %d after the restart and polls",
		sentBytes, before.WrittenBytes, after.WrittenBytes, after.CPUUsage, after.TotalCPUUsage, after.MemoryUsageBytes,
		after.TotalMemoryBytes, after.AvailableMemoryBytes, after.ThreadsCount, after.OSName, after.OSVersion, after.ReadBytes, afterPoll.ReadBytes)
	// GET /stats (the Web UI's overview) shows the same figures.
	h := newHTTPSide(t, s)
	if code := h.login("iggy", "iggy"); code != 0 {
		t.Fatalf("HTTP login: %d", code)
	}
	var view struct {
		MemoryUsage  string `json:"memory_usage"`
		ReadBytes    string `json:"read_bytes"`
		WrittenBytes string `json:"written_bytes"`
		OSVersion    string `json:"os_version"`
		ThreadsCount uint32 `json:"threads_count"`
	}
	if code := h.call("GET", "/stats", nil, &view); code != 0 {
		t.Fatalf("GET /stats: %d", code)
	}
	if zero := jsonview.ByteSize(0); view.MemoryUsage == zero || view.ReadBytes == zero || view.WrittenBytes == zero ||
		view.OSVersion != string(afterPoll.OSVersion) || view.ThreadsCount < 2 {
		t.Errorf("GET /stats: %+v", view)
	}
	if afterPoll.ReadBytes <= after.ReadBytes {
		t.Errorf("read bytes %d -> %d after a restart and polling %d bytes out of the page cache", after.ReadBytes, afterPoll.ReadBytes, polledBytes)
	}
}
