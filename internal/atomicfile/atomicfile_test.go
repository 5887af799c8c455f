package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestReplace: a file is created, then replaced whole, with the mode asked for,
// and no temporary file is left behind; a directory that does not exist fails.
func TestReplace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "record")
	for _, content := range []string{"first", "second, longer"} {
		if err := Replace(path, []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Fatalf("read %q, %v; want %q", got, err, content)
		}
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v, %v; want 0640", info.Mode().Perm(), err)
	}
	if _, err := os.Stat(path + ".tmp"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the temporary file is left: %v", err)
	}
	if err := Replace(filepath.Join(dir, "missing", "record"), []byte("x"), 0o640); err == nil {
		t.Fatal("a file replaced in a directory that does not exist")
	}
	if err := SyncDir(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a directory that does not exist synced")
	}
}
