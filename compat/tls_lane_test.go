package compat

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/tlsterm/tlstest"
)

// The suite runs twice: over plain TCP, then every case again over TLS, as the Go
// SDK's CI runs its end-to-end suite again with IGGY_TCP_TLS_ENABLED=true
// (go-sdk-behaviour.md §12). In the TLS lane each server gets a certificate from a
// CA of its own, and every connection is a TLS client that verifies it for
// localhost. The frames are the same bytes; only the transport differs.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		fmt.Println("compat: the same cases over TLS")
		tlsLane = true
		code = m.Run()
	}
	os.Exit(code)
}

// tlsLane is set while the suite runs over TLS.
var tlsLane bool

// laneTrust maps a TLS-lane server's address to the pool that trusts its CA.
var laneTrust sync.Map // string -> *x509.CertPool

// laneConfigure gives cfg a certificate from a fresh CA in the TLS lane.
func laneConfigure(t testing.TB, cfg *config.Config) *x509.CertPool {
	if !tlsLane {
		return nil
	}
	ca := tlstest.NewCA(t, "compat CA")
	certFile, keyFile := ca.IssueValid(t).WriteFiles(t, t.TempDir())
	cfg.TLS = config.TLS{Enabled: true, CertFile: certFile, KeyFile: keyFile}
	return ca.Pool
}

// laneRegister records which CA the server at addr uses.
func laneRegister(addr string, pool *x509.CertPool) {
	if pool != nil {
		laneTrust.Store(addr, pool)
	}
}

// laneWrap returns conn as the lane speaks it: itself, or a TLS client session
// that verified the server's certificate.
func laneWrap(t testing.TB, addr string, conn net.Conn) net.Conn {
	t.Helper()
	if !tlsLane {
		return conn
	}
	pool, ok := laneTrust.Load(addr)
	if !ok {
		conn.Close()
		t.Fatalf("TLS lane: no CA recorded for %s", addr)
	}
	tc := tls.Client(conn, &tls.Config{RootCAs: pool.(*x509.CertPool), ServerName: "localhost"})
	tc.SetDeadline(time.Now().Add(readDeadline))
	if err := tc.Handshake(); err != nil {
		conn.Close()
		t.Fatalf("TLS lane: handshake with %s: %v", addr, err)
	}
	tc.SetDeadline(time.Time{})
	return tc
}
