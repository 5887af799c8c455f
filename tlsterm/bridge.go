package tlsterm

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// bridgeBufferBytes is each direction's copy buffer: four TLS records' worth of
// plaintext (16 KiB each), so that a 1 MB batch crosses the socketpair in 16 writes
// rather than 64. A session holds its inbound one; outbound ones are lent while
// replies move (replyBuffers).
const bridgeBufferBytes = 64 << 10

// WriteTimeoutDefault bounds one write to the client: a client that stopped reading
// ends its session after this long, as the runtime's SendTimeout ends a plaintext
// one. Without it the outbound goroutine would wait forever on a peer that keeps its
// TCP window shut, and never see the shard close its end.
const WriteTimeoutDefault = 30 * time.Second

// Bridge moves one session's plaintext between conn (a TLS session, or any net.Conn)
// and a socketpair whose other end belongs to the runtime.
type Bridge struct {
	conn         net.Conn
	local        *net.UnixConn
	writeTimeout time.Duration
	closeOnce    sync.Once
}

// NewBridge makes the socketpair for conn and returns the bridge and the runtime's
// end: a blocking, close-on-exec stream socket that the caller gives away (e.g. to
// shard.Runtime.Adopt) or closes. Nothing moves until Run. writeTimeout bounds each
// write to conn; 0 means WriteTimeoutDefault.
func NewBridge(conn net.Conn, writeTimeout time.Duration) (*Bridge, int, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, -1, fmt.Errorf("tlsterm: socketpair: %w", err)
	}
	// net.FileConn duplicates the descriptor (and makes the duplicate non-blocking for
	// the netpoller); the runtime's end keeps its own, blocking, file description.
	f := os.NewFile(uintptr(fds[1]), "tlsterm bridge")
	fc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		unix.Close(fds[0])
		return nil, -1, fmt.Errorf("tlsterm: socketpair end: %w", err)
	}
	if writeTimeout <= 0 {
		writeTimeout = WriteTimeoutDefault
	}
	return &Bridge{conn: conn, local: fc.(*net.UnixConn), writeTimeout: writeTimeout}, fds[0], nil
}

// Run moves bytes both ways until both directions have ended, then returns with
// conn and the bridge's end of the socketpair closed. The inbound direction runs on
// the calling goroutine, the outbound one on a goroutine of its own.
func (b *Bridge) Run() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.outbound()
	}()
	b.inbound()
	<-done
}

// Close ends the session at once, from any goroutine: both connections close and
// Run returns.
func (b *Bridge) Close() {
	b.closeOnce.Do(func() {
		b.conn.Close()
		b.local.Close()
	})
}

// inbound copies the client's plaintext to the runtime. The client's orderly end
// (close_notify, or a FIN) reaches the runtime as EOF (shutdown SHUT_WR), so replies
// owed are still sent; any other end closes the socketpair.
func (b *Bridge) inbound() {
	buf := make([]byte, bridgeBufferBytes)
	for {
		n, err := b.conn.Read(buf)
		if n > 0 {
			if _, werr := b.local.Write(buf[:n]); werr != nil {
				b.local.Close() // the runtime closed its end: outbound sees it too
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				b.local.CloseWrite()
			} else {
				b.local.Close()
			}
			return
		}
	}
}

// outbound copies the runtime's replies to the client until the runtime closes its
// end (or the bridge's end was closed), then ends the session: close_notify and
// close of conn, close of the socketpair. It waits for replies without a buffer
// (replyBuffers lends one only once the socketpair is readable), so an idle session
// holds only its inbound buffer.
func (b *Bridge) outbound() {
	defer b.Close()
	raw, err := b.local.SyscallConn()
	if err != nil {
		return
	}
	for {
		var buf *[bridgeBufferBytes]byte
		var n int
		var readErr error
		err := raw.Read(func(fd uintptr) bool {
			buf = replyBuffers.Get().(*[bridgeBufferBytes]byte)
			n, readErr = unix.Read(int(fd), buf[:])
			if readErr == unix.EAGAIN || readErr == unix.EINTR {
				replyBuffers.Put(buf)
				buf = nil
				return false // the netpoller waits until it is readable
			}
			return true
		})
		if err == nil && readErr == nil && n > 0 {
			b.conn.SetWriteDeadline(time.Now().Add(b.writeTimeout))
			_, err = b.conn.Write(buf[:n])
		}
		if buf != nil {
			replyBuffers.Put(buf)
		}
		if err != nil || readErr != nil || n == 0 { // n == 0: the runtime closed its end
			return
		}
	}
}

// replyBuffers lends outbound buffers while a session has replies to move. The
// sessions' goroutines share it; shards never touch it.
var replyBuffers = sync.Pool{New: func() any { return new([bridgeBufferBytes]byte) }}

func closeFd(fd int) { unix.Close(fd) }
