package archtest

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Comments cite what a reader can open. A path of this repository named in a
// comment (metahost/router.go, sim/sim.go, docs/ARCHITECTURE.md; internal/bzip2.NewWriter
// names a package's identifier) or a Go file of the comment's own package named
// bare must exist, and so must the
// repository paths docs/*.md and README.md name in backquotes: a file that was
// split or moved leaves no stale pointer behind.

var (
	// repoPath is a slash-separated path; it is the repository's when its first
	// element is a top-level directory of the repository.
	repoPath = regexp.MustCompile(`[A-Za-z0-9_.\-]+(?:/[A-Za-z0-9_.\-*]+)+`)
	// bareGoFile is a Go file named without a directory, after a space, a
	// parenthesis or a backquote.
	bareGoFile = regexp.MustCompile("(?:^|[\\s(`])([a-z0-9_]+\\.go)\\b")
	// quotedPath is a backquoted path in Markdown.
	quotedPath = regexp.MustCompile("`([A-Za-z0-9_.\\-]+(?:/[A-Za-z0-9_.\\-]*)+)`")
)

func TestCitedPathsExist(t *testing.T) {
	root := moduleRoot(t)
	tops := map[string]bool{}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			tops[e.Name()] = true
		}
	}
	exists := func(path string) bool {
		_, err := os.Stat(filepath.Join(root, filepath.FromSlash(path)))
		return err == nil
	}
	// checkRepoPaths reports the repository paths in line that do not exist.
	checkRepoPaths := func(where, line string) {
		for _, loc := range repoPath.FindAllStringIndex(line, -1) {
			path := strings.TrimRight(line[loc[0]:loc[1]], ".-")
			first, _, _ := strings.Cut(path, "/")
			if !tops[first] || strings.Contains(path, "*") {
				continue
			}
			before := line[:loc[0]]
			// Another repository's path (apache/iggy's, a URL's), or a kernel
			// header (linux/io_uring.h), is not ours.
			if strings.Contains(before, "apache/iggy") || strings.Contains(before, "://") ||
				strings.HasSuffix(before, "/") || strings.HasSuffix(path, ".h") {
				continue
			}
			if pkg, ok := identifierPackage(path); ok && exists(pkg) {
				continue
			}
			if !exists(path) {
				t.Errorf("%s cites %s, which does not exist", where, path)
			}
		}
	}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if base := d.Name(); path != root && (base == "testdata" || strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case strings.HasSuffix(path, ".go"):
			f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			dir := filepath.Dir(path)
			for _, group := range f.Comments {
				for _, c := range group.List {
					where := fset.Position(c.Pos()).String()
					where = strings.TrimPrefix(where, root+string(filepath.Separator))
					for _, line := range strings.Split(c.Text, "\n") {
						checkRepoPaths(where, line)
						for _, m := range bareGoFile.FindAllStringSubmatch(line, -1) {
							if _, err := os.Stat(filepath.Join(dir, m[1])); err != nil {
								t.Errorf("%s cites %s, which is not a file of its package", where, m[1])
							}
						}
					}
				}
			}
		case rel == "README.md" || strings.HasPrefix(rel, "docs/") && strings.HasSuffix(rel, ".md"):
			text, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for i, line := range strings.Split(string(text), "\n") {
				for _, m := range quotedPath.FindAllStringSubmatch(line, -1) {
					p := strings.TrimSuffix(m[1], "/")
					first, _, _ := strings.Cut(p, "/")
					if tops[first] && !strings.HasSuffix(p, ".h") && !exists(p) {
						t.Errorf("%s:%d cites %s, which does not exist", rel, i+1, p)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// identifierPackage returns the package of a path that names an exported
// identifier of it ("internal/bzip2" of "internal/bzip2.NewWriter").
func identifierPackage(path string) (string, bool) {
	slash := strings.LastIndexByte(path, '/')
	dot := strings.IndexByte(path[slash+1:], '.')
	if dot < 0 {
		return "", false
	}
	ident := path[slash+1+dot+1:]
	if ident == "" || ident[0] < 'A' || ident[0] > 'Z' {
		return "", false
	}
	return path[:slash+1+dot], true
}
