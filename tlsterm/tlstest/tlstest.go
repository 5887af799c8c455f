// Package tlstest makes certificate authorities and certificates for tests, and
// writes them as PEM files, so that tests of TLS need no files from elsewhere.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority for one test.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// Pool trusts exactly this CA.
	Pool *x509.CertPool
}

// NewCA makes a CA valid from an hour ago for a day.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	template := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{Cert: cert, Key: key, Pool: pool}
}

// Leaf is a server certificate and its key.
type Leaf struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	TLS  tls.Certificate
}

// Issue signs a server certificate for localhost, 127.0.0.1 and ::1, valid from
// notBefore to notAfter.
func (ca *CA) Issue(t testing.TB, notBefore, notAfter time.Time) *Leaf {
	t.Helper()
	key := newKey(t)
	template := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: "localhost"},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &Leaf{Cert: cert, Key: key, TLS: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}}
}

// IssueValid is Issue for a certificate valid from an hour ago for a day.
func (ca *CA) IssueValid(t testing.TB) *Leaf {
	return ca.Issue(t, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
}

// WriteFiles writes the leaf's certificate and key as PEM files in dir and returns
// their paths.
func (l *Leaf) WriteFiles(t testing.TB, dir string) (certFile, keyFile string) {
	t.Helper()
	keyDER, err := x509.MarshalPKCS8PrivateKey(l.Key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	WritePEM(t, certFile, "CERTIFICATE", l.Cert.Raw)
	WritePEM(t, keyFile, "PRIVATE KEY", keyDER)
	return certFile, keyFile
}

// WriteCAFile writes the CA's certificate as a PEM file in dir and returns its path.
func (ca *CA) WriteCAFile(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "ca.pem")
	WritePEM(t, path, "CERTIFICATE", ca.Cert.Raw)
	return path
}

// WritePEM writes one PEM block to path.
func WritePEM(t testing.TB, path, blockType string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatal(err)
	}
	return n
}
