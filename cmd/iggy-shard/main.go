// Command iggy-shard runs the iggy-shard server: one shard per CPU, each with its own
// io_uring ring, serving the Apache Iggy binary protocol 0.11.0 on a TCP address
// (package server does the serving).
//
// Configuration comes from defaults, then a TOML file (--config, Apache Iggy's key
// names), then Iggy's environment variables (IGGY_TCP_ADDRESS, IGGY_SYSTEM_PATH,
// IGGY_ROOT_USERNAME, IGGY_ROOT_PASSWORD, IGGY_SYSTEM_SHARDING_CPU_ALLOCATION,
// IGGY_TCP_TLS_ENABLED, IGGY_TCP_TLS_SELF_SIGNED, IGGY_TCP_TLS_CERT_FILE,
// IGGY_TCP_TLS_KEY_FILE), then flags. An invalid setting stops the start with a
// message naming it.
//
// It stops gracefully on SIGINT or SIGTERM: it stops accepting, sends every connection
// the replies it is owed, closes them, makes the partitions and the metadata journal
// durable and exits 0.
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

	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/linux"
	"github.com/iggy-shard/iggy-shard/server"
)

// Exit codes, one per reason, so a supervisor can tell them apart.
const (
	exitOK          = 0
	exitFailed      = 1 // the runtime stopped on a fatal error, or shutdown failed
	exitUsage       = 2 // a bad flag or an invalid setting
	exitNoIOURing   = 3 // io_uring unavailable: the message names cause and remedy
	exitStartFailed = 4 // the address could not be bound, the data could not be recovered
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

type options struct {
	configPath      string
	shutdownTimeout time.Duration
	logLevel        slog.Level
	// set holds the flags given on the command line, which override the file and
	// the environment.
	set map[string]bool

	tcpAddress          string
	httpAddress         string
	systemPath          string
	shardCount          int
	pinCPUs             bool
	idleTimeout         time.Duration
	busyPoll            time.Duration
	maxFrameSize        string
	snapshotIntervalOps uint64
	heartbeatInterval   time.Duration
	metricsAddress      string
	pprofAddress        string
	replicaID           int
	partitionQueueCap   int
	partitionMemoryMax  string
	pollMemoryMax       string
	tls                 bool
	tlsSelfSigned       bool
	tlsCertFile         string
	tlsKeyFile          string
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	defaults := config.Default()
	fs := flag.NewFlagSet("iggy-shard", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.configPath, "config", "", "TOML configuration file (Apache Iggy's key names: [tcp] address, [system] path, ...)")
	fs.StringVar(&o.tcpAddress, "tcp-address", defaults.TCPAddress,
		"host:port to serve clients on (env IGGY_TCP_ADDRESS); port 0 picks a free port")
	fs.StringVar(&o.httpAddress, "http-address", defaults.HTTP.Address,
		"host:port to serve the HTTP API on when [http] is enabled (env IGGY_HTTP_ADDRESS; IGGY_HTTP_ENABLED=false turns it off); port 0 picks a free port")
	fs.StringVar(&o.systemPath, "system-path", defaults.SystemPath,
		"data directory: metadata journal and snapshot, partitions (env IGGY_SYSTEM_PATH)")
	fs.IntVar(&o.shardCount, "shards", 0,
		"number of shards, one event loop and io_uring ring each; 0 = one per CPU (env IGGY_SYSTEM_SHARDING_CPU_ALLOCATION)")
	fs.BoolVar(&o.pinCPUs, "pin-cpus", true, "pin shard i to the i-th allowed CPU")
	fs.DurationVar(&o.idleTimeout, "idle-timeout", defaults.IdleTimeout,
		"close a connection that sends nothing, not even a PING, for this long; 0 = never (the SDKs ping every 5s)")
	fs.DurationVar(&o.busyPoll, "busy-poll", defaults.BusyPoll,
		"how long a shard that has just worked polls for more before it sleeps: lower latency for more CPU; 0 = never poll")
	fs.StringVar(&o.maxFrameSize, "max-frame-size", "64 MiB", "largest request frame accepted, header included")
	fs.Uint64Var(&o.snapshotIntervalOps, "snapshot-interval-ops", defaults.SnapshotIntervalOps,
		fmt.Sprintf("metadata operations between snapshots of the metadata state (each empties the journal); at most %d, a larger value is used as %[1]d, with a warning",
			config.SnapshotIntervalOpsMax()))
	fs.DurationVar(&o.heartbeatInterval, "heartbeat-interval", defaults.HeartbeatInterval,
		"consumer group members silent for 1.2 intervals are evicted (reason 13 StaleClient) (env IGGY_HEARTBEAT_INTERVAL)")
	fs.BoolVar(&o.tls, "tls", false,
		"serve TLS only on the TCP port (env IGGY_TCP_TLS_ENABLED; [tcp.tls] enabled)")
	fs.BoolVar(&o.tlsSelfSigned, "tls-self-signed", defaults.TLS.SelfSigned,
		"while --tls-cert-file does not exist, generate an ephemeral certificate for localhost, 127.0.0.1 and ::1; false: both files must exist (env IGGY_TCP_TLS_SELF_SIGNED)")
	fs.StringVar(&o.tlsCertFile, "tls-cert-file", defaults.TLS.CertFile,
		"PEM certificate chain, leaf first (env IGGY_TCP_TLS_CERT_FILE)")
	fs.StringVar(&o.tlsKeyFile, "tls-key-file", defaults.TLS.KeyFile,
		"PEM private key of the certificate (env IGGY_TCP_TLS_KEY_FILE)")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 5*time.Second,
		"on SIGINT/SIGTERM, how long connections may take to receive their last replies")
	fs.TextVar(&o.logLevel, "log-level", slog.LevelInfo, "log level: DEBUG, INFO, WARN or ERROR")
	fs.StringVar(&o.metricsAddress, "metrics-address", "",
		"host:port to serve /metrics (Prometheus) and /health on; empty = off (env IGGY_METRICS_ADDRESS)")
	fs.StringVar(&o.pollMemoryMax, "poll-memory-max", "256 MiB", "bytes a shard's polls may hold at once; polls beyond it wait their turn")
	fs.IntVar(&o.replicaID, "replica-id", 0, "this node's entry of [[cluster.nodes]] (its replica_id) when [cluster] is enabled")
	fs.StringVar(&o.partitionMemoryMax, "partition-memory-max", "",
		"in a cluster, bytes of partition batch copies the node holds at once, over all shards (cluster.partition_memory_max); 0 = 64 MiB a shard")
	fs.IntVar(&o.partitionQueueCap, "partition-queue-capacity", 0,
		"partition groups' replica frames queued to each peer (message_bus.partition_queue_capacity); 0 = message_bus.peer_queue_capacity")
	fs.StringVar(&o.pprofAddress, "pprof", "",
		"host:port to serve net/http/pprof on (/debug/pprof/); empty = off (env IGGY_PPROF_ADDRESS)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: iggy-shard [flags]

Runs the iggy-shard server: the Apache Iggy binary protocol 0.11.0 over TCP (or TLS
with --tls) and its HTTP API, one shard (a thread with its own io_uring ring) per CPU.
With no arguments it serves the binary protocol on 127.0.0.1:8090 and HTTP on
127.0.0.1:3000, keeps its data in ./local_data and creates the root user iggy/iggy
on the first start (IGGY_ROOT_USERNAME and IGGY_ROOT_PASSWORD choose others).
Settings: defaults < --config file < IGGY_* environment < flags.
SIGINT or SIGTERM stop it gracefully.

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
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	return o, nil
}

// config merges the file, the environment and the flags given.
func (o *options) config(getenv func(string) string) (config.Config, error) {
	cfg, err := config.Load(o.configPath, getenv)
	if err != nil {
		return cfg, err
	}
	if o.set["tcp-address"] {
		cfg.TCPAddress = o.tcpAddress
	}
	if o.set["http-address"] {
		cfg.HTTP.Address = o.httpAddress
	}
	if o.set["metrics-address"] {
		cfg.MetricsAddress = o.metricsAddress
	}
	if o.set["pprof"] {
		cfg.PprofAddress = o.pprofAddress
	}
	if o.set["poll-memory-max"] {
		n, err := config.ParseSizeBytes(o.pollMemoryMax)
		if err != nil || n > 1<<62 {
			return cfg, &config.SettingError{Setting: "--poll-memory-max", Value: o.pollMemoryMax, Reason: "not a size (e.g. \"256 MiB\")"}
		}
		cfg.PollMemoryBytesMax = int64(n)
	}
	if o.set["replica-id"] {
		cfg.Cluster.ReplicaID = o.replicaID
	}
	if o.set["partition-memory-max"] {
		n, err := config.ParseSizeBytes(o.partitionMemoryMax)
		if err != nil || n > 1<<62 {
			return cfg, &config.SettingError{Setting: "--partition-memory-max", Value: o.partitionMemoryMax, Reason: "not a size (e.g. \"256 MiB\")"}
		}
		cfg.Cluster.PartitionMemoryMaxBytes = int64(n)
	}
	if o.set["partition-queue-capacity"] {
		cfg.Cluster.MessageBus.PartitionQueueCapacity = o.partitionQueueCap
	}
	if o.set["system-path"] {
		cfg.SystemPath = o.systemPath
	}
	if o.set["shards"] {
		cfg.ShardCount = o.shardCount
	}
	if o.set["pin-cpus"] {
		cfg.PinCPUs = o.pinCPUs
	}
	if o.set["idle-timeout"] {
		cfg.IdleTimeout = o.idleTimeout
	}
	if o.set["busy-poll"] {
		cfg.BusyPoll = o.busyPoll
	}
	if o.set["max-frame-size"] {
		n, err := config.ParseSizeBytes(o.maxFrameSize)
		if err != nil || n > 1<<32-1 {
			return cfg, &config.SettingError{Setting: "--max-frame-size", Value: o.maxFrameSize, Reason: "not a size below 4 GiB"}
		}
		cfg.FrameSizeMaxBytes = uint32(n)
	}
	if o.set["snapshot-interval-ops"] {
		cfg.SnapshotIntervalOps = o.snapshotIntervalOps
	}
	if o.set["heartbeat-interval"] {
		if o.heartbeatInterval <= 0 {
			return cfg, &config.SettingError{Setting: "--heartbeat-interval", Value: o.heartbeatInterval.String(), Reason: "must be positive"}
		}
		cfg.HeartbeatInterval = o.heartbeatInterval
	}
	if o.set["tls"] {
		cfg.TLS.Enabled = o.tls
	}
	if o.set["tls-self-signed"] {
		cfg.TLS.SelfSigned = o.tlsSelfSigned
	}
	if o.set["tls-cert-file"] {
		cfg.TLS.CertFile = o.tlsCertFile
	}
	if o.set["tls-key-file"] {
		cfg.TLS.KeyFile = o.tlsKeyFile
	}
	return cfg, cfg.Validate()
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
	cfg, err := o.config(os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "iggy-shard: %v\n", err)
		return exitUsage
	}

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

	// The signals are caught before the start: one that comes while the listeners
	// open (the runtime logs "listening" before the HTTP API binds) stops the
	// server gracefully once it started, rather than killing it.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	srv, err := server.Start(cfg, log)
	if err != nil {
		log.Error("cannot start", "err", err)
		return exitStartFailed
	}
	select {
	case sig := <-signals:
		log.Info("stopping", "signal", sig.String())
	case <-srv.Done():
		log.Error("runtime stopped", "err", srv.Err())
		srv.Shutdown(context.Background())
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
	if err := srv.Shutdown(ctx); err != nil {
		log.Error("shutdown failed", "err", err)
		return exitFailed
	}
	return exitOK
}
