// Package replicanet is a node's network on the replica plane: the runtime's
// replica configuration from the cluster's roster (config.go), and [cluster.tls]
// around it, a TLS terminator off the shards for tcp_replica and TLS dials to the
// peers (tls.go).
package replicanet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"
	"time"

	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/tlsterm"
	"github.com/iggy-shard/iggy-shard/wire"
)

// TLS is [cluster.tls] on one node (iggy.apache.org/docs/clustering/security):
// the node's tcp_replica port served by a TLS terminator off the shards, and its dials
// to the peers made over TLS, each session handed to the runtime with its exporter
// value, which the replica handshake folds into its MACs (tlsterm/replica.go).
//
// Its life, as Server.Start and Shutdown drive it:
//
//	rtls, err := NewTLS(&cfg.Cluster, self, log)        // before shard.Start: binds ip:tcp_replica
//	rtls.Configure(replicaCfg)                          // the runtime binds no replica port and dials through rtls
//	rt, err := shard.Start(... Replica: replicaCfg ...) // on failure: rtls.Close()
//	err = rtls.Attach(rt)                               // accepts from here on
//	...
//	rtls.Close()            // at Shutdown, before rt.Shutdown: no new sessions
//	rt.Shutdown(ctx); <-rt.Done()
//	err = rtls.Wait(ctx)    // the sessions end as the runtime closed them
//
// A nil *TLS (cluster.tls off) does nothing in each of these.
type TLS struct {
	layer *tlsterm.Replica
}

// NewTLS builds the node's replica TLS from the validated cluster section and
// the node's own roster entry; nil when cluster.tls is off. CA mode loads cert_file,
// key_file and ca_file; self-signed mode makes a certificate for the node's ip at
// every start and never reads the files (the reference's rule: the flag is
// authoritative for the cluster). A file that cannot be used stops the start with a
// config.SettingError naming the key.
func NewTLS(cfg *config.Cluster, self *config.ClusterNode, log *slog.Logger) (*TLS, error) {
	if !cfg.Enabled || !cfg.TLS.Enabled {
		return nil, nil
	}
	if log == nil {
		log = slog.Default()
	}
	ip, err := netip.ParseAddr(self.IP)
	if err != nil {
		return nil, &config.SettingError{Setting: fmt.Sprintf("cluster.nodes[replica_id=%d].ip", self.ReplicaID), Value: self.IP, Reason: "must be a literal IP address"}
	}
	rc := tlsterm.ReplicaConfig{
		PeerNames:     make([]string, len(cfg.Nodes)),
		ExporterLabel: wire.HandshakeLabelTLSExporter,
		DialTimeout:   cfg.MessageBus.ReconnectPeriod,
		Logger:        log,
	}
	for i := range cfg.Nodes {
		if id := cfg.Nodes[i].ReplicaID; id >= 0 && id < len(rc.PeerNames) {
			rc.PeerNames[id] = cfg.Nodes[i].IP
		}
	}
	now := time.Now()
	if cfg.TLS.SelfSigned {
		warnIgnoredReplicaTLSFiles(&cfg.TLS, log)
		if rc.Certificate, err = tlsterm.SelfSignedFor(now, ip); err != nil {
			return nil, err
		}
		rc.AcceptAnyPeerCertificate = true
		log.Warn("replica TLS: self-signed mode, a certificate generated for this start; peers' certificates are not verified, "+
			"so the PSK handshake alone authenticates them (use CA mode on an untrusted network)", "ip", self.IP)
	} else {
		if rc.Certificate, err = loadReplicaKeyPair(&cfg.TLS, now); err != nil {
			return nil, err
		}
		if rc.RootCAs, err = loadReplicaCAFile(cfg.TLS.CAFile); err != nil {
			return nil, err
		}
		leaf := rc.Certificate.Leaf
		intermediates := x509.NewCertPool()
		for _, der := range rc.Certificate.Certificate[1:] {
			if c, err := x509.ParseCertificate(der); err == nil {
				intermediates.AddCert(c)
			}
		}
		// The peers verify this certificate against their ca_file and this node's
		// roster ip: say now, rather than at every peer's dial, that they will refuse it.
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: rc.RootCAs, Intermediates: intermediates, DNSName: self.IP,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, CurrentTime: now}); err != nil {
			log.Warn("replica TLS: peers trusting this ca_file will refuse this node's certificate", "cert_file", cfg.TLS.CertFile,
				"ca_file", cfg.TLS.CAFile, "ip", self.IP, "err", err)
		}
		log.Info("replica TLS: CA mode", "cert_file", cfg.TLS.CertFile, "ca_file", cfg.TLS.CAFile,
			"subject", leaf.Subject.String(), "not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	layer, err := tlsterm.ListenReplica(net.JoinHostPort(self.IP, strconv.Itoa(int(self.Ports.TCPReplica))), rc)
	if err != nil {
		return nil, err
	}
	return &TLS{layer: layer}, nil
}

// configure makes the runtime's replica plane run through this TLS: shard 0 binds
// no tcp_replica listener (the terminator owns the port) and dials through it.
func (r *TLS) Configure(rc *shard.ReplicaConfig) {
	if r == nil {
		return
	}
	rc.ListenerOff = true
	rc.Dial = r.layer.Dial
}

// attach starts accepting for rt, and lets the dials rt has begun deliver.
func (r *TLS) Attach(rt *shard.Runtime) error {
	if r == nil {
		return nil
	}
	return r.layer.Start(rt)
}

// addr is the address the replica port is bound to; nil when TLS is off.
func (r *TLS) Addr() *net.TCPAddr {
	if r == nil {
		return nil
	}
	return r.layer.Addr()
}

// stats are the terminator's and the dials' counters.
func (r *TLS) Stats() tlsterm.ReplicaStats {
	if r == nil {
		return tlsterm.ReplicaStats{}
	}
	return r.layer.Stats()
}

// close stops accepting and dialing.
func (r *TLS) Close() {
	if r != nil {
		r.layer.Close()
	}
}

// wait closes, then waits for the sessions to end (the runtime has closed its ends),
// cutting those left when ctx ends.
func (r *TLS) Wait(ctx context.Context) error {
	if r == nil {
		return nil
	}
	return r.layer.Wait(ctx)
}

func loadReplicaKeyPair(c *config.ClusterTLS, now time.Time) (tls.Certificate, error) {
	cert, err := tlsterm.LoadKeyPair(c.CertFile, c.KeyFile, now)
	var fe *tlsterm.FileError
	if errors.As(err, &fe) {
		setting := "cluster.tls.cert_file"
		if fe.Role == "key" {
			setting = "cluster.tls.key_file"
		}
		return tls.Certificate{}, &config.SettingError{Setting: setting, Value: fe.Path, Reason: fe.Reason}
	}
	return cert, err
}

// loadReplicaCAFile reads the trust anchors of the peers' certificates: every PEM
// CERTIFICATE block of the file.
func loadReplicaCAFile(path string) (*x509.CertPool, error) {
	fail := func(reason string) error {
		return &config.SettingError{Setting: "cluster.tls.ca_file", Value: path, Reason: reason}
	}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fail("does not exist")
	case err != nil:
		return nil, fail("cannot be read: " + err.Error())
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fail("holds no PEM CERTIFICATE block that parses")
	}
	return pool, nil
}

// warnIgnoredReplicaTLSFiles says when self-signed mode leaves certificate files on
// disk unread: an operator who laid them down would think them in use.
func warnIgnoredReplicaTLSFiles(c *config.ClusterTLS, log *slog.Logger) {
	for _, f := range []struct{ key, path string }{{"cert_file", c.CertFile}, {"key_file", c.KeyFile}, {"ca_file", c.CAFile}} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err == nil {
			log.Warn("replica TLS: self_signed is set, so cluster.tls."+f.key+" is ignored; set self_signed = false to use it", "path", f.path)
		}
	}
}
