package bench

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/iggy-shard/iggy-shard/wire"
)

// loopbackReadBytesMax bounds the reader's buffer of RawLoopback.
const loopbackReadBytesMax = 4 << 20

// RawLoopbackKind is the Kind of a RawLoopback report.
const RawLoopbackKind Kind = "raw-loopback"

// RawLoopback is the baseline a server run is compared with: the same bytes the
// producers of cfg would put on the wire (cfg.Producers connections, each writing
// cfg.Batches request frames of a batch's size, or for cfg.Duration), sent over
// plain TCP connections to a reader in this process that discards them. No protocol,
// no server, no disk: what the loopback interface and the kernel can move on this
// machine in the same conditions.
func RawLoopback(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Kind == "" {
		cfg.Kind = PinnedProducer
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("raw loopback: listening: %w", err)
	}
	defer ln.Close()
	frameBytes := wire.HeaderSize + batchLength(cfg.MessagesPerBatch, cfg.MessageSizeBytes)
	payloadBytes := uint64(cfg.MessagesPerBatch * cfg.MessageSizeBytes)

	var readers sync.WaitGroup
	acceptDone := make(chan struct{})
	go func() {
		defer close(acceptDone)
		for range cfg.Producers {
			conn, err := ln.Accept()
			if err != nil {
				return // the listener closed: a dial failed and the run is over
			}
			readers.Add(1)
			go func() {
				defer readers.Done()
				defer conn.Close()
				// Reads as large as a frame, as a client's are: io.Copy to
				// io.Discard would read 8 KiB at a time and make the baseline the
				// reader's syscalls rather than what loopback moves.
				buf := make([]byte, min(frameBytes, loopbackReadBytesMax))
				for {
					if _, err := conn.Read(buf); err != nil {
						return
					}
				}
			}()
		}
	}()

	conns := make([]net.Conn, cfg.Producers)
	for i := range conns {
		var d net.Dialer
		dctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
		conns[i], err = d.DialContext(dctx, "tcp", ln.Addr().String())
		cancel()
		if err != nil {
			for _, c := range conns[:i] {
				c.Close()
			}
			return nil, fmt.Errorf("raw loopback: dialing: %w", err)
		}
	}
	stats := make([]*actorStats, cfg.Producers)
	started := time.Now()
	win := window{measureAt: started.Add(cfg.Warmup), batches: cfg.Batches}
	if cfg.Duration > 0 {
		win.endAt = win.measureAt.Add(cfg.Duration)
	}
	err = runAll(ctx, cfg.Producers, closeAllConns(conns), func(ctx context.Context, i int) error {
		st := &actorStats{role: RoleProducer, index: i, stream: "loopback"}
		st.series.origin = win.measureAt
		stats[i] = st
		frame := make([]byte, frameBytes)
		var sent uint64
		for ctx.Err() == nil {
			now := time.Now()
			measuring := !now.Before(win.measureAt)
			if measuring && win.done(now, sent) {
				return nil
			}
			if _, err := conns[i].Write(frame); err != nil {
				return fmt.Errorf("raw loopback: writing: %w", err)
			}
			if !measuring {
				continue
			}
			sent++
			st.measure(now, time.Now(), uint64(cfg.MessagesPerBatch), payloadBytes, uint64(frameBytes))
		}
		return ctx.Err()
	})
	for _, c := range conns {
		c.Close() // the readers see EOF once everything written is read
	}
	<-acceptDone
	readers.Wait()
	if err != nil {
		return nil, err
	}
	cfg.ServerAddress = "loopback " + ln.Addr().String()
	cfg.Kind = RawLoopbackKind
	cfg.Consumers = 0
	return newReport(&cfg, stats, win.measureAt, time.Since(started)), nil
}

func closeAllConns(conns []net.Conn) func() {
	return func() {
		for _, c := range conns {
			c.Close()
		}
	}
}
