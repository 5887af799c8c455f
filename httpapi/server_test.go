package httpapi

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/tlsterm"
)

func listen(t *testing.T, cfg config.HTTP) *Server {
	t.Helper()
	a, _, _ := testAPI(t)
	var cert *tls.Certificate
	if cfg.TLS.Enabled {
		c, err := tlsterm.SelfSigned(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		cert = &c
	}
	s, err := Listen("127.0.0.1:0", cfg, cert, a, a.log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return s
}

func TestServerServesPlainHTTP(t *testing.T) {
	s := listen(t, testConfig())
	resp, err := http.Get("http://" + s.Addr().String() + "/ping")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != "pong" || resp.Proto != "HTTP/1.1" {
		t.Fatalf("GET /ping: %s %d %q", resp.Proto, resp.StatusCode, body)
	}
}

// rawGet sends one keep-alive request on c and reads the status line.
func rawGet(c net.Conn, r *bufio.Reader, deadline time.Duration) (string, error) {
	if _, err := io.WriteString(c, "GET /ping HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(deadline))
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return "", err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.Status, nil
}

func TestServerCapsConnections(t *testing.T) {
	cfg := testConfig()
	cfg.ConnectionsMax = 1
	checkConnectionCap(t, listen(t, cfg), 1)
}

// The cap at its production default (1,024): the 1,025th connection waits in the
// backlog until one of the others closes, then is served.
func TestServerCapsConnectionsAtTheDefault(t *testing.T) {
	cfg := testConfig()
	if cfg.ConnectionsMax != 1024 {
		t.Fatalf("testConfig's cap is %d, want the default 1024", cfg.ConnectionsMax)
	}
	checkConnectionCap(t, listen(t, cfg), cfg.ConnectionsMax)
}

// checkConnectionCap opens capConns keep-alive connections to s, each served once
// (so each holds its slot), then one more: that one is not served until the first
// closes.
func checkConnectionCap(t *testing.T, s *Server, capConns int) {
	t.Helper()
	open := make([]net.Conn, 0, capConns)
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	for i := range capConns {
		c, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatalf("connection %d: %v", i+1, err)
		}
		open = append(open, c)
		if status, err := rawGet(c, bufio.NewReader(c), 10*time.Second); err != nil || status != "200 OK" {
			t.Fatalf("connection %d of %d: %q %v", i+1, capConns, status, err)
		}
	}
	extra, err := net.Dial("tcp", s.Addr().String()) // lands in the backlog
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	r := bufio.NewReader(extra)
	// While the others stay open this one is not served: its answer cannot come
	// within the deadline (a bound on a negative check, not a synchronisation).
	if _, err := rawGet(extra, r, 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("connection %d served beside %d others at a cap of %d: %v", capConns+1, capConns, capConns, err)
	}
	open[0].Close()
	_ = extra.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(r, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("connection %d after one closed: %v", capConns+1, err)
	}
	resp.Body.Close()
}

func TestServerServesHTTPS(t *testing.T) {
	cfg := testConfig()
	cfg.TLS = config.TLS{Enabled: true, SelfSigned: true, CertFile: filepath.Join(t.TempDir(), "absent.pem"), KeyFile: "absent-key.pem"}
	s := listen(t, cfg)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}}
	resp, err := client.Get("https://" + s.Addr().String() + "/ping")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Proto != "HTTP/2.0" {
		t.Fatalf("GET /ping over HTTPS: %s %d", resp.Proto, resp.StatusCode)
	}
	// Plain HTTP to the HTTPS port is not served.
	if resp, err := http.Get("http://" + s.Addr().String() + "/ping"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Fatal("plain HTTP answered 200 on the HTTPS port")
		}
	}
}

func TestServerShutdownWaitsForRequests(t *testing.T) {
	a, _, _ := testAPI(t)
	started, release := make(chan struct{}), make(chan struct{})
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(started)
			<-release
		}
		a.ServeHTTP(w, r)
	})
	s, err := Listen("127.0.0.1:0", testConfig(), nil, slow, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan int, 1)
	go func() {
		resp, err := http.Get("http://" + s.Addr().String() + "/slow")
		if err != nil {
			got <- 0
			return
		}
		resp.Body.Close()
		got <- resp.StatusCode
	}()
	<-started
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- s.Shutdown(ctx)
	}()
	close(release)
	if code := <-got; code != 404 {
		t.Fatalf("the request under way at shutdown: %d, want its answer (404)", code)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := net.DialTimeout("tcp", s.Addr().String(), time.Second); err == nil {
		t.Fatal("still listening after shutdown")
	}
}

// A client that never finishes its headers, or sits idle between requests, is
// cut off: the connection is closed by the server (the read returns EOF) well
// within the bound allowed here.
func TestServerCutsSlowAndIdleConnections(t *testing.T) {
	saved := timeouts
	timeouts.readHeader, timeouts.idle = 100*time.Millisecond, 100*time.Millisecond
	t.Cleanup(func() { timeouts = saved })
	s := listen(t, testConfig())
	for _, tt := range []struct {
		name, send string
	}{
		{"headers never finished", "GET /ping HTTP/1.1\r\nHost: x\r\n"},
		{"idle after a request", "GET /ping HTTP/1.1\r\nHost: x\r\n\r\n"},
	} {
		c, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, tt.send); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		r := bufio.NewReader(c)
		if strings.HasSuffix(tt.send, "\r\n\r\n") {
			resp, err := http.ReadResponse(r, nil)
			if err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		_, err = r.ReadByte()
		if !errors.Is(err, io.EOF) && !strings.Contains(fmt.Sprint(err), "reset") {
			t.Fatalf("%s: the connection was not closed: %v", tt.name, err)
		}
		c.Close()
	}
}
