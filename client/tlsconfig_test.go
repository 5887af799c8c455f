package client

import (
	"crypto/tls"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// TestNewTLSConfig: a CA file is trusted, a server name is kept, and a CA file that
// is missing or holds no certificate fails with the Go SDK's codes, naming the file.
func TestNewTLSConfig(t *testing.T) {
	cert, _ := selfSigned(t)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600)
	cfg, err := NewTLSConfig(TLSOptions{CAFile: caFile, ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	ln := tls.NewListener(listenLoopback(t), &tls.Config{Certificates: []tls.Certificate{cert}})
	s := newFakeServerOn(t, ln, session(nil))
	c := loggedIn(t, s, WithTLS(cfg))
	if err := c.Ping(testContext(t)); err != nil {
		t.Fatal(err)
	}

	missing := filepath.Join(dir, "missing.pem")
	if _, err := NewTLSConfig(TLSOptions{CAFile: missing}); !errors.Is(err, wire.ErrInvalidTlsCertificatePath) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("missing CA file: %v", err)
	}
	garbage := filepath.Join(dir, "garbage.pem")
	os.WriteFile(garbage, []byte("not a certificate"), 0o600)
	if _, err := NewTLSConfig(TLSOptions{CAFile: garbage}); !errors.Is(err, wire.ErrInvalidTlsCertificate) || !strings.Contains(err.Error(), garbage) {
		t.Fatalf("garbage CA file: %v", err)
	}
}

// TestTLSUntrustedCertificate: a server whose certificate the client does not trust
// fails the dial with InvalidTlsCertificate and the verification error; skipping
// verification (tests only) accepts it.
func TestTLSUntrustedCertificate(t *testing.T) {
	cert, _ := selfSigned(t)
	_, otherPool := selfSigned(t)
	ln := tls.NewListener(listenLoopback(t), &tls.Config{Certificates: []tls.Certificate{cert}})
	s := newFakeServerOn(t, ln, session(nil))
	_, err := Dial(testContext(t), s.addr(), WithTLS(&tls.Config{RootCAs: otherPool}))
	var verr *tls.CertificateVerificationError
	if !errors.Is(err, wire.ErrInvalidTlsCertificate) || !errors.As(err, &verr) {
		t.Fatalf("dial with another CA: %v, want InvalidTlsCertificate with the verification error", err)
	}
	insecure, err := NewTLSConfig(TLSOptions{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	c := loggedIn(t, s, WithTLS(insecure))
	if err := c.Ping(testContext(t)); err != nil {
		t.Fatal(err)
	}
}
