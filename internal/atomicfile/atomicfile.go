// Package atomicfile replaces a file whole and durably: a crash leaves either the
// old file or the new one, never a mix, and the replacement survives it.
package atomicfile

import (
	"io/fs"
	"os"
	"path/filepath"
)

// Replace replaces path with b: a temp file of mode perm, fsynced, renamed over
// path, and the directory fsynced.
func Replace(path string, b []byte, perm fs.FileMode) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir makes the entries of dir (a creation, a rename) durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
