package tlsterm

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"
)

// FileError names a certificate or key file that cannot be used and why.
type FileError struct {
	Path   string
	Role   string // "certificate" or "key"
	Reason string
	Err    error // the underlying error, when there is one
}

func (e *FileError) Error() string {
	return fmt.Sprintf("TLS %s file %s: %s", e.Role, e.Path, e.Reason)
}

func (e *FileError) Unwrap() error { return e.Err }

// LoadKeyPair loads a PEM certificate chain (leaf first) and its private key, and
// checks that the key matches the leaf and that the leaf is valid at now. Each
// failure names the file and what is wrong with it: missing, unreadable, not PEM, a
// key that does not match, a certificate expired or not valid yet.
func LoadKeyPair(certFile, keyFile string, now time.Time) (tls.Certificate, error) {
	certPEM, err := readPEMFile(certFile, "certificate")
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := readPEMFile(keyFile, "key")
	if err != nil {
		return tls.Certificate{}, err
	}
	if !hasPEMBlock(certPEM, func(t string) bool { return t == "CERTIFICATE" }) {
		return tls.Certificate{}, &FileError{Path: certFile, Role: "certificate", Reason: "holds no PEM CERTIFICATE block"}
	}
	if !hasPEMBlock(keyPEM, func(t string) bool { return strings.HasSuffix(t, "PRIVATE KEY") }) {
		return tls.Certificate{}, &FileError{Path: keyFile, Role: "key", Reason: "holds no PEM PRIVATE KEY block"}
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		if strings.Contains(err.Error(), "does not match") {
			return tls.Certificate{}, &FileError{Path: keyFile, Role: "key", Reason: "does not match the certificate in " + certFile, Err: err}
		}
		return tls.Certificate{}, &FileError{Path: certFile, Role: "certificate", Reason: err.Error(), Err: err}
	}
	leaf := pair.Leaf // parsed by X509KeyPair since Go 1.23
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return tls.Certificate{}, &FileError{Path: certFile, Role: "certificate", Reason: err.Error(), Err: err}
		}
		pair.Leaf = leaf
	}
	if now.After(leaf.NotAfter) {
		return tls.Certificate{}, &FileError{Path: certFile, Role: "certificate",
			Reason: "expired on " + leaf.NotAfter.UTC().Format(time.RFC3339)}
	}
	if now.Before(leaf.NotBefore) {
		return tls.Certificate{}, &FileError{Path: certFile, Role: "certificate",
			Reason: "not valid before " + leaf.NotBefore.UTC().Format(time.RFC3339)}
	}
	return pair, nil
}

func readPEMFile(path, role string) ([]byte, error) {
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, &FileError{Path: path, Role: role, Reason: "does not exist", Err: err}
	case err != nil:
		return nil, &FileError{Path: path, Role: role, Reason: "cannot be read: " + err.Error(), Err: err}
	}
	return b, nil
}

func hasPEMBlock(data []byte, wanted func(blockType string) bool) bool {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return false
		}
		if wanted(block.Type) {
			return true
		}
	}
}

// selfSignedValidity is how long an ephemeral certificate is valid: it is made anew
// at every start, so it only has to outlive one run of the server.
const selfSignedValidity = 365 * 24 * time.Hour

// SelfSigned makes an ephemeral certificate for localhost, 127.0.0.1 and ::1 (ECDSA
// P-256), valid from an hour before now: for loopback development, as Apache Iggy's
// self_signed mode; a client must skip verification or trust this very certificate.
func SelfSigned(now time.Time) (tls.Certificate, error) {
	return selfSigned(now, "localhost", []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback})
}

// SelfSignedFor makes an ephemeral certificate (ECDSA P-256, valid from an hour
// before now) naming exactly the addresses given, as IP SANs: a node's own roster ip
// in [cluster.tls]'s self_signed mode, whose dialers accept any certificate anyway;
// the name only tells an operator's tools whose certificate it is.
func SelfSignedFor(now time.Time, addrs ...netip.Addr) (tls.Certificate, error) {
	if len(addrs) == 0 {
		return tls.Certificate{}, errors.New("tlsterm: a self-signed certificate needs an address")
	}
	ips := make([]net.IP, len(addrs))
	for i, a := range addrs {
		ips[i] = net.IP(a.Unmap().AsSlice())
	}
	return selfSigned(now, addrs[0].String(), nil, ips)
}

func selfSigned(now time.Time, commonName string, dnsNames []string, ips []net.IP) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tlsterm: self-signed key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tlsterm: self-signed serial: %w", err)
	}
	template := x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"iggy-shard (self-signed)"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(selfSignedValidity),
		DNSNames:              dnsNames,
		IPAddresses:           ips,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, &template, &template, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tlsterm: self-signed certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tlsterm: self-signed certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}
