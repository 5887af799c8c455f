package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/spf13/cobra"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/jsonview"
	"github.com/iggy-shard/iggy-shard/wire"
)

// pingPause is the wait between two pings, the reference's.
const pingPause = time.Second

func (a *app) pingCommand() *cobra.Command {
	cmd := leaf("ping [flags]", "", "ping iggy server", exactArgs(0), nil)
	count := cmd.Flags().Uint32P("count", "c", 1, "Number of pings, one a second")
	cmd.Long = "Ping the Iggy server (no login needed) and print the round trip times; Ctrl-C stops early."
	cmd.Example = "  iggy ping\n  iggy ping -c 5"
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return a.ping(cmd, *count) }
	return cmd
}

type pingJSON struct {
	Count  int       `json:"count"`
	TimeMs []float64 `json:"time_ms"`
	MinMs  float64   `json:"min_ms"`
	AvgMs  float64   `json:"avg_ms"`
	MaxMs  float64   `json:"max_ms"`
	MdevMs float64   `json:"mdev_ms"`
}

func (a *app) ping(cmd *cobra.Command, count uint32) error {
	if count == 0 {
		return usageErrorf("invalid --count 0: at least 1")
	}
	ctx := cmd.Context()
	c, err := a.connect(ctx, false)
	if err != nil {
		return err
	}
	a.executing("ping command")
	width := len(strconv.FormatUint(uint64(count), 10))
	var times []time.Duration
	for i := uint32(1); i <= count; i++ {
		start := time.Now()
		if err := c.Ping(ctx); err != nil {
			if ctx.Err() != nil && len(times) > 0 {
				break
			}
			return a.refused(err)
		}
		rtt := time.Since(start)
		times = append(times, rtt)
		a.say("Ping sequence id: %*d time: %.2f ms", width, i, float64(rtt)/float64(time.Millisecond))
		if i < count && !sleepCtx(ctx, pingPause) {
			break
		}
	}
	v := pingStats(times)
	return a.result(v, func() {
		a.say("")
		a.say("Ping statistics for %d ping commands", v.Count)
		a.say("min/avg/max/mdev = %.3f/%.3f/%.3f/%.3f ms", v.MinMs, v.AvgMs, v.MaxMs, v.MdevMs)
	})
}

// pingStats: the population standard deviation for mdev, as the reference.
func pingStats(times []time.Duration) pingJSON {
	v := pingJSON{Count: len(times), MinMs: math.Inf(1)}
	var sum float64
	for _, t := range times {
		ms := float64(t) / float64(time.Millisecond)
		v.TimeMs = append(v.TimeMs, ms)
		v.MinMs, v.MaxMs = math.Min(v.MinMs, ms), math.Max(v.MaxMs, ms)
		sum += ms
	}
	v.AvgMs = sum / float64(len(times))
	var squares float64
	for _, ms := range v.TimeMs {
		squares += (ms - v.AvgMs) * (ms - v.AvgMs)
	}
	v.MdevMs = math.Sqrt(squares / float64(len(times)))
	return v
}

// sleepCtx waits d or until ctx ends; it reports whether it waited the whole d.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (a *app) meCommand() *cobra.Command {
	return leaf("me", "", "get current client info", exactArgs(0), func(cmd *cobra.Command, _ []string) error {
		return a.call(cmd, target{}, "me command", func(ctx context.Context, c *client.Client) error {
			me, err := c.GetMe(ctx)
			if err != nil {
				return err
			}
			return a.result(jsonview.ClientDetailsOf(me), func() { a.properties(clientProperties(me)) })
		})
	})
}

func clientProperties(c *wire.ClientDetails) []property {
	props := []property{{"Client ID", strconv.FormatUint(uint64(c.ClientID), 10)}}
	user := "None"
	if c.UserID != wire.ClientUserIDNone {
		user = strconv.FormatUint(uint64(c.UserID), 10)
	}
	props = append(props, property{"User ID", user}, property{"Address", string(c.Address)},
		property{"Transport", wire.ClientTransportName(c.Transport)},
		property{"Consumer Groups Count", strconv.FormatUint(uint64(c.ConsumerGroupsCount), 10)})
	if len(c.Groups) > 0 {
		var lines []string
		for _, g := range c.Groups {
			lines = append(lines, fmt.Sprintf("stream %d, topic %d, group %d", g.StreamID, g.TopicID, g.GroupID))
		}
		props = append(props, property{"Consumer Groups", strings.Join(lines, "\n")})
	}
	return props
}

func (a *app) clientCommand() *cobra.Command {
	list := leaf("list [flags]", "l", "List all currently connected clients", exactArgs(0), nil)
	var mode listMode
	addListMode(list, &mode)
	list.RunE = func(cmd *cobra.Command, _ []string) error { return a.clientList(cmd, mode) }
	return groupCommand("client", "c", "client operations",
		example(leaf("get <CLIENT_ID>", "g", "Get details of a single client with given ID", exactArgs(1), a.clientGet), "  iggy client get 42"),
		list,
	)
}

func (a *app) clientGet(cmd *cobra.Command, args []string) error {
	id, err := parseUint32("client ID", args[0])
	if err != nil {
		return err
	}
	return a.call(cmd, target{client: args[0]}, "get client with ID: "+args[0], func(ctx context.Context, c *client.Client) error {
		d, err := c.GetClient(ctx, id)
		if err != nil {
			return err
		}
		return a.result(jsonview.ClientDetailsOf(d), func() { a.properties(clientProperties(d)) })
	})
}

func (a *app) clientList(cmd *cobra.Command, mode listMode) error {
	return a.call(cmd, target{}, "list clients in "+string(mode)+" mode", func(ctx context.Context, c *client.Client) error {
		clients, err := c.GetClients(ctx)
		if err != nil {
			return err
		}
		views := make([]jsonview.Client, len(clients))
		rows := make([][]string, len(clients))
		for i := range clients {
			h := &clients[i]
			views[i] = jsonview.ClientOf(h)
			user := ""
			if h.UserID != wire.ClientUserIDNone {
				user = strconv.FormatUint(uint64(h.UserID), 10)
			}
			rows[i] = []string{strconv.FormatUint(uint64(h.ClientID), 10), user, string(h.Address),
				wire.ClientTransportName(h.Transport), strconv.FormatUint(uint64(h.ConsumerGroupsCount), 10)}
		}
		return a.result(views, func() {
			if len(rows) == 0 {
				a.say("No clients found!")
				return
			}
			a.table(mode, []string{"Client ID", "User ID", "Address", "Transport", "Consumer Groups"}, rows)
		})
	})
}

func (a *app) clusterCommand() *cobra.Command {
	metadata := leaf("metadata [flags]", "m", "Get the cluster's name and nodes, with their roles", exactArgs(0), nil)
	var mode listMode
	addListMode(metadata, &mode)
	metadata.RunE = func(cmd *cobra.Command, _ []string) error {
		return a.call(cmd, target{}, "get cluster metadata in "+string(mode)+" mode", func(ctx context.Context, c *client.Client) error {
			m, err := c.GetClusterMetadata(ctx)
			if err != nil {
				return err
			}
			return a.result(jsonview.ClusterOf(m), func() {
				if len(m.Nodes) == 0 {
					a.say("No cluster nodes found!")
					return
				}
				a.say("Cluster name: %s", m.Name)
				rows := make([][]string, len(m.Nodes))
				for i, n := range m.Nodes {
					rows[i] = []string{string(n.Name), string(n.IP), port(n.TCPPort), port(n.QUICPort), port(n.HTTPPort),
						port(n.WebSocketPort), jsonview.RoleName(n.Role), jsonview.NodeStatusName(n.Status)}
				}
				a.table(mode, []string{"Name", "IP", "TCP", "QUIC", "HTTP", "WebSocket", "Role", "Status"}, rows)
			})
		})
	}
	return groupCommand("cluster", "cl", "cluster operations", metadata)
}

func port(p uint16) string { return strconv.FormatUint(uint64(p), 10) }

func (a *app) optionsCommand() *cobra.Command {
	cmd := leaf("options <SCOPE>", "", "list the options a resource's create command accepts", exactArgs(1), a.options)
	cmd.Long = "List the options a resource's create command accepts (SCOPE is topic, stream or user), with their\n" +
		"kinds and defaults: what 'iggy topic create --set KEY=VALUE' takes."
	cmd.Example = "  iggy options topic"
	return cmd
}

func (a *app) options(cmd *cobra.Command, args []string) error {
	scopes := map[string]wire.OptionsScope{"topic": wire.OptionsScopeTopic, "stream": wire.OptionsScopeStream, "user": wire.OptionsScopeUser}
	scope, ok := scopes[args[0]]
	if !ok {
		return usageErrorf("invalid scope %q: topic, stream or user", args[0])
	}
	return a.call(cmd, target{}, "describe "+args[0]+" options", func(ctx context.Context, c *client.Client) error {
		descriptors, err := c.DescribeOptions(ctx, scope)
		if err != nil {
			return err
		}
		views := make([]jsonview.OptionSpec, len(descriptors))
		rows := make([][]string, len(descriptors))
		for i := range descriptors {
			d := &descriptors[i]
			views[i] = jsonview.OptionSpecOf(d)
			rows[i] = []string{string(d.Key), d.Kind.String(), jsonview.ValueText(d.Kind, d.Default), string(d.Description)}
		}
		return a.result(views, func() {
			if len(rows) == 0 {
				a.say("%s resources accept no options yet", args[0])
				return
			}
			a.table(listTable, []string{"Key", "Kind", "Default", "Description"}, rows)
		})
	})
}

func (a *app) statsCommand() *cobra.Command {
	cmd := leaf("stats [flags]", "", "get iggy server statistics", exactArgs(0), nil)
	format := cmd.Flags().StringP("output", "o", "table", "Output format: table, list, json or toml")
	cmd.Example = "  iggy stats\n  iggy stats -o json"
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		f := *format
		if !cmd.Flags().Changed("output") && a.jsonMode() {
			f = "json"
		}
		switch f {
		case "table", "list":
		case "json", "toml":
			// A document alone on stdout, without the Executing line.
			a.flags.output = f
		default:
			return usageErrorf("invalid --output %q: table, list, json or toml", f)
		}
		return a.call(cmd, target{}, "stats command", func(ctx context.Context, c *client.Client) error {
			s, err := c.GetStats(ctx)
			if err != nil {
				return err
			}
			return a.printStats(s, f)
		})
	}
	return cmd
}

func (a *app) printStats(s *wire.Stats, format string) error {
	if a.flags.quiet {
		return nil
	}
	switch format {
	case "json":
		return a.emitJSON(jsonview.StatsOf(s))
	case "toml":
		return toml.NewEncoder(a.io.out).Encode(jsonview.StatsOf(s))
	}
	props := []property{
		{"Iggy Server PID", strconv.FormatUint(uint64(s.ProcessID), 10)},
		{"Iggy Server Version", string(s.IggyServerVersion)},
		{"Iggy Server CPU Usage", fmt.Sprintf("%.4f %%", s.CPUUsage)},
		{"Total CPU Usage", fmt.Sprintf("%.4f %%", s.TotalCPUUsage)},
		{"Iggy Server Memory Usage", displaySize(s.MemoryUsageBytes)},
		{"Total Memory (RAM)", displaySize(s.TotalMemoryBytes)},
		{"Available Memory (RAM)", displaySize(s.AvailableMemoryBytes)},
		{"Iggy Server Run Time", formatHumanDuration(time.Duration(s.RunTimeMicros/1e6) * time.Second)},
		{"Start Time (UTC)", utcTime(s.StartTimeMicros)},
		{"Read Bytes", displaySize(s.ReadBytes)},
		{"Written Bytes", displaySize(s.WrittenBytes)},
		{"Messages Size Bytes", displaySize(s.MessagesSizeBytes)},
		{"Streams Count", strconv.FormatUint(uint64(s.StreamsCount), 10)},
		{"Topics Count", strconv.FormatUint(uint64(s.TopicsCount), 10)},
		{"Partitions Count", strconv.FormatUint(uint64(s.PartitionsCount), 10)},
		{"Segments Count", strconv.FormatUint(uint64(s.SegmentsCount), 10)},
		{"Message Count", strconv.FormatUint(s.MessagesCount, 10)},
		{"Clients Count", strconv.FormatUint(uint64(s.ClientsCount), 10)},
		{"Consumer Groups Count", strconv.FormatUint(uint64(s.ConsumerGroupsCount), 10)},
		{"Threads Count", strconv.FormatUint(uint64(s.ThreadsCount), 10)},
		{"Free Disk Space", displaySize(s.FreeDiskSpaceBytes)},
		{"Total Disk Space", displaySize(s.TotalDiskSpaceBytes)},
		{"Hostname", string(s.Hostname)},
		{"OS Name", string(s.OSName)},
		{"OS Version", string(s.OSVersion)},
		{"Kernel Version", string(s.KernelVersion)},
	}
	if format == "list" {
		for _, p := range props {
			fmt.Fprintf(a.io.out, "%s|%s\n", p.name, p.value)
		}
		return nil
	}
	a.properties(props)
	return nil
}

// snapshotCompressions and snapshotTypes are the names snapshot takes, any case.
var (
	snapshotCompressions = map[string]wire.SnapshotCompression{"stored": wire.SnapshotStored, "deflated": wire.SnapshotDeflated,
		"bzip2": wire.SnapshotBzip2, "zstd": wire.SnapshotZstd, "lzma": wire.SnapshotLzma, "xz": wire.SnapshotXz}
	snapshotTypes = map[string]wire.SnapshotType{"filesystem_overview": wire.SnapshotFilesystemOverview,
		"process_list": wire.SnapshotProcessList, "resource_usage": wire.SnapshotResourceUsage, "test": wire.SnapshotTest,
		"server_logs": wire.SnapshotServerLogs, "server_config": wire.SnapshotServerConfig, "all": wire.SnapshotAll}
)

func (a *app) snapshotCommand() *cobra.Command {
	cmd := leaf("snapshot [flags]", "", "collect iggy server troubleshooting data", exactArgs(0), nil)
	cmd.Long = "Collect iggy server troubleshooting data into a zip file snapshot_YYYYMMDD_HHMMSS.zip in the output directory."
	cmd.Example = "  iggy snapshot\n  iggy snapshot -c zstd -s all -o /tmp"
	compression := cmd.Flags().StringP("compression", "c", "deflated", "Compression of the zip entries: stored, deflated, bzip2, zstd, lzma or xz")
	types := cmd.Flags().StringSliceP("snapshot-types", "s", []string{"filesystem_overview", "process_list", "resource_usage", "server_logs"},
		"What to collect, comma-separated or repeated: filesystem_overview, process_list, resource_usage, test,\nserver_logs, server_config, or all")
	outDir := cmd.Flags().StringP("out-dir", "o", ".", "Directory to write the snapshot to")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return a.snapshot(cmd, *compression, *types, *outDir) }
	return cmd
}

type snapshotJSON struct {
	FilePath      string `json:"file_path"`
	FileSizeBytes int    `json:"file_size_bytes"`
}

func (a *app) snapshot(cmd *cobra.Command, compressionName string, typeNames []string, outDir string) error {
	compression, ok := snapshotCompressions[strings.ToLower(compressionName)]
	if !ok {
		return usageErrorf("invalid --compression %q: stored, deflated, bzip2, zstd, lzma or xz", compressionName)
	}
	var types []wire.SnapshotType
	for _, n := range typeNames {
		t, ok := snapshotTypes[strings.ToLower(n)]
		if !ok {
			return usageErrorf("invalid --snapshot-types %q: filesystem_overview, process_list, resource_usage, test, server_logs, server_config or all", n)
		}
		types = append(types, t)
	}
	if info, err := os.Stat(outDir); err != nil || !info.IsDir() {
		return usageErrorf("invalid --out-dir %q: not a directory", outDir)
	}
	return a.call(cmd, target{}, "snapshot command", func(ctx context.Context, c *client.Client) error {
		archive, err := c.GetSnapshot(ctx, compression, types...)
		if err != nil {
			return err
		}
		path := filepath.Join(outDir, "snapshot_"+time.Now().Format("20060102_150405")+".zip")
		if err := os.WriteFile(path, archive, 0o644); err != nil {
			return fmt.Errorf("writing the snapshot: %w", err)
		}
		return a.result(snapshotJSON{FilePath: path, FileSizeBytes: len(archive)}, func() {
			a.properties([]property{{"File Path", path}, {"File Size (bytes)", strconv.Itoa(len(archive))}})
		})
	})
}
