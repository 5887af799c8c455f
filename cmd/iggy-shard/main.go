// Command iggy-shard runs the iggy-shard server: one shard per CPU, each with its own
// io_uring ring, serving the Apache Iggy binary protocol 0.11.0 on a TCP address.
//
// This build answers PING and refuses every other request the way the protocol refuses
// a client that has not logged in: the metadata, partition and user planes are not
// wired in yet.
//
// It stops gracefully on SIGINT or SIGTERM: it stops accepting, sends every connection
// the replies it is owed, closes them and exits 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/iggy-shard/iggy-shard/linux"
	"github.com/iggy-shard/iggy-shard/shard"
)

// Exit codes, one per reason, so a supervisor can tell them apart.
const (
	exitOK          = 0
	exitFailed      = 1 // the runtime stopped on a fatal error, or shutdown timed out
	exitUsage       = 2
	exitNoIOURing   = 3 // io_uring unavailable: the message names cause and remedy
	exitStartFailed = 4 // the address could not be bound, or a shard could not start
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

type options struct {
	tcpAddress      string
	shardCount      int
	pinCPUs         bool
	frameTimeout    time.Duration
	idleTimeout     time.Duration
	sendTimeout     time.Duration
	shutdownTimeout time.Duration
	logLevel        slog.Level
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("iggy-shard", flag.ContinueOnError)
	fs.SetOutput(stderr)
	defaultAddress := "127.0.0.1:8090"
	if env := os.Getenv("IGGY_TCP_ADDRESS"); env != "" {
		defaultAddress = env
	}
	fs.StringVar(&o.tcpAddress, "tcp-address", defaultAddress,
		"host:port to serve clients on (env IGGY_TCP_ADDRESS); port 0 picks a free port")
	fs.IntVar(&o.shardCount, "shards", 0,
		"number of shards, one event loop and io_uring ring each; 0 = one per CPU this process may run on")
	fs.BoolVar(&o.pinCPUs, "pin-cpus", true,
		"pin shard i to the i-th allowed CPU")
	fs.DurationVar(&o.frameTimeout, "frame-timeout", 10*time.Second,
		"close a connection that starts a request and does not finish it within this time")
	fs.DurationVar(&o.idleTimeout, "idle-timeout", 0,
		"close a connection that sends nothing for this long; 0 = never (SDKs ping every 5s)")
	fs.DurationVar(&o.sendTimeout, "send-timeout", 30*time.Second,
		"close a connection whose replies are not read for this long")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 5*time.Second,
		"on SIGINT/SIGTERM, how long connections may take to receive their last replies")
	fs.TextVar(&o.logLevel, "log-level", slog.LevelInfo, "log level: DEBUG, INFO, WARN or ERROR")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: iggy-shard [flags]

Runs the iggy-shard server: the Apache Iggy binary protocol 0.11.0 over TCP, one shard
(a thread with its own io_uring ring) per CPU. It answers PING and refuses every other
request as from a client that has not logged in. SIGINT or SIGTERM stop it gracefully.

Flags (written with one dash or two):
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "iggy-shard: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return o, errors.New("unexpected arguments")
	}
	return o, nil
}

func run(args []string, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		return exitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: o.logLevel}))

	host, err := linux.Survey()
	if err != nil {
		log.Error("cannot read the host's facts", "err", err)
		return exitStartFailed
	}
	if err := linux.ClassifyIOURing(host.IOURing); err != nil {
		fmt.Fprintf(stderr, "iggy-shard: io_uring is not available: %v\n", err)
		return exitNoIOURing
	}
	if limit, err := linux.RaiseOpenFilesLimit(); err == nil {
		log.Info("host", "summary", host.String(), "open_files", limit.String())
	}

	rt, err := shard.Start(shard.Config{
		TCPAddress:      o.tcpAddress,
		ShardCount:      o.shardCount,
		PinCPUs:         o.pinCPUs,
		NewHandler:      func(*shard.Shard) shard.Handler { return sessionlessHandler{} },
		Logger:          log,
		FrameTimeout:    o.frameTimeout,
		IdleTimeout:     o.idleTimeout,
		SendTimeout:     o.sendTimeout,
		ShutdownTimeout: o.shutdownTimeout,
	})
	if err != nil {
		log.Error("cannot start", "err", err)
		return exitStartFailed
	}

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	select {
	case sig := <-signals:
		log.Info("stopping", "signal", sig.String())
	case <-rt.Done():
		log.Error("runtime stopped", "err", rt.Err())
		return exitFailed
	}
	// A second signal while stopping cuts the grace period short.
	ctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout+5*time.Second)
	defer cancel()
	go func() {
		select {
		case <-signals:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := rt.Shutdown(ctx); err != nil {
		log.Error("shutdown failed", "err", err)
		return exitFailed
	}
	log.Info("stopped")
	return exitOK
}
