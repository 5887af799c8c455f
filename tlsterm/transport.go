package tlsterm

import (
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Transport is the net.Conn under a session handed over whole (Config.
// DeliverSession): the TCP connection while the handshake runs on the terminator's
// goroutine, then, from Attach on, the record buffers of the runtime that took the
// session, which reads the client's ciphertext from its own ring and sends the
// sealed records itself. The crypto/tls.Conn never learns that its transport moved:
// its buffered state (a record partly read, the bytes the client sent right after
// its Finished) goes with it.
type Transport struct {
	net.Conn // the TCP connection; only its addresses once attached

	// records and ended are set once, by Attach and before the runtime's first use of
	// the session; the runtime's thread alone uses the session from then on.
	records io.ReadWriter
	ended   func() // the terminator's count of sessions open
	endOnce sync.Once
}

// Attach moves the session's transport to records: from now on crypto/tls reads the
// client's ciphertext from records (which answers "none yet" with a temporary
// net.Error, so the session waits without failing) and writes its sealed records to
// records. Called once, by the runtime that took the session, on its own thread.
func (t *Transport) Attach(records io.ReadWriter) { t.records = records }

// Read is crypto/tls's read of ciphertext.
func (t *Transport) Read(p []byte) (int, error) {
	if t.records != nil {
		return t.records.Read(p)
	}
	return t.Conn.Read(p)
}

// Write is crypto/tls's write of sealed records.
func (t *Transport) Write(p []byte) (int, error) {
	if t.records != nil {
		return t.records.Write(p)
	}
	return t.Conn.Write(p)
}

// Close, once the session is attached, tells the terminator that the runtime has
// ended the session (the runtime closes the socket itself); before, it closes the
// TCP connection.
func (t *Transport) Close() error {
	if t.records == nil {
		return t.Conn.Close()
	}
	t.endOnce.Do(func() {
		if t.ended != nil {
			t.ended()
		}
	})
	return nil
}

// The deadlines are the handshake's; once attached, the runtime keeps its own
// (crypto/tls sets one around a close_notify).
func (t *Transport) SetDeadline(d time.Time) error {
	if t.records != nil {
		return nil
	}
	return t.Conn.SetDeadline(d)
}

func (t *Transport) SetReadDeadline(d time.Time) error {
	if t.records != nil {
		return nil
	}
	return t.Conn.SetReadDeadline(d)
}

func (t *Transport) SetWriteDeadline(d time.Time) error {
	if t.records != nil {
		return nil
	}
	return t.Conn.SetWriteDeadline(d)
}

// detachSocket takes the TCP socket out of the Go netpoller for the runtime: a
// blocking, close-on-exec duplicate that the caller gives away or closes; the
// netpoller's descriptor is closed. No byte is lost: both descriptors name one
// socket, so what the client sent and crypto/tls has not read yet waits in the
// kernel for the runtime's first recv.
func detachSocket(conn net.Conn) (int, error) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return -1, fmt.Errorf("tlsterm: a %T has no socket to hand over", conn)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var dupErr error
	if err := raw.Control(func(s uintptr) {
		fd, dupErr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return -1, err
	}
	if dupErr != nil {
		return -1, fmt.Errorf("tlsterm: dup of the session's socket: %w", dupErr)
	}
	// O_NONBLOCK belongs to the socket's file description, which both descriptors
	// share: the runtime's io_uring wants it blocking (it polls a socket that is not
	// ready instead of failing with EAGAIN).
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("tlsterm: the session's socket: %w", err)
	}
	conn.Close() // the netpoller's descriptor; the socket lives on in fd
	return fd, nil
}
