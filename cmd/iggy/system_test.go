package main

import (
	"archive/zip"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/jsonview"
	"github.com/iggy-shard/iggy-shard/tlsterm/tlstest"
)

func TestPing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.iggy("ping") // no login needed
	has(t, r, "Executing ping command\nPing sequence id: 1 time: ", "\n\nPing statistics for 1 ping commands\nmin/avg/max/mdev = ")
	var p pingJSON
	if err := jsonUnmarshal(e.iggy("--output", "json", "ping").stdout, &p); err != nil || p.Count != 1 || len(p.TimeMs) != 1 || p.MinMs <= 0 || p.MdevMs != 0 {
		t.Fatalf("ping JSON: %v %+v", err, p)
	}
}

func TestMeAndClients(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	has(t, e.ok("me"), "Client ID", "User ID                0\n", "Transport              TCP\n")
	var me jsonview.Client
	e.json(&me, "me")
	if me.UserID == nil || *me.UserID != 0 || me.Transport != "TCP" || !strings.HasPrefix(me.Address, "127.0.0.1:") || me.ConsumerGroups == nil {
		t.Fatalf("me: %+v", me)
	}
	has(t, e.ok("client", "list"), "Client ID  User ID  Address", "TCP")
	var clients []jsonview.Client
	e.json(&clients, "client", "list")
	if len(clients) == 0 {
		t.Fatal("client list is empty with this client connected")
	}
	// A connection held open meanwhile is found by its id.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	held, err := client.Dial(ctx, serverAddr, client.WithPersonalAccessToken(rootToken))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	heldMe, err := held.GetMe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := strconv.FormatUint(uint64(heldMe.ClientID), 10)
	var got jsonview.Client
	e.json(&got, "client", "get", id)
	if got.ClientID != heldMe.ClientID || got.Address != string(heldMe.Address) || got.UserID == nil || *got.UserID != 0 {
		t.Fatalf("client get %s: %+v, the connection is %+v", id, got, heldMe)
	}
	has(t, e.ok("client", "get", id), "Client ID              "+id+"\n", "Address                "+string(heldMe.Address)+"\n")
	has(t, e.ok("client", "list", "-l", "list"), id+"|0|"+string(heldMe.Address)+"|TCP|0\n")
	fails(t, e.root("client", "get", "4000000000"), exitFailed, "client 4000000000 not found")
}

func TestStats(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	has(t, e.ok("stats"), "Iggy Server PID", "Streams Count", "Kernel Version")
	has(t, e.ok("stats", "-o", "list"), "Iggy Server PID|")
	for _, args := range [][]string{{"stats", "-o", "json"}, {"--output", "json", "stats"}} {
		var s jsonview.Stats
		r := e.ok(args...)
		if err := jsonUnmarshal(r.stdout, &s); err != nil || s.ProcessID != uint32(os.Getpid()) || s.TotalMemory == "" || s.CacheMetrics == nil {
			t.Fatalf("%v: %v %+v", args, err, s)
		}
	}
	var s jsonview.Stats
	if _, err := toml.Decode(e.ok("stats", "-o", "toml").stdout, &s); err != nil || s.ProcessID != uint32(os.Getpid()) {
		t.Fatalf("stats TOML: %v %+v", err, s)
	}
	if r := e.ok("-q", "stats"); r.stdout != "" {
		t.Fatalf("-q stats printed:\n%s", r)
	}
}

func TestSnapshot(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := t.TempDir()
	r := e.ok("snapshot", "-c", "stored", "-s", "filesystem_overview,resource_usage", "-o", dir)
	has(t, r, "File Path          "+dir+"/snapshot_", "File Size (bytes)  ")
	var snap snapshotJSON
	e.json(&snap, "snapshot", "-o", dir)
	zr, err := zip.OpenReader(snap.FilePath)
	if err != nil {
		t.Fatalf("%s: %v", snap.FilePath, err)
	}
	defer zr.Close()
	if info, _ := os.Stat(snap.FilePath); info.Size() != int64(snap.FileSizeBytes) || len(zr.File) == 0 {
		t.Fatalf("snapshot %+v: %d entries", snap, len(zr.File))
	}
}

func TestClusterMetadataAndOptions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.ok("cluster", "metadata")
	has(t, r, "Cluster name: single-node\n", "Name       IP         TCP", "leader  healthy\n")
	var m jsonview.Cluster
	e.json(&m, "cluster", "metadata")
	_, port, _ := strings.Cut(serverAddr, ":")
	if m.Name != "single-node" || len(m.Nodes) != 1 || m.Nodes[0].Role != "leader" || strconv.Itoa(int(m.Nodes[0].Endpoints.TCP)) != port {
		t.Fatalf("cluster metadata: %+v", m)
	}
	has(t, e.ok("cluster", "metadata", "-l", "list"), "|leader|healthy\n")

	has(t, e.ok("options", "topic"), "Key                                Kind    Default", "segment_size", "1073741824")
	var opts []jsonview.OptionSpec
	e.json(&opts, "options", "topic")
	if len(opts) != 8 || opts[3].Key != "segment_size" || opts[3].Kind != "uint64" || len(opts[3].DefaultValue) != 8 {
		t.Fatalf("topic options: %+v", opts)
	}
	has(t, e.ok("options", "stream"), "stream resources accept no options yet")
}

// -v prints diagnostics to stderr, --debug to a file; neither shows a secret.
func TestVerboseAndDebugFile(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	debug := filepath.Join(t.TempDir(), "trace.log")
	r := e.root("-v", "--debug", debug, "cluster", "metadata")
	if r.code != exitOK || !strings.Contains(r.stderr, "iggy: connected to "+serverAddr) ||
		!strings.Contains(r.stderr, "iggy: logged in as user 0") || !strings.Contains(r.stderr, "iggy: answered by "+serverAddr+" (node iggy-node, leader)") {
		t.Fatalf("-v:\n%s", r)
	}
	data, err := os.ReadFile(debug)
	if err != nil || !strings.Contains(string(data), "logging in with a token") || !strings.Contains(string(data), "answered by") {
		t.Fatalf("debug file: %v\n%s", err, data)
	}
	if strings.Contains(string(data)+r.stderr, rootToken) {
		t.Fatal("a diagnostic shows the token")
	}
}

// TLS: the flags reach the server's TLS port; an untrusted certificate and a
// plaintext connection to a TLS port are explained.
func TestTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "cli test CA")
	certFile, keyFile := ca.IssueValid(t).WriteFiles(t, dir)
	caFile := ca.WriteCAFile(t, dir)
	cfg := config.Default()
	cfg.TLS = config.TLS{Enabled: true, CertFile: certFile, KeyFile: keyFile}
	s := startServer(t, cfg)
	addr := s.Addr().String()
	e := newEnv(t)
	has(t, e.raw("--tcp-server-address", addr, "--tcp-tls-enabled", "--tcp-tls-ca-file", caFile, "-u", "iggy", "-p", "iggy", "me"), "Transport              TCP")
	fails(t, e.raw("--tcp-server-address", addr, "--tcp-tls-enabled", "ping"), exitFailed,
		"the TLS certificate of the server at "+addr+" is not trusted: tls: failed to verify certificate", "--tcp-tls-ca-file")
	fails(t, e.raw("--tcp-server-address", addr, "--tcp-tls-enabled", "--tcp-tls-ca-file", caFile, "--tcp-tls-domain", "iggy.example", "ping"),
		exitFailed, "is not trusted")
	fails(t, e.raw("--tcp-server-address", addr, "-u", "iggy", "-p", "iggy", "me"), exitFailed, "does it speak TLS? Then add --tcp-tls-enabled")
	fails(t, e.raw("--tcp-server-address", addr, "--tcp-tls-enabled", "--tcp-tls-ca-file", filepath.Join(dir, "none.pem"), "ping"), exitFailed, "none.pem")

	// A context keeps the TLS settings.
	e.raw("context", "create", "secure", "--tcp-server-address", addr, "--tcp-tls-enabled", "true", "--tcp-tls-ca-file", caFile)
	e.raw("context", "use", "secure")
	has(t, e.raw("ping"), "Ping statistics")
	fails(t, e.raw("--tcp-tls-enabled=false", "ping"), exitFailed)
}
