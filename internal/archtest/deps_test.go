package archtest

import (
	"errors"
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// depsRules are the import edges the module allows, bottom layer first, in the
// notation of go/build/deps_test.go: "a, b < c, d" lets c and d import a, b and
// everything a and b may import; a name gains no imports once a rule has used it
// below another, so each closure is complete when it is taken. A package name is its path in the module; a
// library is its import path. Standard-library imports are always allowed. A
// package of the module that no rule names fails the test, so a new package comes
// with its place in the layers.
//
// Edges marked "not drawn in DESIGN.md" exist in the code today without being in
// the design's table: the lead decides whether the design or the code changes.
const depsRules = `
	# libraries
	github.com/zeebo/xxh3, lukechampine.com/blake3,
	golang.org/x/sys/unix, golang.org/x/sys/cpu, github.com/klauspost/cpuid/v2,
	golang.org/x/crypto/argon2,
	github.com/BurntSushi/toml, github.com/klauspost/compress/zstd,
	github.com/ulikunitz/xz, github.com/ulikunitz/xz/lzma,
	github.com/prometheus/client_golang/prometheus,
	github.com/prometheus/client_golang/prometheus/promhttp,
	github.com/spf13/cobra, github.com/spf13/pflag, golang.org/x/term;

	# bytes: the wire formats, pure
	github.com/zeebo/xxh3, lukechampine.com/blake3 < wire;

	# kernel
	golang.org/x/sys/unix < ring, arena;
	golang.org/x/sys/unix, github.com/klauspost/cpuid/v2 < linux;
	ring < fdpass;
	internal/bzip2;
	# TLS terminated off the shards, bridged to them over socketpairs;
	# tlstest makes the certificates of tests.
	golang.org/x/sys/unix < tlsterm;
	tlsterm/tlstest;

	# cores: state machines over wire
	wire < vsr, metadata, segment;
	# not drawn in DESIGN.md: segment's file storage calls x/sys/unix itself
	# rather than through a kernel-layer package.
	golang.org/x/sys/unix < segment;
	# not drawn in DESIGN.md: metadata hashes passwords with argon2id from
	# golang.org/x/crypto, a library outside the core four.
	golang.org/x/crypto/argon2 < metadata;
	# the replica plane's connections: the handshake, pure
	wire < replica;
	segment, vsr < partition;

	# planes: the metadata plane, sans-IO, over the cores
	vsr, metadata < metaplane;
	# the simulator runs the real metadata plane and partition plane
	metaplane, segment, partition < vsr/sim;

	# runtime
	arena, fdpass, linux, ring, replica, segment, wire, golang.org/x/sys/cpu < shard;

	# server: the protocol on the runtime
	shard, metaplane, partition, internal/bzip2, tlsterm,
	github.com/BurntSushi/toml, github.com/klauspost/compress/zstd,
	github.com/ulikunitz/xz, github.com/ulikunitz/xz/lzma,
	github.com/prometheus/client_golang/prometheus,
	github.com/prometheus/client_golang/prometheus/promhttp < server;

	# clients
	wire < client;
	client < bench;

	# binaries
	server < cmd/iggy-shard;
	# iggy-bench runs a server of its own (a child process of its binary) and
	# draws its progress bar on a terminal.
	bench, server, golang.org/x/sys/unix < cmd/iggy-bench;
	# the command line: cobra's tree, help and completion, password prompts
	# without echo (x/term), contexts and stored logins in TOML.
	client, github.com/spf13/cobra, github.com/spf13/pflag, golang.org/x/term,
	github.com/BurntSushi/toml < cmd/iggy;

	# conformance tests: no code of their own (testOnlyEdges)
	compat;
	# real-process cluster tests and benchmarks: no code of their own; they build
	# cmd/iggy-shard and drive it with the client (testOnlyEdges)
	internal/clustertest;
	internal/archtest;
`

// testOnlyEdges are the extra imports a package's tests may make: servers are
// driven by the Go client in tests, the load generator's tests start a server,
// arena's tests register its buffers with a ring; TLS tests make certificates
// with tlsterm/tlstest; the consensus core's traces run on cockroachdb/datadriven.
var testOnlyEdges = map[string][]string{
	"arena":                {"ring"},
	"tlsterm":              {"tlsterm/tlstest"},
	"server":               {"client", "tlsterm/tlstest"},
	"bench":                {"server"},
	"cmd/iggy-shard":       {"client", "wire"},
	"cmd/iggy":             {"server", "tlsterm/tlstest"},
	"compat":               {"server", "wire", "github.com/zeebo/xxh3", "tlsterm/tlstest"},
	"internal/clustertest": {"client", "wire"},
	// the consensus core's trace tests are datadriven scripts (testdata/*.txt)
	"vsr": {"github.com/cockroachdb/datadriven"},
}

const modulePath = "github.com/iggy-shard/iggy-shard"

func TestImportEdges(t *testing.T) {
	allowed, err := parseRules(depsRules)
	if err != nil {
		t.Fatalf("depsRules: %v", err)
	}
	pkgs := modulePackages(t)
	if len(pkgs) < 10 {
		t.Fatalf("found %d packages: the walk of the module went wrong", len(pkgs))
	}
	for _, p := range pkgs {
		name := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, modulePath), "/")
		ok, listed := allowed[name]
		if !listed {
			t.Errorf("package %s is not in depsRules: give it its place in the layers", name)
			continue
		}
		check := func(imports []string, extra []string, what string) {
			for _, imp := range imports {
				dep, local := strings.CutPrefix(imp, modulePath+"/")
				if !local && isStandard(imp) || dep == name {
					continue
				}
				if !local {
					dep = imp
				}
				if !ok[dep] && !slices.Contains(extra, dep) {
					t.Errorf("%s %s imports %s: not allowed by depsRules", name, what, dep)
				}
			}
		}
		check(p.Imports, nil, "code")
		check(append(slices.Clone(p.TestImports), p.XTestImports...), testOnlyEdges[name], "tests")
	}
}

// The rules notation itself: closure, order and errors.
func TestParseRules(t *testing.T) {
	allowed, err := parseRules("x; x < a; a < b, c; b < d")
	if err != nil {
		t.Fatal(err)
	}
	if !allowed["d"]["x"] || !allowed["d"]["a"] || !allowed["d"]["b"] || allowed["d"]["c"] || allowed["a"]["b"] {
		t.Fatalf("closure wrong: %v", allowed)
	}
	for _, bad := range []string{"a < b; b < a", "a <", "< a", "a < b; c < a", "a; c; a < b; c < a"} {
		if _, err := parseRules(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// parseRules returns, for each name, the set of names it may import.
func parseRules(rules string) (map[string]map[string]bool, error) {
	allowed := map[string]map[string]bool{}
	used := map[string]bool{} // names that have appeared below another
	var lines []string
	for _, line := range strings.Split(rules, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		lines = append(lines, line)
	}
	for _, stmt := range strings.Split(strings.Join(lines, " "), ";") {
		if strings.TrimSpace(stmt) == "" {
			continue
		}
		var lists [][]string
		for _, part := range strings.Split(stmt, "<") {
			var names []string
			for _, n := range strings.Split(part, ",") {
				if n = strings.TrimSpace(n); n != "" {
					names = append(names, n)
				}
			}
			if len(names) == 0 {
				return nil, errors.New("empty list in " + strings.TrimSpace(stmt))
			}
			lists = append(lists, names)
		}
		for _, n := range lists[0] {
			if len(lists) == 1 {
				if _, ok := allowed[n]; !ok {
					allowed[n] = map[string]bool{}
				}
			}
		}
		for i := 1; i < len(lists); i++ {
			for _, low := range lists[i-1] {
				if _, ok := allowed[low]; !ok {
					return nil, errors.New(low + " is used before it is defined")
				}
				used[low] = true
			}
			for _, high := range lists[i] {
				if used[high] {
					return nil, errors.New(high + " gains imports after a rule used it")
				}
				set, ok := allowed[high]
				if !ok {
					set = map[string]bool{}
					allowed[high] = set
				}
				for _, low := range lists[i-1] {
					if low == high || allowed[low][high] {
						return nil, errors.New("cycle between " + low + " and " + high)
					}
					set[low] = true
					for dep := range allowed[low] {
						set[dep] = true
					}
				}
			}
		}
	}
	return allowed, nil
}

// modulePackages reads every package of the module from source (go/build, for this
// GOOS and GOARCH), from the directory holding go.mod.
func modulePackages(t *testing.T) []*build.Package {
	t.Helper()
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(root)
		if parent == root {
			t.Fatal("no go.mod above the test's directory")
		}
		root = parent
	}
	var pkgs []*build.Package
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if base := d.Name(); path != root && (base == "testdata" || strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_")) {
			return filepath.SkipDir
		}
		p, err := build.ImportDir(path, 0)
		var noGo *build.NoGoError
		if errors.As(err, &noGo) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		p.ImportPath = modulePath
		if rel != "." {
			p.ImportPath += "/" + filepath.ToSlash(rel)
		}
		pkgs = append(pkgs, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// isStandard reports whether path is a standard-library import: no dot in its
// first element.
func isStandard(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}
