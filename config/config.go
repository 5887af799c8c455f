// Package config is a node's configuration: the TOML file, the environment and
// the defaults, with Apache Iggy's key names and rules (config.go), and the
// cluster's roster, consensus timing and replica plane limits (cluster.go). It
// checks what it reads and names the setting it refuses; it starts nothing.
package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/iggy-shard/iggy-shard/metaplane"
	"github.com/iggy-shard/iggy-shard/shard"
)

// Config is the server's configuration. Its TOML form mirrors Apache Iggy's key names
// where Iggy has the setting (iggy.apache.org/docs/server/configuration):
//
//	[system]
//	path = "local_data"                 # IGGY_SYSTEM_PATH
//	[system.sharding]
//	cpu_allocation = "all"              # IGGY_SYSTEM_SHARDING_CPU_ALLOCATION: "all" or a count
//	busy_poll = "50 us"                 # ours: how long a shard polls before it sleeps; 0 = never
//	[system.metadata]
//	snapshot_interval_ops = 960         # ours: journal ops between metadata snapshots (at most 960)
//	[system.polls]
//	memory_max = "256 MiB"              # ours: bytes a shard's polls hold at once (more wait)
//	[system.partition]                  # ours: spliced polls and the scrubber (partition.go),
//	                                    # IGGY_SYSTEM_PARTITION_*
//	[tcp]
//	address = "127.0.0.1:8090"          # IGGY_TCP_ADDRESS
//	max_frame_size = "64 MiB"           # ours: the largest request frame
//	idle_timeout = "60 s"               # ours: close a connection silent this long; 0 = never
//	[tcp.tls]
//	enabled = false                     # IGGY_TCP_TLS_ENABLED: the port speaks only TLS
//	self_signed = true                  # IGGY_TCP_TLS_SELF_SIGNED: see TLS
//	cert_file = "core/certs/iggy_cert.pem"  # IGGY_TCP_TLS_CERT_FILE
//	key_file = "core/certs/iggy_key.pem"    # IGGY_TCP_TLS_KEY_FILE
//	[heartbeat]
//	interval = "30 s"                   # IGGY_HEARTBEAT_INTERVAL: group members silent
//	                                    # for 1.2 intervals are evicted (reason 13)
//	[metrics]
//	address = "127.0.0.1:9090"          # ours, IGGY_METRICS_ADDRESS: /metrics, /health and
//	                                    # /debug/replicated-state; off when absent
//	[pprof]
//	address = "127.0.0.1:6060"          # ours, IGGY_PPROF_ADDRESS: net/http/pprof; off when absent
//	[http]                              # the HTTP API (http.go), IGGY_HTTP_*
//	[metadata]                          # the metadata plane's sizes (metadata.go), IGGY_METADATA_*
//	[quic]
//	enabled = false                     # IGGY_QUIC_ENABLED: not served; true is warned (Warnings)
//	[websocket]
//	enabled = false                     # IGGY_WEBSOCKET_ENABLED: not served; true is warned
//
// The root credentials come from IGGY_ROOT_USERNAME and IGGY_ROOT_PASSWORD (as in
// Iggy, only the first start of a data directory reads them) or from flags.
type Config struct {
	// TCPAddress is where clients connect, host:port; port 0 picks a free port.
	TCPAddress string
	// SystemPath is the data directory: metadata/ and streams/ live under it.
	SystemPath string
	// RootUsername and RootPassword create the root user on the first start.
	RootUsername string
	RootPassword string
	// ShardCount is the number of shards; 0 = one per CPU the process may use.
	ShardCount int
	// FrameSizeMaxBytes bounds a request frame, header included.
	FrameSizeMaxBytes uint32
	// IdleTimeout closes a connection that has sent nothing (not even a PING) for
	// this long; 0 never does. See IdleTimeoutDefault.
	IdleTimeout time.Duration
	// SnapshotIntervalOps is how many committed metadata operations pass between
	// snapshots (each of which empties the journal). Start clamps it, with a
	// warning, to what the metadata journal's window allows (server/metacheckpoint.go):
	// 960, the default.
	SnapshotIntervalOps uint64
	// PinCPUs pins shard i to the i-th allowed CPU.
	PinCPUs bool
	// BusyPoll is how long a shard that has just worked polls its ring before it
	// sleeps (shard.Config.BusyPoll); 0 = it always sleeps at once.
	BusyPoll time.Duration
	// PollMemoryBytesMax bounds, per shard, the bytes the polls it serves hold at
	// once: the reads waiting for their replies to be sent, the reservation of each
	// read not yet sized, and idle read buffers kept for reuse. Polls beyond it wait
	// their turn. It is at least one poll's reservation (32 MiB plus
	// FrameSizeMaxBytes, see pollMemory). 0 = 256 MiB.
	PollMemoryBytesMax int64
	// HeartbeatInterval is the reference's heartbeat.interval: a consumer group
	// member silent for 1.2 intervals is evicted (reason 13 StaleClient). 0 = 30 s.
	HeartbeatInterval time.Duration
	// MetricsAddress, when set (host:port), serves /metrics (Prometheus) and /health
	// there (server/metrics.go); PprofAddress, when set, serves net/http/pprof.
	MetricsAddress string
	PprofAddress   string
	// TLS is [tcp.tls]: TLS on the TCP port.
	TLS TLS
	// Partition is our keys of [system.partition] (partition.go).
	Partition Partition
	// Cluster is [cluster] and [message_bus] (cluster.go).
	Cluster Cluster
	// HTTP is [http] (http.go).
	HTTP HTTP
	// Metadata is [metadata] (metadata.go).
	Metadata Metadata
	// QUICEnabled and WebSocketEnabled are [quic] enabled and [websocket] enabled:
	// transports this server does not serve. Enabled, each is named in Warnings and
	// its port is advertised as 0, the reference's "disabled".
	QUICEnabled, WebSocketEnabled bool
}

// TLS is Apache Iggy's [tcp.tls] (upstream/server-configuration.md). Enabled,
// the TCP port speaks only TLS (1.2 and 1.3, crypto/tls's defaults, no ALPN). With
// SelfSigned the server loads the PEM pair when CertFile exists and otherwise
// generates an ephemeral certificate for localhost, 127.0.0.1 and ::1 (logging which
// it did); without it both files must exist. The pair is loaded once, at start.
type TLS struct {
	Enabled    bool
	SelfSigned bool
	CertFile   string
	KeyFile    string
}

// IdleTimeoutDefault is how long a connection may send nothing before it is closed:
// twelve of the 5 s PINGs the Rust, Go, Python, Node and async Java SDKs send from a
// connected client, so a client that is merely slow (a GC pause, a busy host) is
// never cut off, yet a fleet of abandoned sockets is reaped within a minute instead
// of being held forever. It is twice the reference's QUIC max_idle_timeout (30 s,
// apache/iggy core/server/config.toml) and longer than its heartbeat staleness
// window (1.2 x heartbeat.interval = 36 s), so a consumer group member that went
// silent is evicted as stale (reason 13) before its connection is closed. Clients
// that never ping (the blocking Java and C# SDKs) are closed after a minute of
// silence and must reconnect, or the operator sets 0.
const IdleTimeoutDefault = 60 * time.Second

// Default is what `iggy-shard` with no arguments runs with.
func Default() Config {
	return Config{
		TCPAddress:          "127.0.0.1:8090",
		SystemPath:          "local_data",
		RootUsername:        "iggy",
		RootPassword:        "iggy",
		FrameSizeMaxBytes:   64 << 20,
		IdleTimeout:         IdleTimeoutDefault,
		SnapshotIntervalOps: snapshotIntervalOpsDefault,
		PinCPUs:             true,
		BusyPoll:            shard.BusyPollDefault,
		HeartbeatInterval:   HeartbeatIntervalDefault,
		Partition:           DefaultPartition(),
		Cluster:             DefaultCluster(),
		HTTP:                DefaultHTTP(),
		Metadata:            DefaultMetadata(),
		TLS: TLS{
			SelfSigned: true,
			CertFile:   "core/certs/iggy_cert.pem",
			KeyFile:    "core/certs/iggy_key.pem",
		},
	}
}

// fileConfig is the TOML document; pointers tell a key that is absent from one that
// is set to its zero value.
type fileConfig struct {
	System struct {
		Path     *string `toml:"path"`
		Sharding struct {
			CPUAllocation *string `toml:"cpu_allocation"`
			BusyPoll      *string `toml:"busy_poll"`
		} `toml:"sharding"`
		Metadata struct {
			SnapshotIntervalOps *int64 `toml:"snapshot_interval_ops"`
		} `toml:"metadata"`
		Polls struct {
			MemoryMax *string `toml:"memory_max"`
		} `toml:"polls"`
		Partition map[string]any `toml:"partition"`
	} `toml:"system"`
	TCP struct {
		Address      *string `toml:"address"`
		MaxFrameSize *string `toml:"max_frame_size"`
		IdleTimeout  *string `toml:"idle_timeout"`
		TLS          struct {
			Enabled    *bool   `toml:"enabled"`
			SelfSigned *bool   `toml:"self_signed"`
			CertFile   *string `toml:"cert_file"`
			KeyFile    *string `toml:"key_file"`
		} `toml:"tls"`
	} `toml:"tcp"`
	Heartbeat struct {
		Interval *string `toml:"interval"`
	} `toml:"heartbeat"`
	Metrics struct {
		Address *string `toml:"address"`
	} `toml:"metrics"`
	Cluster    fileCluster    `toml:"cluster"`
	MessageBus fileMessageBus `toml:"message_bus"`
	Pprof      struct {
		Address *string `toml:"address"`
	} `toml:"pprof"`
	HTTP     map[string]any `toml:"http"`
	Metadata fileMetadata   `toml:"metadata"`
	QUIC     struct {
		Enabled *bool `toml:"enabled"`
	} `toml:"quic"`
	WebSocket struct {
		Enabled *bool `toml:"enabled"`
	} `toml:"websocket"`
}

// SnapshotIntervalOpsMax is the largest snapshot interval the metadata plane
// honours, 960 ops for its header window of 1,024: a larger one is used as this,
// with a warning (server.Start clamps it).
func SnapshotIntervalOpsMax() uint64 {
	return metaplane.CheckpointIntervalOpsMax(metaplane.JournalSlotsMin)
}

// snapshotIntervalOpsDefault is the largest interval the window allows: fewer
// snapshots (each encodes the whole state on shard 0 and rewrites the journal)
// cost less, and a restart replays at most one interval (under a millisecond of
// applies); the rule's two pipelines of room are margin enough.
var snapshotIntervalOpsDefault = SnapshotIntervalOpsMax()

// HeartbeatIntervalDefault is the reference server's heartbeat.interval.
const HeartbeatIntervalDefault = 30 * time.Second

// SettingError names the setting that stopped the start and why.
type SettingError struct {
	Setting string // the TOML key or environment variable
	Value   string
	Reason  string
}

func (e *SettingError) Error() string {
	return fmt.Sprintf("invalid setting %s = %q: %s", e.Setting, e.Value, e.Reason)
}

// Load builds the configuration: defaults, then the TOML file at path (when
// path is not empty), then the environment (getenv, os.Getenv when nil). Flags are
// the caller's to apply afterwards; Validate checks the result.
//
// getenv gives every variable's value. The few settings whose variable names are
// not fixed (a trusted issuer's index) are also looked for in the process
// environment's names (os.Environ), so that one Load cannot honour is refused
// rather than ignored; a getenv that answers "" for such a name hides it, and one
// it answers for that the process does not have goes unseen.
func Load(path string, getenv func(string) string) (Config, error) {
	cfg := Default()
	if getenv == nil {
		getenv = os.Getenv
	}
	if path != "" {
		var f fileConfig
		meta, err := toml.DecodeFile(path, &f)
		if err != nil {
			return cfg, fmt.Errorf("config file %s: %w", path, err)
		}
		for _, key := range meta.Undecoded() {
			// [http] is decoded whole into a map and checks its own keys
			// (HTTP.applyFile); the TOML package counts a map's keys as undecoded.
			// So is [system.partition] (Partition.applyFile).
			if len(key) > 0 && key[0] == "http" || len(key) > 1 && key[0] == "system" && key[1] == "partition" {
				continue
			}
			return cfg, &SettingError{Setting: key.String(), Value: "", Reason: "unknown key in " + path}
		}
		if err := cfg.applyFile(&f); err != nil {
			return cfg, err
		}
	}
	if err := cfg.applyEnv(getenv, os.Environ()); err != nil {
		return cfg, err
	}
	return cfg, nil
}

func (c *Config) applyFile(f *fileConfig) error {
	if f.System.Path != nil {
		c.SystemPath = *f.System.Path
	}
	if v := f.System.Sharding.CPUAllocation; v != nil {
		n, err := parseCPUAllocation(*v)
		if err != nil {
			return &SettingError{Setting: "system.sharding.cpu_allocation", Value: *v, Reason: err.Error()}
		}
		c.ShardCount = n
	}
	if v := f.System.Sharding.BusyPoll; v != nil {
		d, err := ParseDuration(*v)
		if err != nil {
			return &SettingError{Setting: "system.sharding.busy_poll", Value: *v, Reason: err.Error()}
		}
		c.BusyPoll = d
	}
	if v := f.System.Polls.MemoryMax; v != nil {
		n, err := ParseSizeBytes(*v)
		if err != nil || n > 1<<62 {
			return &SettingError{Setting: "system.polls.memory_max", Value: *v, Reason: "not a size (e.g. \"256 MiB\")"}
		}
		c.PollMemoryBytesMax = int64(n)
	}
	if v := f.System.Metadata.SnapshotIntervalOps; v != nil {
		if *v < 1 {
			return &SettingError{Setting: "system.metadata.snapshot_interval_ops", Value: strconv.FormatInt(*v, 10), Reason: "must be at least 1"}
		}
		c.SnapshotIntervalOps = uint64(*v)
	}
	if f.TCP.Address != nil {
		c.TCPAddress = *f.TCP.Address
	}
	if v := f.TCP.MaxFrameSize; v != nil {
		n, err := ParseSizeBytes(*v)
		if err != nil || n > 1<<32-1 {
			return &SettingError{Setting: "tcp.max_frame_size", Value: *v, Reason: "not a size below 4 GiB (e.g. \"64 MiB\")"}
		}
		c.FrameSizeMaxBytes = uint32(n)
	}
	if v := f.Heartbeat.Interval; v != nil {
		d, err := ParseDuration(*v)
		if err != nil || d <= 0 {
			return &SettingError{Setting: "heartbeat.interval", Value: *v, Reason: "not a positive duration (e.g. \"30 s\")"}
		}
		c.HeartbeatInterval = d
	}
	if err := c.Partition.applyFile(f.System.Partition); err != nil {
		return err
	}
	if err := c.Metadata.applyFile(&f.Metadata); err != nil {
		return err
	}
	if err := c.Cluster.applyFile(&f.Cluster, &f.MessageBus); err != nil {
		return err
	}
	if v := f.Metrics.Address; v != nil {
		c.MetricsAddress = *v
	}
	if v := f.Pprof.Address; v != nil {
		c.PprofAddress = *v
	}
	if v := f.TCP.IdleTimeout; v != nil {
		d, err := ParseDuration(*v)
		if err != nil {
			return &SettingError{Setting: "tcp.idle_timeout", Value: *v, Reason: err.Error()}
		}
		c.IdleTimeout = d
	}
	if v := f.TCP.TLS.Enabled; v != nil {
		c.TLS.Enabled = *v
	}
	if v := f.TCP.TLS.SelfSigned; v != nil {
		c.TLS.SelfSigned = *v
	}
	if v := f.TCP.TLS.CertFile; v != nil {
		c.TLS.CertFile = *v
	}
	if v := f.TCP.TLS.KeyFile; v != nil {
		c.TLS.KeyFile = *v
	}
	if v := f.QUIC.Enabled; v != nil {
		c.QUICEnabled = *v
	}
	if v := f.WebSocket.Enabled; v != nil {
		c.WebSocketEnabled = *v
	}
	return c.HTTP.applyFile(f.HTTP)
}

func (c *Config) applyEnv(getenv func(string) string, environ []string) error {
	if v := getenv("IGGY_TCP_ADDRESS"); v != "" {
		c.TCPAddress = v
	}
	if v := getenv("IGGY_SYSTEM_PATH"); v != "" {
		c.SystemPath = v
	}
	user, password := getenv("IGGY_ROOT_USERNAME"), getenv("IGGY_ROOT_PASSWORD")
	if (user == "") != (password == "") {
		return &SettingError{Setting: "IGGY_ROOT_USERNAME/IGGY_ROOT_PASSWORD", Value: user,
			Reason: "set both or neither (Iggy reads them as a pair)"}
	}
	if user != "" {
		c.RootUsername, c.RootPassword = user, password
	}
	if v := getenv("IGGY_HEARTBEAT_INTERVAL"); v != "" {
		d, err := ParseDuration(v)
		if err != nil || d <= 0 {
			return &SettingError{Setting: "IGGY_HEARTBEAT_INTERVAL", Value: v, Reason: "not a positive duration (e.g. \"30 s\")"}
		}
		c.HeartbeatInterval = d
	}
	if err := c.Partition.applyEnv(getenv); err != nil {
		return err
	}
	if err := c.Metadata.applyEnv(getenv); err != nil {
		return err
	}
	if err := c.Cluster.applyEnv(getenv); err != nil {
		return err
	}
	if v := getenv("IGGY_METRICS_ADDRESS"); v != "" {
		c.MetricsAddress = v
	}
	if v := getenv("IGGY_PPROF_ADDRESS"); v != "" {
		c.PprofAddress = v
	}
	for _, b := range []struct {
		name string
		dst  *bool
	}{{"IGGY_TCP_TLS_ENABLED", &c.TLS.Enabled}, {"IGGY_TCP_TLS_SELF_SIGNED", &c.TLS.SelfSigned}} {
		if v := getenv(b.name); v != "" {
			on, err := strconv.ParseBool(v)
			if err != nil {
				return &SettingError{Setting: b.name, Value: v, Reason: "not true or false"}
			}
			*b.dst = on
		}
	}
	if v := getenv("IGGY_TCP_TLS_CERT_FILE"); v != "" {
		c.TLS.CertFile = v
	}
	if v := getenv("IGGY_TCP_TLS_KEY_FILE"); v != "" {
		c.TLS.KeyFile = v
	}
	if v := getenv("IGGY_SYSTEM_SHARDING_CPU_ALLOCATION"); v != "" {
		n, err := parseCPUAllocation(v)
		if err != nil {
			return &SettingError{Setting: "IGGY_SYSTEM_SHARDING_CPU_ALLOCATION", Value: v, Reason: err.Error()}
		}
		c.ShardCount = n
	}
	for _, b := range []struct {
		name string
		dst  *bool
	}{{"IGGY_QUIC_ENABLED", &c.QUICEnabled}, {"IGGY_WEBSOCKET_ENABLED", &c.WebSocketEnabled}} {
		if v := getenv(b.name); v != "" {
			on, err := strconv.ParseBool(v)
			if err != nil {
				return &SettingError{Setting: b.name, Value: v, Reason: "not true or false"}
			}
			*b.dst = on
		}
	}
	return c.HTTP.applyEnv(getenv, environ)
}

// Warnings are the lines the server logs at WARN when it starts: settings it
// accepts but does not carry out, each named.
func (c *Config) Warnings() []string {
	var w []string
	if c.QUICEnabled {
		w = append(w, "quic.enabled = true: iggy-shard does not serve QUIC; its port is advertised as 0")
	}
	if c.WebSocketEnabled {
		w = append(w, "websocket.enabled = true: iggy-shard does not serve WebSocket; its port is advertised as 0")
	}
	j := &c.HTTP.JWT
	if c.HTTP.Enabled && (j.EncodingSecret == "") != (j.DecodingSecret == "") {
		w = append(w, "http.jwt: only one of encoding_secret and decoding_secret is set; it is used for both")
	} else if c.HTTP.Enabled && j.EncodingSecret != j.DecodingSecret {
		w = append(w, "http.jwt: encoding_secret and decoding_secret differ; the tokens this server issues will not verify")
	}
	return w
}

// Validate checks every setting and names the first one that is wrong.
func (c *Config) Validate() error {
	host, port, err := net.SplitHostPort(c.TCPAddress)
	if err != nil {
		return &SettingError{Setting: "tcp.address", Value: c.TCPAddress, Reason: "not host:port"}
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return &SettingError{Setting: "tcp.address", Value: c.TCPAddress, Reason: "port is not a number in 0..65535"}
	}
	if host != "" && net.ParseIP(host) == nil && host != "localhost" {
		return &SettingError{Setting: "tcp.address", Value: c.TCPAddress, Reason: "host must be an IP address or localhost"}
	}
	if c.SystemPath == "" {
		return &SettingError{Setting: "system.path", Value: "", Reason: "must not be empty"}
	}
	if n := len(c.RootUsername); n < 3 || n > 50 {
		return &SettingError{Setting: "IGGY_ROOT_USERNAME", Value: c.RootUsername, Reason: "must be 3 to 50 bytes"}
	}
	if n := len(c.RootPassword); n < 3 || n > 100 {
		return &SettingError{Setting: "IGGY_ROOT_PASSWORD", Value: "(hidden)", Reason: "must be 3 to 100 bytes"}
	}
	if c.ShardCount < 0 || c.ShardCount > 1024 {
		return &SettingError{Setting: "system.sharding.cpu_allocation", Value: strconv.Itoa(c.ShardCount), Reason: "shard count must be 0 (all CPUs) to 1024"}
	}
	if c.FrameSizeMaxBytes < 1<<20 {
		return &SettingError{Setting: "tcp.max_frame_size", Value: strconv.FormatUint(uint64(c.FrameSizeMaxBytes), 10), Reason: "must be at least 1 MiB"}
	}
	if c.HeartbeatInterval < 0 {
		return &SettingError{Setting: "heartbeat.interval", Value: c.HeartbeatInterval.String(), Reason: "must not be negative"}
	}
	if c.PollMemoryBytesMax < 0 {
		return &SettingError{Setting: "system.polls.memory_max", Value: strconv.FormatInt(c.PollMemoryBytesMax, 10), Reason: "must not be negative"}
	}
	if c.IdleTimeout < 0 {
		return &SettingError{Setting: "tcp.idle_timeout", Value: c.IdleTimeout.String(), Reason: "must not be negative"}
	}
	if c.BusyPoll < 0 || c.BusyPoll > time.Millisecond {
		return &SettingError{Setting: "system.sharding.busy_poll", Value: c.BusyPoll.String(), Reason: "must be 0 (off) to 1ms"}
	}
	if c.SnapshotIntervalOps < 1 {
		return &SettingError{Setting: "system.metadata.snapshot_interval_ops", Value: "0", Reason: "must be at least 1"}
	}
	for _, a := range []struct{ setting, value string }{{"metrics.address", c.MetricsAddress}, {"pprof.address", c.PprofAddress}} {
		if a.value == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(a.value); err != nil {
			return &SettingError{Setting: a.setting, Value: a.value, Reason: "not host:port"}
		} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
			return &SettingError{Setting: a.setting, Value: a.value, Reason: "port is not a number in 0..65535"}
		}
	}
	if err := c.Partition.validate(); err != nil {
		return err
	}
	if err := c.Cluster.Validate(); err != nil {
		return err
	}
	if err := c.Metadata.validate(c.Cluster.Enabled); err != nil {
		return err
	}
	if err := c.HTTP.validate(); err != nil {
		return err
	}
	if c.TLS.Enabled && c.TLS.CertFile == "" {
		return &SettingError{Setting: "tcp.tls.cert_file", Value: "", Reason: "must name a PEM certificate file when TLS is enabled"}
	}
	if c.TLS.Enabled && c.TLS.KeyFile == "" {
		return &SettingError{Setting: "tcp.tls.key_file", Value: "", Reason: "must name a PEM key file when TLS is enabled"}
	}
	return nil
}

func parseCPUAllocation(v string) (int, error) {
	if v == "all" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, errors.New(`must be "all" or a shard count of at least 1 (numa: and ranges are not supported)`)
	}
	return n, nil
}

// ParseSizeBytes reads Iggy's size notation: "64 MiB", "1 GB", "4096", "16KiB".
func ParseSizeBytes(v string) (uint64, error) {
	s := strings.TrimSpace(v)
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("size %q has no number", v)
	}
	n, err := strconv.ParseUint(s[:i], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %w", v, err)
	}
	unit := strings.TrimSpace(s[i:])
	multipliers := map[string]uint64{"": 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
	m, ok := multipliers[unit]
	if !ok {
		return 0, fmt.Errorf("size %q: unknown unit %q", v, unit)
	}
	if n > ^uint64(0)/m {
		return 0, fmt.Errorf("size %q overflows", v)
	}
	return n * m, nil
}

// ParseDuration reads Iggy's duration notation ("30 s", "5 m") and Go's ("30s").
func ParseDuration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.ReplaceAll(v, " ", ""))
	if err != nil {
		return 0, fmt.Errorf("not a duration such as \"30 s\" or \"500ms\"")
	}
	return d, nil
}
