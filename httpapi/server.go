package httpapi

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/iggy-shard/iggy-shard/config"
)

// The listener's bounds (those of the reference's listener, apache/iggy
// core/server/src/http/http_server.rs): a client that does not finish its headers in
// ReadHeaderTimeout is cut off, an idle keep-alive connection is closed after
// IdleTimeout, and at most [http] max_connections connections are open at once (the
// next ones wait in the kernel's backlog).
const (
	ReadHeaderTimeout = 5 * time.Second
	IdleTimeout       = 60 * time.Second
)

// timeouts are the listener's; tests shorten them.
var timeouts = struct{ readHeader, idle time.Duration }{ReadHeaderTimeout, IdleTimeout}

// Server is the HTTP API's listener: net/http on its own goroutines, beside the
// shards, never on them.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
	err  error
}

// Listen binds address (host:port; port 0 picks one) and serves h there: HTTPS
// with cert when it is given (the server loads [http.tls] as it loads
// [tcp.tls]), else plain HTTP/1.1.
func Listen(address string, cfg config.HTTP, cert *tls.Certificate, h http.Handler, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.Default()
	}
	if cfg.ConnectionsMax < 1 {
		return nil, &config.SettingError{Setting: "http.max_connections", Value: "0", Reason: "must be at least 1"}
	}
	ln, err := net.Listen("tcp", address)
	if err != nil {
		return nil, err
	}
	s := &Server{
		ln:   &cappedListener{Listener: ln, slots: make(chan struct{}, cfg.ConnectionsMax)},
		done: make(chan struct{}),
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: timeouts.readHeader,
			IdleTimeout:       timeouts.idle,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		},
	}
	go func() {
		defer close(s.done)
		var err error
		if cert != nil {
			s.srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12}
			err = s.srv.ServeTLS(s.ln, "", "")
		} else {
			err = s.srv.Serve(s.ln)
		}
		if !errors.Is(err, http.ErrServerClosed) {
			s.err = err
		}
	}()
	return s, nil
}

// Addr is the bound address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Shutdown stops accepting, lets the requests under way finish until ctx ends,
// then closes what is left. It returns once the serving goroutine has.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		_ = s.srv.Close()
	}
	<-s.done
	if err == nil {
		err = s.err
	}
	return err
}

// cappedListener holds one slot per open connection: Accept waits for a free slot
// before it takes the next connection from the backlog.
type cappedListener struct {
	net.Listener
	slots chan struct{}
}

func (l *cappedListener) Accept() (net.Conn, error) {
	l.slots <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &slotConn{Conn: c, release: func() { <-l.slots }}, nil
}

// slotConn gives its slot back when it is first closed.
type slotConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
