package server

import (
	"cmp"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/linux"
	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/procstats"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/snapshotzip"
	"github.com/iggy-shard/iggy-shard/wire"
)

// The non-replicated reads shard 0 serves from the metadata state and its session
// registry.

// snapshotArchiveMaxBytes is the largest GetSnapshot archive: it must fit a frame.
const snapshotArchiveMaxBytes = 64<<20 - wire.HeaderSize

func shardMessage(kind uint32) shard.Message { return shard.Message{Kind: kind} }

// Names a node that is not clustered reports, the reference's (SINGLE_NODE_CLUSTER_NAME
// and SELF_NODE_NAME in apache/iggy core/server/src/cluster_meta.rs); the SDKs' suites
// expect them.
const (
	singleNodeClusterName = "single-node"
	singleNodeName        = "iggy-node"
)

// appendClusterMetadata answers GetClusterMetadata as the reference answers it for a
// node that is not clustered: cluster "single-node" with the one node "iggy-node",
// the healthy leader, at the address its TCP listener is bound to (the Go SDK dials
// it; a configured port 0 reports the port it picked), and the HTTP API's bound
// port when it serves one. QUIC and WebSocket are not served, so their ports are
// 0, as the reference reports a disabled transport.
func (s *Server) appendClusterMetadata(dst []byte) []byte {
	host, port := "127.0.0.1", 0
	if addr := s.listenAddr.Load(); addr != nil {
		port = addr.Port
		if ip := addr.IP; ip != nil && !ip.IsUnspecified() {
			host = ip.String()
		}
	}
	if h, p, err := net.SplitHostPort(s.cfg.TCPAddress); err == nil && port == 0 {
		port, _ = strconv.Atoi(p)
		if h != "" {
			host = h
		}
	}
	m := wire.ClusterMetadata{
		Name: []byte(singleNodeClusterName),
		Nodes: []wire.ClusterNode{{
			Name: []byte(singleNodeName), IP: []byte(host), TCPPort: uint16(port),
			QUICPort: 0, HTTPPort: uint16(s.httpPort.Load()), WebSocketPort: 0,
			Role: wire.ClusterRoleLeader, Status: wire.ClusterNodeHealthy,
		}},
	}
	return m.Append(dst)
}

// processStats samples this process's and the machine's figures for GetStats.
// One per process, not per Server: the figures are the process's, and the CPU
// percentages cover the interval since the process's previous GetStats, as the
// reference's do since its serving thread's (apache/iggy
// core/server/src/responses.rs, probe_system_stats). It is made at package
// initialisation, on the main thread before any shard pins its own, so the
// allowed CPUs are the process's.
var processStats = newProcessStats()

func newProcessStats() *procstats.Sampler {
	s := procstats.NewSampler(os.DirFS("/proc"), "self", os.Getpagesize())
	allowed, err := linux.AllowedCPUs()
	if err != nil {
		allowed = nil // the machine's CPU figure, unscoped
	}
	return s.Confined(allowed, os.DirFS("/sys/fs/cgroup"))
}

// hostOSRelease is the distribution, read once: it does not change while we run.
var hostOSRelease = sync.OnceValue(func() procstats.OSRelease {
	return procstats.ReadOSRelease(os.DirFS("/"))
})

// AppendNodeStats implements metahost.Shard0: GetStats, of a node whose state
// counts counts and which lists clients connections. The process's and the
// machine's figures mean what the reference's mean (procstats/doc.go); one that
// cannot be read is 0.
func (h *handler) AppendNodeStats(dst []byte, counts metadata.Counts, clients int) []byte {
	segments, sizeBytes, messages := h.srv.stats.Totals()
	now := h.srv.now()
	// The sampler keeps its own clock, the real one: its CPU intervals are the
	// kernel's ticks, and every server of the process shares it.
	process := processStats.Sample(time.Now())
	release := hostOSRelease()
	s := wire.Stats{
		ProcessID:            uint32(os.Getpid()),
		CPUUsage:             process.ProcessCPUPercent,
		TotalCPUUsage:        process.TotalCPUPercent,
		MemoryUsageBytes:     process.ResidentBytes,
		TotalMemoryBytes:     process.TotalMemoryBytes,
		AvailableMemoryBytes: process.AvailableMemoryBytes,
		ReadBytes:            process.ReadBytes,
		WrittenBytes:         process.WrittenBytes,
		RunTimeMicros:        uint64(now.Sub(h.srv.startedAt).Microseconds()),
		StartTimeMicros:      uint64(h.srv.startedAt.UnixMicro()),
		MessagesSizeBytes:    sizeBytes,
		StreamsCount:         counts.Streams,
		TopicsCount:          counts.Topics,
		PartitionsCount:      counts.Partitions,
		SegmentsCount:        segments,
		MessagesCount:        messages,
		ClientsCount:         uint32(clients),
		ConsumerGroupsCount:  counts.ConsumerGroups,
		OSName:               []byte(cmp.Or(release.Name, "Linux")),
		OSVersion:            []byte(release.LongVersion()),
		IggyServerVersion:    []byte(serverVersion),
		IggyServerSemver:     wire.StatsSemver(0, 11, 0),
		ThreadsCount:         process.Threads,
	}
	if host, err := os.Hostname(); err == nil {
		s.Hostname = []byte(host)
	}
	var uts unix.Utsname
	if unix.Uname(&uts) == nil {
		s.KernelVersion = []byte(unix.ByteSliceToString(uts.Release[:]))
	}
	var st unix.Statfs_t
	if unix.Statfs(h.srv.cfg.SystemPath, &st) == nil {
		s.FreeDiskSpaceBytes = st.Bavail * uint64(st.Bsize)
		s.TotalDiskSpaceBytes = st.Blocks * uint64(st.Bsize)
	}
	return s.Append(dst)
}

// appendSnapshotArchive answers GetSnapshot: a ZIP with one <type>.txt entry per
// requested section, in any compression the reference writes (package snapshotzip;
// Bzip2 through internal/bzip2). Sections this server cannot
// capture (server_logs: logs go to stderr, not to files) are skipped, as the
// reference skips a section that fails.
func (h *handler) AppendSnapshotArchive(dst []byte, body []byte) ([]byte, error) {
	var req wire.GetSnapshot
	if err := req.Decode(body); err != nil {
		return dst, err
	}
	archive, err := snapshotzip.New(req.Compression, snapshotArchiveMaxBytes)
	if err != nil {
		return dst, err
	}
	var types []wire.SnapshotType
	for i := range req.Types {
		t := req.Type(i)
		if t == wire.SnapshotAll {
			types = append(types, wire.SnapshotFilesystemOverview, wire.SnapshotProcessList,
				wire.SnapshotResourceUsage, wire.SnapshotServerLogs, wire.SnapshotServerConfig)
			continue
		}
		types = append(types, t)
	}
	for _, t := range types {
		text, ok := h.snapshotSection(t)
		if !ok {
			continue
		}
		if err := archive.Add(t.String()+".txt", []byte(text), time.Now()); err != nil {
			return dst, err
		}
	}
	return archive.AppendTo(dst)
}

func (h *handler) snapshotSection(t wire.SnapshotType) (string, bool) {
	cfg := h.srv.cfg
	switch t {
	case wire.SnapshotTest:
		return "test\n", true
	case wire.SnapshotFilesystemOverview:
		var b strings.Builder
		entries := 0
		_ = filepath.WalkDir(cfg.SystemPath, func(path string, d fs.DirEntry, err error) error {
			if err != nil || entries >= 100_000 {
				return filepath.SkipAll
			}
			entries++
			if info, err := d.Info(); err == nil {
				fmt.Fprintf(&b, "%s\t%d\t%s\n", info.Mode(), info.Size(), path)
			}
			return nil
		})
		return b.String(), true
	case wire.SnapshotProcessList:
		status, err := os.ReadFile("/proc/self/status")
		return string(status), err == nil
	case wire.SnapshotResourceUsage:
		var mem runtime.MemStats
		runtime.ReadMemStats(&mem)
		var ru unix.Rusage
		_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
		return fmt.Sprintf("heap_alloc_bytes %d\nsys_bytes %d\ngoroutines %d\nuser_cpu %s\nsystem_cpu %s\nmax_rss_kib %d\n",
			mem.HeapAlloc, mem.Sys, runtime.NumGoroutine(),
			time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano()), ru.Maxrss), true
	case wire.SnapshotServerConfig:
		return fmt.Sprintf("tcp.address = %q\nsystem.path = %q\nshards = %d\ntcp.max_frame_size = %d\ntcp.idle_timeout = %q\nsystem.metadata.snapshot_interval_ops = %d\nroot_username = %q\n",
			cfg.TCPAddress, cfg.SystemPath, h.srv.shardCount, cfg.FrameSizeMaxBytes, cfg.IdleTimeout.String(),
			cfg.SnapshotIntervalOps, cfg.RootUsername), true
	}
	return "", false
}
