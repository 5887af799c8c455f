package tlsterm

import (
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/tlsterm/tlstest"
)

// TestLoadKeyPair: a good pair loads; each bad file is named with what is wrong.
func TestLoadKeyPair(t *testing.T) {
	ca := tlstest.NewCA(t, "CA")
	dir := t.TempDir()
	certFile, keyFile := ca.IssueValid(t).WriteFiles(t, dir)
	if _, err := LoadKeyPair(certFile, keyFile, time.Now()); err != nil {
		t.Fatalf("good pair: %v", err)
	}

	otherDir := t.TempDir()
	_, otherKey := ca.IssueValid(t).WriteFiles(t, otherDir)
	expiredCert, expiredKey := ca.Issue(t, time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour)).WriteFiles(t, t.TempDir())
	futureCert, futureKey := ca.Issue(t, time.Now().Add(24*time.Hour), time.Now().Add(48*time.Hour)).WriteFiles(t, t.TempDir())
	notPEM := filepath.Join(dir, "not.pem")
	os.WriteFile(notPEM, []byte("hello"), 0o600)
	keyAsCert := keyFile
	unreadable := filepath.Join(dir, "unreadable.pem")
	os.WriteFile(unreadable, []byte("x"), 0)

	cases := []struct {
		name, cert, key, wantPath, wantReason string
	}{
		{"missing cert", filepath.Join(dir, "nope.pem"), keyFile, "nope.pem", "does not exist"},
		{"missing key", certFile, filepath.Join(dir, "nokey.pem"), "nokey.pem", "does not exist"},
		{"cert not PEM", notPEM, keyFile, notPEM, "no PEM CERTIFICATE block"},
		{"key not PEM", certFile, notPEM, notPEM, "no PEM PRIVATE KEY block"},
		{"key given as cert", keyAsCert, keyFile, keyAsCert, "no PEM CERTIFICATE block"},
		{"key of another cert", certFile, otherKey, otherKey, "does not match the certificate in " + certFile},
		{"expired", expiredCert, expiredKey, expiredCert, "expired on "},
		{"not yet valid", futureCert, futureKey, futureCert, "not valid before "},
		{"a directory", dir, keyFile, dir, "cannot be read"}, // unreadable even to root
	}
	if os.Getuid() != 0 { // root reads anything
		cases = append(cases, struct{ name, cert, key, wantPath, wantReason string }{"unreadable", unreadable, keyFile, unreadable, "cannot be read"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := LoadKeyPair(c.cert, c.key, time.Now())
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v, want a FileError", err)
			}
			if !strings.HasSuffix(fe.Path, c.wantPath) || !strings.Contains(fe.Reason, c.wantReason) {
				t.Fatalf("error %q, want %s named with %q", err, c.wantPath, c.wantReason)
			}
		})
	}
}

// TestSelfSigned: the ephemeral certificate verifies, against itself, for each
// loopback name, and for nothing else.
func TestSelfSigned(t *testing.T) {
	now := time.Now()
	cert, err := SelfSigned(now)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert.Leaf)
	for _, name := range []string{"localhost", "127.0.0.1", "::1"} {
		if _, err := cert.Leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: pool, CurrentTime: now}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{DNSName: "example.com", Roots: pool, CurrentTime: now}); err == nil {
		t.Error("verifies for example.com")
	}
}
