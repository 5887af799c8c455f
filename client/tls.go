package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/iggy-shard/iggy-shard/wire"
)

// TLSOptions say how the client checks the server, as the Go SDK's TLS options do
// (WithTLSCAFile, WithTLSDomain, WithTLSValidateCertificate). NewTLSConfig turns
// them into the tls.Config for WithTLS.
type TLSOptions struct {
	// CAFile is a PEM bundle of the certificate authorities to trust. With neither
	// CAFile nor RootCAs, the system's roots are trusted.
	CAFile string
	// RootCAs are trusted in addition to CAFile's.
	RootCAs *x509.CertPool
	// ServerName is the name sent (SNI) and verified; empty means the host part of
	// the address Dial is given.
	ServerName string
	// InsecureSkipVerify accepts any certificate: for tests and loopback development
	// against a self-signed server only. It protects from nobody.
	InsecureSkipVerify bool
}

// NewTLSConfig builds the client's tls.Config (crypto/tls's defaults, TLS 1.2 and
// 1.3, no ALPN, as the SDKs). A CA file that cannot be read fails with
// wire.ErrInvalidTlsCertificatePath, one that holds no certificate with
// wire.ErrInvalidTlsCertificate, as the Go SDK answers them; both name the file.
func NewTLSConfig(o TLSOptions) (*tls.Config, error) {
	cfg := &tls.Config{ServerName: o.ServerName, InsecureSkipVerify: o.InsecureSkipVerify}
	if o.CAFile == "" && o.RootCAs == nil {
		return cfg, nil
	}
	pool := o.RootCAs
	if pool == nil {
		pool = x509.NewCertPool()
	} else {
		pool = pool.Clone()
	}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("client: TLS CA file %s: %w (%w)", o.CAFile, err, wire.ErrInvalidTlsCertificatePath)
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("client: TLS CA file %s holds no PEM certificate (%w)", o.CAFile, wire.ErrInvalidTlsCertificate)
		}
	}
	cfg.RootCAs = pool
	return cfg, nil
}

// handshakeTLS runs the client's handshake on conn within ctx. A certificate the
// client does not trust fails with wire.ErrInvalidTlsCertificate and the
// verification error (errors.As finds a *tls.CertificateVerificationError); any
// other failure, a plaintext server for one, with wire.ErrCannotEstablishConnection.
func handshakeTLS(ctx context.Context, conn net.Conn, addr string, cfg *tls.Config) (net.Conn, error) {
	cfg = cfg.Clone()
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		code := wire.ErrCannotEstablishConnection
		var verr *tls.CertificateVerificationError
		if errors.As(err, &verr) {
			code = wire.ErrInvalidTlsCertificate
		}
		return nil, &ConnectionError{Op: "TLS handshake", Code: code, Err: err}
	}
	return tc, nil
}
