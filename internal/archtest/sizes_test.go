package archtest

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The sizes a reader can take in: a file of at most fileLinesMax lines, a struct
// of at most structFieldsMax fields (aim for ~800 and ~20). Tests are not held to
// them.
const (
	fileLinesMax    = 1000
	structFieldsMax = 30
)

// sizeExceptions are the files and structs allowed past the limits, each with its
// reason: a layout the protocol dictates is one, "it grew" is not. Keys are a
// file's path in the module ("vsr/core.go") or a struct's package path and name
// ("vsr.Core", "sim.Result").
var sizeExceptions = map[string]string{}

func TestSizes(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	over := map[string]string{} // what is past a limit, and by how much
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if base := d.Name(); path != root && (base == "testdata" || strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if lines := bytes.Count(src, []byte("\n")); lines > fileLinesMax {
			over[rel] = plural(lines, "line")
		}
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(rel))
		ast.Inspect(f, func(n ast.Node) bool {
			spec, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := spec.Type.(*ast.StructType)
			if !ok {
				return true
			}
			if fields := countFields(st); fields > structFieldsMax {
				over[pkg+"."+spec.Name.Name] = plural(fields, "field")
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for what, size := range over {
		if reason, ok := sizeExceptions[what]; ok {
			t.Logf("%s: %s, allowed: %s", what, size, reason)
			continue
		}
		t.Errorf("%s has %s: at most %d lines a file and %d fields a struct (split it by concept, or give it a reason in sizeExceptions)",
			what, size, fileLinesMax, structFieldsMax)
	}
	for what := range sizeExceptions {
		if _, ok := over[what]; !ok {
			t.Errorf("sizeExceptions lists %s, which is within the limits now (or gone): take it out", what)
		}
	}
}

// countFields counts a struct's fields as a reader does: each name, and each
// embedded type, is one.
func countFields(st *ast.StructType) int {
	n := 0
	for _, f := range st.Fields.List {
		n += max(len(f.Names), 1)
	}
	return n
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}
