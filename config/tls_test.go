package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestTLSConfigSources: [tcp.tls] in the file and IGGY_TCP_TLS_* in the environment
// (which wins), with Apache Iggy's defaults when neither says anything.
func TestTLSConfigSources(t *testing.T) {
	defaults := Default().TLS
	if defaults != (TLS{SelfSigned: true, CertFile: "core/certs/iggy_cert.pem", KeyFile: "core/certs/iggy_key.pem"}) {
		t.Fatalf("defaults %+v", defaults)
	}
	path := filepath.Join(t.TempDir(), "iggy.toml")
	os.WriteFile(path, []byte(`
[tcp.tls]
enabled = true
self_signed = false
cert_file = "/etc/iggy/cert.pem"
key_file = "/etc/iggy/key.pem"
`), 0o644)
	cfg, err := Load(path, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if want := (TLS{Enabled: true, SelfSigned: false, CertFile: "/etc/iggy/cert.pem", KeyFile: "/etc/iggy/key.pem"}); cfg.TLS != want {
		t.Fatalf("from the file: %+v, want %+v", cfg.TLS, want)
	}
	env := map[string]string{"IGGY_TCP_TLS_ENABLED": "false", "IGGY_TCP_TLS_SELF_SIGNED": "true",
		"IGGY_TCP_TLS_CERT_FILE": "c.pem", "IGGY_TCP_TLS_KEY_FILE": "k.pem"}
	cfg, err = Load(path, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if want := (TLS{Enabled: false, SelfSigned: true, CertFile: "c.pem", KeyFile: "k.pem"}); cfg.TLS != want {
		t.Fatalf("env over the file: %+v, want %+v", cfg.TLS, want)
	}

	_, err = Load("", func(k string) string {
		if k == "IGGY_TCP_TLS_ENABLED" {
			return "yes please"
		}
		return ""
	})
	var se *SettingError
	if !errors.As(err, &se) || se.Setting != "IGGY_TCP_TLS_ENABLED" {
		t.Fatalf("a bad boolean: %v", err)
	}
	cfg = Default()
	cfg.TLS = TLS{Enabled: true, CertFile: ""}
	if err := cfg.Validate(); !errors.As(err, &se) || se.Setting != "tcp.tls.cert_file" {
		t.Fatalf("TLS on without a cert_file: %v", err)
	}
}
