package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// Contexts, kept as the reference keeps them (apache/iggy
// core/cli/src/commands/binary_context/): under $IGGY_HOME (default ~/.iggy),
// contexts.toml holds a table of connection and credential settings per context
// name, and .active_context the active name (no newline). "default" always exists,
// empty unless contexts.toml says otherwise, and is active when .active_context is
// absent. Keys this command does not know are kept as they are.
const (
	contextsFile      = "contexts.toml"
	activeContextFile = ".active_context"
	defaultContext    = "default"
	// secretFileMode and secretDirMode keep contexts (which may hold passwords)
	// and stored logins readable by their owner alone.
	secretFileMode = 0o600
	secretDirMode  = 0o700
)

// iggyHome is $IGGY_HOME, else $HOME/.iggy, else "" (contexts and stored logins
// are then off).
func iggyHome(getenv func(string) string) string {
	if h := getenv("IGGY_HOME"); h != "" {
		return h
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".iggy")
	}
	return ""
}

// contextValues are one context's settings, as TOML decoded them.
type contextValues map[string]any

func (c contextValues) str(key string) string {
	s, _ := c[key].(string)
	return s
}

func (c contextValues) boolean(key string) (bool, bool) {
	b, ok := c[key].(bool)
	return b, ok
}

// contextStore is the contexts under one directory.
type contextStore struct {
	dir        string
	contexts   map[string]contextValues
	activeName string
}

// loadContexts reads dir's contexts; a missing directory or file is the default
// context alone. A contexts.toml that does not parse stops every command: which
// settings would apply cannot be known.
func loadContexts(dir string) (*contextStore, error) {
	s := &contextStore{dir: dir, contexts: map[string]contextValues{defaultContext: {}}, activeName: defaultContext}
	if dir == "" {
		return s, nil
	}
	path := filepath.Join(dir, contextsFile)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("could not read context state: %w", err)
	default:
		var raw map[string]map[string]any
		if _, err := toml.Decode(string(data), &raw); err != nil {
			return nil, fmt.Errorf("could not read context state: %s: %w\nhint: fix the file or remove it", path, err)
		}
		for name, values := range raw {
			s.contexts[name] = values
		}
	}
	active, err := os.ReadFile(filepath.Join(dir, activeContextFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("could not read context state: %w", err)
	default:
		if name := strings.TrimSpace(string(active)); name != "" {
			s.activeName = name
		}
	}
	return s, nil
}

// active is the active context's settings; a name contexts.toml lacks stops the
// commands that connect (the context commands still run, to repair it).
func (s *contextStore) active() (contextValues, error) {
	values, ok := s.contexts[s.activeName]
	if !ok {
		return nil, fmt.Errorf("context key '%s' is missing from contexts.toml\nhint: iggy context use %s", s.activeName, defaultContext)
	}
	return values, nil
}

// names are the contexts, sorted.
func (s *contextStore) names() []string {
	names := make([]string, 0, len(s.contexts))
	for name := range s.contexts {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// save writes contexts.toml whole, readable by its owner only.
func (s *contextStore) save() error {
	if s.dir == "" {
		return errNoHome
	}
	// The default table first, as the reference writes it, then the others by
	// name, a blank line between tables.
	var out bytes.Buffer
	for _, name := range append([]string{defaultContext}, slices.DeleteFunc(s.names(), func(n string) bool { return n == defaultContext })...) {
		var table bytes.Buffer
		enc := toml.NewEncoder(&table)
		enc.Indent = ""
		if err := enc.Encode(map[string]contextValues{name: s.contexts[name]}); err != nil {
			return err
		}
		if out.Len() > 0 {
			out.WriteString("\n")
		}
		out.Write(bytes.TrimSpace(table.Bytes()))
		out.WriteString("\n")
	}
	return writeSecretFile(s.dir, contextsFile, out.Bytes())
}

// setActive writes .active_context.
func (s *contextStore) setActive(name string) error {
	if s.dir == "" {
		return errNoHome
	}
	if err := writeSecretFile(s.dir, activeContextFile, []byte(name)); err != nil {
		return err
	}
	s.activeName = name
	return nil
}

var errNoHome = errors.New("there is nowhere to keep it: set IGGY_HOME (or HOME)")

// writeSecretFile replaces dir/name with data, mode 0600, creating dir (0700): a
// temporary file renamed over the old one, so a reader never sees half of it.
func writeSecretFile(dir, name string, data []byte) error {
	if err := os.MkdirAll(dir, secretDirMode); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+name+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(secretFileMode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, name))
}

// validContextName: non-empty, letters, digits, '-' and '_'.
func validContextName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}
