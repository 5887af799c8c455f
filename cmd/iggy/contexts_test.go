package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestContextCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	has(t, e.raw("context", "list"), "Name\ndefault*\n")

	r := e.raw("context", "create", "local", "--tcp-server-address", serverAddr, "-t", rootToken)
	has(t, r, "context 'local' created successfully")
	path := filepath.Join(e.home, contextsFile)
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v %v", path, info, err)
	}
	data, _ := os.ReadFile(path)
	if want := "[default]\n\n[local]\ntcp_server_address = \"" + serverAddr + "\"\ntoken = \"" + rootToken + "\"\n"; string(data) != want {
		t.Fatalf("contexts.toml:\n%s\nwant:\n%s", data, want)
	}
	fails(t, e.raw("context", "create", "local"), exitFailed, "context 'local' already exists")

	// The active context says where to connect and how to log in.
	fails(t, e.raw("stream", "list"), exitFailed, "no credentials for the server at 127.0.0.1:8090")
	has(t, e.raw("context", "use", "local"), "active context set to 'local'")
	if b, _ := os.ReadFile(filepath.Join(e.home, activeContextFile)); string(b) != "local" {
		t.Fatalf(".active_context: %q", b)
	}
	has(t, e.raw("context", "list", "-l", "list"), "default\nlocal*\n")
	has(t, e.raw("stream", "list"), "Executing list streams")
	// Flags win over the context.
	fails(t, e.raw("--tcp-server-address", "127.0.0.1:1", "stream", "list"), exitFailed, "at 127.0.0.1:1")

	r = e.raw("context", "show", "local")
	has(t, r, "Name                local*\n", "TCP Server Address  "+serverAddr+"\n", "Token               ********\n")
	if strings.Contains(r.stdout, rootToken) {
		t.Fatalf("context show printed the token:\n%s", r)
	}
	var shown map[string]any
	if err := jsonUnmarshal(e.raw("--output", "json", "context", "show", "local").stdout, &shown); err != nil ||
		shown["settings"].(map[string]any)["token"] != secretMask || shown["active"] != true {
		t.Fatalf("context show JSON: %v %v", err, shown)
	}

	// Keys this command does not know are kept and shown.
	os.WriteFile(path, append(data, []byte("quic_server_address = \"127.0.0.1:8080\"\nfuture_key = 7\n")...), 0o600)
	has(t, e.raw("context", "show", "local"), "QUIC Server Address  127.0.0.1:8080\n", "future_key           7\n")
	e.raw("context", "create", "second", "--tcp-tls-enabled", "true")
	data, _ = os.ReadFile(path)
	if !strings.Contains(string(data), "future_key = 7") || !strings.Contains(string(data), "[second]\ntcp_tls_enabled = true\n") {
		t.Fatalf("contexts.toml after another create:\n%s", data)
	}

	fails(t, e.raw("context", "use", "nothere"), exitFailed, "context key 'nothere' is missing from contexts.toml")
	fails(t, e.raw("context", "show", "nothere"), exitFailed, "context 'nothere' not found")
	fails(t, e.raw("context", "delete", "nothere"), exitFailed, "context 'nothere' not found")
	has(t, e.raw("context", "delete", "local"), "context 'local' deleted successfully")
	has(t, e.raw("context", "list"), "default*\nsecond\n")

	// An active context contexts.toml lacks stops the commands that connect, and
	// the context commands repair it.
	os.WriteFile(filepath.Join(e.home, activeContextFile), []byte("gone"), 0o600)
	fails(t, e.raw("stream", "list"), exitFailed, "context key 'gone' is missing from contexts.toml", "iggy context use default")
	e.raw("context", "use", "default")
	fails(t, e.raw("stream", "list"), exitFailed, "no credentials for the server at 127.0.0.1:8090")

	os.WriteFile(path, []byte("[broken"), 0o600)
	fails(t, e.raw("context", "list"), exitFailed, "could not read context state")
}

// With neither IGGY_HOME nor HOME there is nowhere to keep contexts or logins.
func TestNoHome(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.vars = map[string]string{}
	has(t, e.raw("context", "list"), "default*")
	fails(t, e.raw("context", "create", "x"), exitFailed, "set IGGY_HOME")
	fails(t, e.iggy("-t", rootToken, "login"), exitFailed, "cannot keep a login session")
	// HOME alone means ~/.iggy.
	e.vars["HOME"] = t.TempDir()
	e.raw("context", "create", "x")
	if _, err := os.Stat(filepath.Join(e.vars["HOME"], ".iggy", contextsFile)); err != nil {
		t.Fatal(err)
	}
}
