// Command iggy-bench is a load generator for iggy-shard and any server of the Apache
// Iggy binary protocol 0.11.0, modelled on Apache Iggy's iggy-bench: it creates the
// streams it needs (bench-stream-N), runs a benchmark kind with one connection and
// goroutine per actor, verifies every consumed message, deletes its streams and
// prints throughput and latency percentiles as a table or JSON. Package bench is
// the engine.
//
//	iggy-bench [flags] KIND [flags]
//	iggy-bench pp                                   # against an iggy-shard of its own
//	iggy-bench pp --producers 4 --baseline --report-dir out
//	iggy-bench bcg --server-address 10.0.0.5:8090 --consumers 8 --consumer-groups 2
//	iggy-bench raw-loopback          # the same bytes over plain loopback TCP: a baseline
//
// With no --server-address (nor IGGY_TCP_ADDRESS) it starts an iggy-shard of its
// own, as a child process on a free loopback port with a temporary data directory
// that it removes at the end (serve.go says why a child). --baseline measures the
// machine's raw loopback and sequential write bandwidth in the same run and prints
// the run's ratio to them; --report-dir writes the JSON summary, a per-second CSV
// time series and a self-contained HTML page with charts.
//
// Exit codes: 0 success, 1 the run failed or verification found lost, duplicated or
// corrupt messages, 2 bad usage, 3 the server could not be reached, started or
// refused the login, 130 interrupted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/iggy-shard/iggy-shard/bench"
	"github.com/iggy-shard/iggy-shard/client"
)

const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitUnreachable = 3
	exitInterrupted = 130
)

// rawLoopback is the baseline mode's name; it is not a kind of the server benchmark.
const rawLoopback = "raw-loopback"

func main() {
	if len(os.Args) > 1 && os.Args[1] == serveCommand {
		os.Exit(serveMain(os.Args[2:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

type options struct {
	cfg       bench.Config
	output    string
	rateLimit string
	tls       bool
	tlsCAFile string
	tlsDomain string
	quiet     bool
	kind      string
	usage     func()

	// ownServer: no address was given, so iggy-bench starts a server of its own
	// with serverShards shards and its data under serverDir.
	ownServer    bool
	serverShards int
	serverDir    string

	reportDir   string
	baseline    bool
	baselineDir string
}

func newFlagSet(o *options, stderr io.Writer, getenv func(string) string) *flag.FlagSet {
	fs := flag.NewFlagSet("iggy-bench", flag.ContinueOnError)
	// Parse errors are reported in one line by run; the usage is for --help.
	fs.SetOutput(io.Discard)
	c := &o.cfg
	fs.StringVar(&c.ServerAddress, "server-address", getenv("IGGY_TCP_ADDRESS"),
		"server `host:port` to connect to (env IGGY_TCP_ADDRESS); empty = start an iggy-shard of our own on a free loopback port")
	fs.IntVar(&o.serverShards, "server-shards", 0, "shards of our own server; 0 = one per CPU")
	fs.StringVar(&o.serverDir, "server-dir", "", "`directory` in which our own server gets its temporary data directory; empty = the system's temporary directory")
	fs.StringVar(&o.reportDir, "report-dir", "", "write "+bench.ReportJSONFile+", "+bench.ReportCSVFile+" (per second, per role) and "+bench.ReportHTMLFile+" (charts, self-contained) into this `directory`")
	fs.BoolVar(&o.baseline, "baseline", false, "also measure raw loopback TCP and sequential write bandwidth in the same run, and print the ratios")
	fs.StringVar(&o.baselineDir, "baseline-dir", "", "`directory` for the sequential write baseline; empty = our own server's data directory, or the system's temporary directory")
	fs.BoolVar(&o.tls, "tls", false, "connect with TLS (the server's [tcp.tls] enabled)")
	fs.StringVar(&o.tlsCAFile, "tls-ca-file", "", "PEM `file` of the CAs to trust with --tls; empty = the system's roots")
	fs.StringVar(&c.Username, "username", bench.DefaultUsername, "user to log in as")
	fs.StringVar(&c.Password, "password", bench.DefaultPassword, "password of --username")
	fs.IntVar(&c.Producers, "producers", 0, "producers (producing consumers for e2e); 0 = the kind's default, 8")
	fs.IntVar(&c.Consumers, "consumers", 0, "consumers; 0 = the kind's default, 8")
	fs.IntVar(&c.Streams, "streams", 0, "streams to create; 0 = one per actor for pinned kinds and e2e, 1 for bp, one per consumer group for bcg and bpcg")
	fs.IntVar(&c.Partitions, "partitions", 0, "partitions per topic; 0 = 1 for pinned kinds and e2e, 24 for balanced ones")
	fs.IntVar(&c.ConsumerGroups, "consumer-groups", 0, "consumer groups for bcg and bpcg, one per stream; 0 = 1")
	fs.IntVar(&c.MessagesPerBatch, "messages-per-batch", bench.DefaultMessagesPerBatch, "messages in each batch sent or polled")
	fs.IntVar(&c.MessageSizeBytes, "message-size", bench.DefaultMessageSizeBytes, "payload `bytes` of each message")
	fs.IntVar(&c.Batches, "batches", 0, "measured batches per actor (default 1000 unless --duration is given)")
	fs.DurationVar(&c.Duration, "duration", 0, "run producers for this long instead of a batch count (e.g. 30s); not for pc and bcg")
	fs.DurationVar(&c.Warmup, "warmup", 0, "run every actor unmeasured for this long first (e.g. 2s)")
	fs.StringVar(&o.rateLimit, "rate-limit", "", "cap the payload rate of all actors together, `bytes` per second (e.g. 50MB, 10MiB, 1GB); empty = none")
	fs.StringVar(&o.output, "output", "table", "result format: table (for people) or json (for tools)")
	fs.BoolVar(&c.KeepStreams, "keep-streams", false, "leave the bench streams on the server after the run")
	fs.BoolVar(&c.SkipMessageChecks, "skip-message-checks", false, "skip the per-message checks (checksums, ids, sizes); counts and offsets are still verified")
	fs.DurationVar(&c.StallTimeout, "stall-timeout", bench.DefaultStallTimeout, "fail a consumer that receives nothing for this long while messages are owed to it")
	fs.DurationVar(&c.RequestTimeout, "request-timeout", bench.DefaultRequestTimeout, "bound on each request")
	fs.DurationVar(&c.DialTimeout, "dial-timeout", bench.DefaultDialTimeout, "bound on each connection and login")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress lines on stderr")
	fs.Usage = func() {}
	o.usage = func() {
		out := stderr
		fmt.Fprintf(out, "Usage: iggy-bench [flags] KIND [flags]\n\n")
		fmt.Fprintf(out, "Runs a benchmark against a server of the Apache Iggy binary protocol 0.11.0 over TCP.\n")
		fmt.Fprintf(out, "It creates the streams it needs (%s1, ...), verifies every message it consumes\n", bench.StreamNamePrefix)
		fmt.Fprintf(out, "and deletes the streams at the end. With no --server-address it starts an iggy-shard\n")
		fmt.Fprintf(out, "of its own (a child process, a temporary data directory) and stops it at the end.\n\nKinds:\n")
		for _, k := range bench.Kinds {
			fmt.Fprintf(out, "  %-5s %-37s %s\n", k.Alias, k.Kind, k.About)
		}
		fmt.Fprintf(out, "  %-5s %-37s %s\n", "", rawLoopback, "baseline: the producers' bytes over plain loopback TCP, no server")
		fmt.Fprintf(out, "\nFlags:\n")
		fs.SetOutput(out)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
		fmt.Fprintf(out, "\nExit codes: 0 success, 1 run or verification failed, 2 bad usage, 3 server unreachable, not started or login refused, 130 interrupted.\n")
	}
	return fs
}

// parseArgs reads flags before and after the kind.
func parseArgs(args []string, stderr io.Writer, getenv func(string) string) (options, error) {
	var o options
	fs := newFlagSet(&o, stderr, getenv)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() == 0 {
		return o, errors.New("missing the benchmark KIND (e.g. pp, or --help for the list)")
	}
	o.kind = fs.Arg(0)
	if err := fs.Parse(fs.Args()[1:]); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q after the kind", fs.Arg(0))
	}
	if o.kind == rawLoopback && o.baseline {
		return o, errors.New("--baseline does not apply to raw-loopback, which is the loopback baseline itself")
	}
	o.ownServer = o.cfg.ServerAddress == "" && o.kind != rawLoopback
	if o.serverShards < 0 {
		return o, fmt.Errorf("--server-shards must be at least 0, got %d", o.serverShards)
	}
	if !o.ownServer && (o.serverShards != 0 || o.serverDir != "") {
		return o, errors.New("--server-shards and --server-dir are for the server iggy-bench starts itself, not with --server-address")
	}
	if o.output != "table" && o.output != "json" {
		return o, fmt.Errorf("--output must be table or json, got %q", o.output)
	}
	if o.rateLimit != "" {
		n, err := parseBytes(o.rateLimit)
		if err != nil {
			return o, fmt.Errorf("--rate-limit: %w", err)
		}
		o.cfg.RateLimitBytesPerSecond = n
	}
	if o.tls {
		cfg, err := client.NewTLSConfig(client.TLSOptions{CAFile: o.tlsCAFile, ServerName: o.tlsDomain})
		if err != nil {
			return o, fmt.Errorf("--tls-ca-file: %w", err)
		}
		o.cfg.TLS = cfg
	}
	if o.kind == rawLoopback {
		o.cfg.Kind = bench.PinnedProducer // the producers' shape, without a server
		o.cfg.Consumers = 0
	} else {
		kind, err := bench.ParseKind(o.kind)
		if err != nil {
			return o, err
		}
		o.cfg.Kind = kind
	}
	// Zero counts mean "the kind's default" to the engine; these two have explicit
	// defaults here, so a zero is the user's mistake.
	if o.cfg.MessageSizeBytes < 1 || o.cfg.MessagesPerBatch < 1 {
		return o, fmt.Errorf("--message-size must be at least 1 and --messages-per-batch at least 1, got %d and %d", o.cfg.MessageSizeBytes, o.cfg.MessagesPerBatch)
	}
	o.cfg = o.cfg.WithDefaults()
	if err := o.cfg.Validate(); err != nil {
		return o, err
	}
	return o, nil
}

// parseBytes reads "1000", "50KB", "10 MB", "1GB" (powers of 1000) and "10KiB",
// "10MiB", "1GiB" (powers of 1024).
func parseBytes(s string) (uint64, error) {
	v := strings.TrimSpace(s)
	unit := uint64(1)
	for _, u := range []struct {
		suffix string
		factor uint64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}} {
		if len(v) > len(u.suffix) && strings.EqualFold(v[len(v)-len(u.suffix):], u.suffix) {
			v, unit = strings.TrimSpace(v[:len(v)-len(u.suffix)]), u.factor
			break
		}
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("%q is not a positive size such as 50MB, 10MiB or 1000", s)
	}
	if n > ^uint64(0)/unit {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n * unit, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	o, err := parseArgs(args, stderr, getenv)
	if errors.Is(err, flag.ErrHelp) {
		o.usage()
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "iggy-bench: %v\nRun iggy-bench --help for the kinds and flags.\n", err)
		return exitUsage
	}
	var watch *progressDisplay
	var watcher bench.Watcher // nil, not a nil *progressDisplay, when quiet
	if !o.quiet {
		watch = newProgressDisplay(stderr)
		watcher = watch
	}
	step := func(format string, args ...any) {
		if watch != nil {
			watch.Step(fmt.Sprintf(format, args...))
		}
	}
	var own *childServer
	if o.ownServer {
		own, err = startChildServer(ctx, o.serverDir, o.serverShards, o.cfg.Username, o.cfg.Password)
		if err != nil {
			if ctx.Err() != nil {
				fmt.Fprintf(stderr, "iggy-bench: interrupted\n")
				return exitInterrupted
			}
			fmt.Fprintf(stderr, "iggy-bench: could not start a server of its own: %v\nGive --server-address to use a running one.\n", err)
			return exitUnreachable
		}
		o.cfg.ServerAddress = own.addr
		step("started iggy-shard (child process %d) on %s, data in %s", own.cmd.Process.Pid, own.addr, own.dir)
	}
	code := measure(ctx, &o, own, watch, watcher, step, stdout, stderr)
	if own != nil {
		if err := own.stop(); err != nil {
			fmt.Fprintf(stderr, "iggy-bench: stopping its server: %v\n", err)
			if code == exitOK {
				code = exitFailed
			}
		}
	}
	return code
}

// measure runs the baseline when asked, then the benchmark, and reports.
func measure(ctx context.Context, o *options, own *childServer, watch *progressDisplay, watcher bench.Watcher,
	step func(string, ...any), stdout, stderr io.Writer) int {
	var baseline *bench.Baseline
	if o.baseline {
		dir := o.baselineDir
		if dir == "" && own != nil {
			dir = own.dir
		}
		if dir == "" {
			dir = os.TempDir()
		}
		step("measuring the baseline: raw loopback TCP, sequential writes in %s", dir)
		var err error
		if baseline, err = bench.MeasureBaseline(ctx, o.cfg, dir); err != nil {
			if ctx.Err() != nil {
				fmt.Fprintf(stderr, "iggy-bench: interrupted\n")
				return exitInterrupted
			}
			fmt.Fprintf(stderr, "iggy-bench: baseline: %v\n", err)
			return exitFailed
		}
	}
	var report *bench.Report
	var err error
	if o.kind == rawLoopback {
		report, err = bench.RawLoopback(ctx, o.cfg)
	} else {
		report, err = bench.Run(ctx, o.cfg, watcher)
	}
	if watch != nil {
		watch.finish()
	}
	if report != nil {
		if own != nil {
			report.Server = fmt.Sprintf("iggy-shard started by iggy-bench (child process, %s, data in a temporary directory under %s)",
				shardsText(o.serverShards), filepath.Dir(own.dir))
		}
		if baseline != nil {
			report.Compare(baseline)
		}
		if o.output == "json" {
			report.WriteJSON(stdout)
		} else {
			report.WriteTable(stdout)
		}
		if o.reportDir != "" {
			if werr := report.WriteReportDir(o.reportDir); werr != nil {
				fmt.Fprintf(stderr, "iggy-bench: %v\n", werr)
				if err == nil {
					err = werr
				}
			} else {
				step("report written to %s", o.reportDir)
			}
		}
	}
	var connectErr *bench.ConnectError
	switch {
	case ctx.Err() != nil:
		fmt.Fprintf(stderr, "iggy-bench: interrupted\n")
		return exitInterrupted
	case errors.As(err, &connectErr):
		fmt.Fprintf(stderr, "iggy-bench: %v\nIs the server running there? Without --server-address iggy-bench starts one of its own.\n", err)
		return exitUnreachable
	case err != nil:
		fmt.Fprintf(stderr, "iggy-bench: %v\n", err)
		return exitFailed
	case !report.Verification.OK():
		fmt.Fprintf(stderr, "iggy-bench: verification failed: messages were lost, duplicated or corrupted\n")
		return exitFailed
	}
	return exitOK
}

func shardsText(n int) string {
	if n == 0 {
		return "one shard per CPU"
	}
	return strconv.Itoa(n) + " shards"
}
