package server

import (
	"crypto/tls"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/tlsterm"
)

// loadTLSCertificate applies the rule of [tcp.tls] or [http.tls] (config.TLS;
// section names it in errors): with self_signed, the
// PEM pair when cert_file exists and otherwise an ephemeral loopback certificate;
// without it, the pair, which must exist. A file that cannot be used stops the start
// with a config.SettingError naming the key, the path and what is wrong.
func loadTLSCertificate(c config.TLS, section string, log *slog.Logger, now time.Time) (tls.Certificate, error) {
	if c.SelfSigned {
		if _, err := os.Stat(c.CertFile); errors.Is(err, fs.ErrNotExist) {
			cert, err := tlsterm.SelfSigned(now)
			if err != nil {
				return tls.Certificate{}, err
			}
			log.Info("TLS: generated an ephemeral self-signed certificate for localhost, 127.0.0.1 and ::1", "section", section,
				"cert_file", c.CertFile, "why", "self_signed is set and cert_file does not exist")
			return cert, nil
		}
	}
	cert, err := tlsterm.LoadKeyPair(c.CertFile, c.KeyFile, now)
	var fe *tlsterm.FileError
	if errors.As(err, &fe) {
		setting := section + ".cert_file"
		if fe.Role == "key" {
			setting = section + ".key_file"
		}
		return tls.Certificate{}, &config.SettingError{Setting: setting, Value: fe.Path, Reason: fe.Reason}
	}
	if err != nil {
		return tls.Certificate{}, err
	}
	log.Info("TLS: loaded the certificate", "section", section, "cert_file", c.CertFile, "key_file", c.KeyFile,
		"subject", cert.Leaf.Subject.String(), "not_after", cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
	return cert, nil
}

// listenTLS binds the TCP address for TLS: the Go netpoller accepts and runs the
// handshakes (package tlsterm), and each established session is handed to the
// shards whole through Runtime.AdoptTLS (its records are then read and sealed on
// its shard), so the runtime binds no listener of its own.
func listenTLS(c *setup, log *slog.Logger) (net.Listener, tls.Certificate, error) {
	cert, err := loadTLSCertificate(c.TLS, "tcp.tls", log, time.Now())
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	ln, err := net.Listen("tcp", c.TCPAddress)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	return ln, cert, nil
}

// serveTLS starts terminating TLS on ln for rt.
func serveTLS(ln net.Listener, cert tls.Certificate, rt *shard.Runtime, log *slog.Logger) (*tlsterm.Terminator, error) {
	return tlsterm.Serve(ln, tlsterm.Config{
		TLS: &tls.Config{Certificates: []tls.Certificate{cert}},
		DeliverSession: func(fd int, peer netip.AddrPort, session *tls.Conn, transport *tlsterm.Transport) error {
			return rt.AdoptTLS(fd, peer, session, transport)
		},
		Logger: log,
	})
}

// TLSStats returns the TLS terminator's counters (accepts, handshakes done, failed
// and timed out, sessions open); zero when TLS is off.
func (s *Server) TLSStats() tlsterm.Stats {
	if s.tls == nil {
		return tlsterm.Stats{}
	}
	return s.tls.Stats()
}
