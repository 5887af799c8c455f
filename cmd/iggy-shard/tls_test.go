package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/config"
)

// TestTLSOneSetting: --tls alone (self_signed by default, no certificate on disk)
// serves TLS with an ephemeral certificate, says so in the log, and a client that
// skips verification logs in.
func TestTLSOneSetting(t *testing.T) {
	certFile := filepath.Join(t.TempDir(), "iggy_cert.pem")
	s := startServer(t, "--shards", "1", "--pin-cpus=false", "--tls", "--tls-cert-file", certFile)
	cfg, err := client.NewTLSConfig(client.TLSOptions{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, s.addr, client.WithTLS(cfg), client.WithCredentials("iggy", "iggy"))
	if err != nil {
		t.Fatalf("Dial over TLS: %v\n%s", err, s.logText())
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if !strings.Contains(s.logText(), "ephemeral self-signed certificate") {
		t.Fatalf("the log does not say which certificate it uses:\n%s", s.logText())
	}
	if code := s.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d after SIGTERM\n%s", code, s.logText())
	}
}

// TestTLSMissingFileStopsTheStart: with self_signed off, a missing certificate stops
// the start with a message naming the setting and the file.
func TestTLSMissingFileStopsTheStart(t *testing.T) {
	certFile := filepath.Join(t.TempDir(), "missing_cert.pem")
	var out bytes.Buffer
	code := run([]string{"--tcp-address", "127.0.0.1:0", "--http-address", "127.0.0.1:0", "--system-path", t.TempDir(), "--shards", "1", "--pin-cpus=false",
		"--tls", "--tls-self-signed=false", "--tls-cert-file", certFile}, &out)
	if code != exitStartFailed {
		t.Fatalf("exit code %d, want %d\n%s", code, exitStartFailed, out.String())
	}
	for _, want := range []string{"tcp.tls.cert_file", certFile, "does not exist"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("the message does not say %q:\n%s", want, out.String())
		}
	}
}

// TestTLSSettingsPrecedence: the IGGY_TCP_TLS_* environment over the defaults, flags
// over the environment; --help names them all.
func TestTLSSettingsPrecedence(t *testing.T) {
	env := map[string]string{"IGGY_TCP_TLS_ENABLED": "true", "IGGY_TCP_TLS_SELF_SIGNED": "false",
		"IGGY_TCP_TLS_CERT_FILE": "env_cert.pem", "IGGY_TCP_TLS_KEY_FILE": "env_key.pem"}
	getenv := func(k string) string { return env[k] }
	o, err := parseFlags(nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := o.config(getenv)
	if err != nil {
		t.Fatal(err)
	}
	if want := (config.TLS{Enabled: true, CertFile: "env_cert.pem", KeyFile: "env_key.pem"}); cfg.TLS != want {
		t.Fatalf("from the environment: %+v, want %+v", cfg.TLS, want)
	}
	o, err = parseFlags([]string{"--tls=false", "--tls-self-signed", "--tls-cert-file", "flag_cert.pem", "--tls-key-file", "flag_key.pem"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err = o.config(getenv); err != nil {
		t.Fatal(err)
	}
	if want := (config.TLS{SelfSigned: true, CertFile: "flag_cert.pem", KeyFile: "flag_key.pem"}); cfg.TLS != want {
		t.Fatalf("flags over the environment: %+v, want %+v", cfg.TLS, want)
	}
	var help bytes.Buffer
	run([]string{"--help"}, &help)
	for _, name := range []string{"--tls", "tls-self-signed", "tls-cert-file", "tls-key-file", "IGGY_TCP_TLS_ENABLED",
		"IGGY_TCP_TLS_SELF_SIGNED", "IGGY_TCP_TLS_CERT_FILE", "IGGY_TCP_TLS_KEY_FILE"} {
		if !strings.Contains(help.String(), name) {
			t.Errorf("--help does not mention %s", name)
		}
	}
}
