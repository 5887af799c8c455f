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

// The import rules live in docs/ARCHITECTURE.md, in its "deps" and "never" blocks,
// so that the document a newcomer reads and the rules the code keeps are one text.
const architectureDoc = "docs/ARCHITECTURE.md"

// testOnlyEdges are the extra imports a package's tests may make: servers are
// driven by the Go client in tests, the load generator's tests start a server,
// arena's tests register its buffers with a ring; TLS tests make certificates
// with tlsterm/tlstest; the consensus core's traces run on cockroachdb/datadriven.
var testOnlyEdges = map[string][]string{
	"arena":                {"ring"},
	"tlsterm":              {"tlsterm/tlstest"},
	"server":               {"client", "tlsterm/tlstest", "internal/freeport"},
	"replicanet":           {"tlsterm/tlstest"},
	"bench":                {"server", "config"},
	"cmd/iggy-shard":       {"client", "wire"},
	"cmd/iggy":             {"server", "config", "tlsterm/tlstest"},
	"compat":               {"server", "config", "wire", "github.com/zeebo/xxh3", "tlsterm/tlstest"},
	"internal/clustertest": {"client", "wire", "internal/freeport"},
	// the consensus core's trace tests are datadriven scripts (testdata/*.txt)
	"vsr": {"github.com/cockroachdb/datadriven"},
}

const modulePath = "github.com/iggy-shard/iggy-shard"

func TestImportEdges(t *testing.T) {
	allowed, err := parseRules(docBlock(t, "deps"))
	if err != nil {
		t.Fatalf("%s, deps block: %v", architectureDoc, err)
	}
	pkgs := modulePackages(t)
	if len(pkgs) < 10 {
		t.Fatalf("found %d packages: the walk of the module went wrong", len(pkgs))
	}
	for _, p := range pkgs {
		name := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, modulePath), "/")
		ok, listed := allowed[name]
		if !listed {
			t.Errorf("package %s is in no rule of the deps block of %s: give it its place in the layers", name, architectureDoc)
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
					t.Errorf("%s %s imports %s: not allowed by the deps block of %s", name, what, dep, architectureDoc)
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
	root := moduleRoot(t)
	var pkgs []*build.Package
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
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

// moduleRoot is the directory holding go.mod, above the test's directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			return root
		}
		parent := filepath.Dir(root)
		if parent == root {
			t.Fatal("no go.mod above the test's directory")
		}
		root = parent
	}
}

// docBlock returns the fenced block of architectureDoc whose info string is name
// (three backquotes and name on the opening line); there must be exactly one.
func docBlock(t *testing.T, name string) string {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(moduleRoot(t), architectureDoc))
	if err != nil {
		t.Fatal(err)
	}
	fence := "```"
	var blocks []string
	var block []string
	in := false
	for _, line := range strings.Split(string(text), "\n") {
		switch {
		case !in && strings.TrimSpace(line) == fence+name:
			in, block = true, nil
		case in && strings.TrimSpace(line) == fence:
			in = false
			blocks = append(blocks, strings.Join(block, "\n"))
		case in:
			block = append(block, line)
		}
	}
	if in || len(blocks) != 1 {
		t.Fatalf("%s: want one closed %q block, found %d (open at the end: %v)", architectureDoc, name, len(blocks), in)
	}
	return blocks[0]
}
