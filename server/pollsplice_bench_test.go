package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/wire"
)

// BenchmarkConsumerSplice: consumers each polling whole stored batches of
// perBatch messages of 1000 bytes (1000 a batch: a 1,048,272-byte reply body)
// from a partition of their own that holds them, copied (path=copy) or planned
// and spliced from the segment files (path=splice: any reply size). One op is
// one poll per consumer. Beside MB/s each reports:
//
//	x-loopback       MB/s over raw loopback TCP with as many connections,
//	                 measured once per process in the same run
//	server-cpu-ms/GB the CPU of the server's shard threads and of the process's
//	                 io_uring workers (which run the splices), per GB polled
//	all-cpu-ms/GB    the CPU of the whole process (server and consumers), per
//	                 GB polled: on this machine's two cores the bound, when
//	                 they are busy
//	loopback-cpu-ms/GB the same for the raw loopback baseline (its writers and
//	                 readers), per GB moved
//	ctxsw/MB         the context switches of the whole process (voluntary and
//	                 not, exited io_uring workers included), per MB polled
//	loopback-ctxsw/MB the same for the raw loopback baseline, per MB moved
//	p50-µs, p99-µs   a poll's round trip
//	spliced-share    the polls of the timed loop whose replies were spliced
//	ring-wakes/poll  the wake-ups of the shards by their splice rings' eventfds
//	                 ([system.partition] splice_ring), per poll
//
//	go test ./server -run '^$' -bench ConsumerSplice -benchtime 300x -count 6
func BenchmarkConsumerSplice(b *testing.B) {
	for _, consumers := range []int{1, 4} {
		for _, perBatch := range []int{128, 256, 512, 1000} {
			for _, path := range []struct {
				name     string
				minBytes int64
			}{{"copy", -1}, {"splice", 1}} {
				b.Run(fmt.Sprintf("consumers=%d/batch=%d/path=%s", consumers, perBatch, path.name), func(b *testing.B) {
					benchmarkConsumers(b, consumers, perBatch, func(cfg *setup) {
						cfg.pollPlans = &partition.PlanConfig{ReplyBytesMin: path.minBytes, TrustWrites: true}
					})
				})
			}
		}
	}
}

// BenchmarkConsumers: four consumers at once, each polling its own partition,
// at the server's defaults (BenchmarkConsumerSplice says what it reports).
func BenchmarkConsumers(b *testing.B) { benchmarkConsumers(b, 4, benchMessagesPerBatch, nil) }

// BenchmarkConsumerDefaults: one consumer at the server's defaults.
func BenchmarkConsumerDefaults(b *testing.B) { benchmarkConsumers(b, 1, benchMessagesPerBatch, nil) }

// BenchmarkConsumerSpliceRing: one and four consumers at the server's
// defaults but for [system.partition] splice_ring, off and on, to choose its
// default in one run (BenchmarkConsumerSplice says what it reports).
//
//	go test ./server -run '^$' -bench ConsumerSpliceRing -benchtime 1500x -count 8
func BenchmarkConsumerSpliceRing(b *testing.B) {
	for _, consumers := range []int{1, 4} {
		for _, ring := range []bool{false, true} {
			b.Run(fmt.Sprintf("consumers=%d/ring=%t", consumers, ring), func(b *testing.B) {
				benchmarkConsumers(b, consumers, benchMessagesPerBatch, func(cfg *setup) { cfg.Partition.SpliceRing = ring })
			})
		}
	}
}

func benchmarkConsumers(b *testing.B, consumers, perBatch int, adjust func(*setup)) {
	s, admin := benchServerWith(b, adjust)
	ctx := context.Background()
	if _, err := admin.CreateStream(ctx, "bench"); err != nil {
		b.Fatal(err)
	}
	if _, err := admin.CreateTopic(ctx, client.NameID("bench"), "t", uint32(consumers), nil); err != nil {
		b.Fatal(err)
	}
	batch := benchBatchOf(b, perBatch)
	batchBytes := int64(perBatch * benchPayloadBytes)
	// The tail stored may not be durable yet (durability advances by the saves'
	// fdatasyncs, one a MiB by default) and is then never spliced: with 33
	// batches of 1000 stored, the 32nd stayed undurable and 1 poll in 32 was
	// copied (spliced-share 0.969). So the last two are never polled.
	const stored, polled = 34, 32
	for p := range consumers {
		for range stored {
			if _, err := admin.SendBatch(ctx, client.NameID("bench"), client.NameID("t"),
				wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: uint32(p)}, batch); err != nil {
				b.Fatal(err)
			}
		}
	}
	clients := make([]*client.Client, consumers)
	for i := range clients {
		c, err := client.Dial(ctx, s.Addr().String(), client.WithCredentials("iggy", "iggy"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		clients[i] = c
	}
	poll := func(c *client.Client, req *wire.PollMessages, i int) error {
		req.Strategy = wire.PollingStrategy{Kind: wire.PollingOffset, Value: uint64(i%polled) * uint64(perBatch)}
		m, err := c.PollMessages(ctx, req)
		if err == nil && m.MessagesCount != uint32(perBatch) {
			err = fmt.Errorf("polled %d messages", m.MessagesCount)
		}
		return err
	}
	reqs := make([]wire.PollMessages, consumers)
	for i := range reqs {
		reqs[i] = wire.PollMessages{Consumer: client.SingleConsumer(client.ID(uint32(i + 1))), StreamID: client.NameID("bench"),
			TopicID: client.NameID("t"), Partition: wire.SomePartition(uint32(i)), Count: uint32(perBatch)}
		for k := range polled { // warm: every batch read (and verified) once
			if err := poll(clients[i], &reqs[i], k); err != nil {
				b.Fatal(err)
			}
		}
	}
	loopback := benchLoopbackMBps(b, consumers)
	cpu := startServerCPU(b, s)
	splicedBefore, ringWakesBefore := benchSplicedReplies(b, s)
	allStartNs, ctxswStart := processCPUNs(), processContextSwitches()
	latencies := make([][]time.Duration, consumers)
	b.SetBytes(int64(consumers) * batchBytes)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, consumers)
	for i := range consumers {
		lat := make([]time.Duration, 0, b.N)
		wg.Go(func() {
			for k := range b.N {
				t0 := time.Now()
				if err := poll(clients[i], &reqs[i], k); err != nil {
					errs <- err
					return
				}
				lat = append(lat, time.Since(t0))
			}
			latencies[i] = lat
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	allNs, ctxsw := processCPUNs()-allStartNs, processContextSwitches()-ctxswStart
	b.StopTimer()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	gb := float64(b.N) * float64(consumers) * float64(batchBytes) / 1e9
	b.ReportMetric(float64(cpu.spentNs(b))/1e6/gb, "server-cpu-ms/GB")
	b.ReportMetric(float64(allNs)/1e6/gb, "all-cpu-ms/GB")
	b.ReportMetric(benchLoopback.cpuMsPerGB[consumers], "loopback-cpu-ms/GB")
	b.ReportMetric(float64(ctxsw)/(gb*1e3), "ctxsw/MB")
	b.ReportMetric(benchLoopback.ctxswPerMB[consumers], "loopback-ctxsw/MB")
	spliced, ringWakes := benchSplicedReplies(b, s)
	b.ReportMetric(float64(spliced-splicedBefore)/float64(b.N*consumers), "spliced-share")
	b.ReportMetric(float64(ringWakes-ringWakesBefore)/float64(b.N*consumers), "ring-wakes/poll")
	mbps := gb * 1e3 / elapsed.Seconds()
	b.ReportMetric(mbps/loopback, "x-loopback")
	var all []time.Duration
	for _, l := range latencies {
		all = append(all, l...)
	}
	reportLatencies(b, all)
}

var benchLoopback struct {
	sync.Mutex
	mbps       map[int]float64
	cpuMsPerGB map[int]float64 // the process's CPU per GB moved
	ctxswPerMB map[int]float64 // the process's context switches per MB moved
}

// benchLoopbackMBps measures, once per process and connection count, the MB/s
// raw loopback TCP moves in batch-sized writes over connections connections.
func benchLoopbackMBps(b *testing.B, connections int) float64 {
	benchLoopback.Lock()
	defer benchLoopback.Unlock()
	if v, ok := benchLoopback.mbps[connections]; ok {
		return v
	}
	const batches = 500
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	var readers sync.WaitGroup
	for range connections {
		readers.Go(func() {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
			io.Copy(io.Discard, conn)
		})
	}
	conns := make([]net.Conn, connections)
	for i := range conns {
		if conns[i], err = net.Dial("tcp", ln.Addr().String()); err != nil {
			b.Fatal(err)
		}
	}
	buf := make([]byte, benchBatchBytes)
	start, cpuStartNs, ctxswStart := time.Now(), processCPUNs(), processContextSwitches()
	var writers sync.WaitGroup
	for _, c := range conns {
		writers.Go(func() {
			for range batches {
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		})
	}
	writers.Wait()
	for _, c := range conns {
		c.Close()
	}
	readers.Wait()
	gb := float64(connections*batches*benchBatchBytes) / 1e9
	v := gb * 1e3 / time.Since(start).Seconds()
	if benchLoopback.mbps == nil {
		benchLoopback.mbps, benchLoopback.cpuMsPerGB, benchLoopback.ctxswPerMB = map[int]float64{}, map[int]float64{}, map[int]float64{}
	}
	benchLoopback.mbps[connections] = v
	benchLoopback.cpuMsPerGB[connections] = float64(processCPUNs()-cpuStartNs) / 1e6 / gb
	benchLoopback.ctxswPerMB[connections] = float64(processContextSwitches()-ctxswStart) / (gb * 1e3)
	return v
}

// benchSplicedReplies is the poll replies the server's shards spliced so far,
// and the wake-ups their splice rings gave them (shard.Stats.SpliceRingWakes).
func benchSplicedReplies(b *testing.B, s *Server) (replies, ringWakes uint64) {
	var mu sync.Mutex
	if err := s.rt.Inspect(context.Background(), func(sh *shard.Shard) {
		st := sh.Stats()
		mu.Lock()
		replies += st.SplicedReplies
		ringWakes += st.SpliceRingWakes
		mu.Unlock()
	}); err != nil {
		b.Fatal(err)
	}
	return replies, ringWakes
}

// processCPUNs is the CPU time of the whole process (every thread, the io_uring
// workers among them) so far.
func processCPUNs() int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// processContextSwitches is the context switches of the whole process so far,
// voluntary and not: of every thread, those that exited (io_uring workers come
// and go) among them.
func processContextSwitches() int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Nvcsw + ru.Nivcsw
}

// serverCPU is the CPU the server's threads spent since start: its shards'
// (their thread ids asked of each shard) and the process's io_uring workers'
// (iou-*; a worker that exited meanwhile is missed).
type serverCPU struct {
	shardTids []int
	startNs   map[int]int64
}

func startServerCPU(b *testing.B, s *Server) *serverCPU {
	var mu sync.Mutex
	c := &serverCPU{}
	if err := s.rt.Inspect(context.Background(), func(*shard.Shard) {
		mu.Lock()
		c.shardTids = append(c.shardTids, unix.Gettid())
		mu.Unlock()
	}); err != nil {
		b.Fatal(err)
	}
	c.startNs = c.sample()
	return c
}

func (c *serverCPU) sample() map[int]int64 {
	out := make(map[int]int64)
	for _, tid := range c.shardTids {
		out[tid] = taskCPUNs(tid)
	}
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile("/proc/self/task/" + t.Name() + "/comm")
		if err == nil && strings.HasPrefix(string(comm), "iou-") {
			out[tid] = taskCPUNs(tid)
		}
	}
	return out
}

func (c *serverCPU) spentNs(b *testing.B) int64 {
	var ns int64
	for tid, v := range c.sample() {
		ns += v - c.startNs[tid]
	}
	return ns
}

// taskCPUNs is a thread's time on a CPU (schedstat's first field), 0 once it
// is gone.
func taskCPUNs(tid int) int64 {
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/schedstat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseInt(f[0], 10, 64)
	return v
}

func benchBatchOf(b *testing.B, messages int) []byte {
	var bb wire.BatchBuilder
	bb.Reset(nil)
	payload := make([]byte, benchPayloadBytes)
	for i := range messages {
		if err := bb.Append(wire.Uint128{Lo: uint64(i + 1)}, 1, payload, nil); err != nil {
			b.Fatal(err)
		}
	}
	batch, err := bb.Finish()
	if err != nil {
		b.Fatal(err)
	}
	return batch
}
