package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden help texts in testdata/help")

// TestHelpGolden pins the help of the main commands: the command tree, arguments,
// flags and examples a user reads. Run with -update to rewrite, then read the diff.
func TestHelpGolden(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		golden string
		args   []string
	}{
		{"overview", nil},
		{"root", []string{"--help"}},
		{"stream", []string{"stream", "--help"}},
		{"stream-create", []string{"stream", "create", "--help"}},
		{"topic", []string{"topic", "--help"}},
		{"topic-create", []string{"topic", "create", "--help"}},
		{"message-send", []string{"message", "send", "--help"}},
		{"message-poll", []string{"message", "poll", "--help"}},
		{"user-create", []string{"user", "create", "--help"}},
		{"pat-create", []string{"pat", "create", "--help"}},
		{"context-create", []string{"context", "create", "--help"}},
		{"consumer-offset-get", []string{"consumer-offset", "get", "--help"}},
		{"login", []string{"login", "--help"}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			r := newEnv(t).raw(tc.args...)
			if r.code != exitOK || r.stderr != "" {
				t.Fatalf("help:\n%s", r)
			}
			path := filepath.Join("testdata", "help", tc.golden+".golden")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(r.stdout), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./cmd/iggy -run TestHelpGolden -update)", err)
			}
			if r.stdout != string(want) {
				t.Fatalf("help of %q differs from %s (run with -update and read the diff):\n%s",
					strings.Join(tc.args, " "), path, r.stdout)
			}
		})
	}
}

// The overview opens with the reference's banner, trailing spaces included.
func TestOverviewBanner(t *testing.T) {
	t.Parallel()
	r := newEnv(t).raw()
	lines := strings.Split(r.stdout, "\n")
	if len(lines) < 6 || len(lines[0]) != 40 || len(lines[5]) != 40 || !strings.HasSuffix(lines[5], strings.Repeat(" ", 19)) {
		t.Fatalf("banner:\n%q", lines[:6])
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"--version", "-V"} {
		r := newEnv(t).raw(arg)
		if r.code != exitOK || !strings.HasPrefix(r.stdout, "iggy "+version) {
			t.Fatalf("%s:\n%s", arg, r)
		}
	}
}

func TestCompletion(t *testing.T) {
	t.Parallel()
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		r := newEnv(t).raw("--generate", shell)
		if r.code != exitOK || !strings.Contains(r.stdout, "iggy") || len(r.stdout) < 1000 {
			t.Fatalf("--generate %s:\n%.300s", shell, r.stdout)
		}
	}
	fails(t, newEnv(t).raw("--generate", "tcsh"), exitUsage, `invalid --generate "tcsh"`)
	// The scripts ask the command itself for candidates.
	has(t, newEnv(t).raw("__complete", "stream", ""), "create\tCreate stream with given name\n", "purge\t")
	has(t, newEnv(t).raw("__complete", "message", "poll", "--fo"), "--follow\t")
}
