package linux

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Socket options on raw descriptors: the ring owns sockets as plain fds (accepted by
// IORING_OP_ACCEPT, never wrapped in a net.Conn), so the usual net.TCPConn setters are
// not available. Each error names the option and the fd.

// SetNoDelay sets TCP_NODELAY: replies are written whole by one send, so Nagle's delay
// only adds latency.
func SetNoDelay(fd int, on bool) error {
	return setBool(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, "TCP_NODELAY", on)
}

// SetReuseAddr sets SO_REUSEADDR, so a restarted server can bind its port while old
// connections sit in TIME_WAIT.
func SetReuseAddr(fd int, on bool) error {
	return setBool(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, "SO_REUSEADDR", on)
}

// SetReusePort sets SO_REUSEPORT, so several listening sockets (one per shard) can bind
// the same address and the kernel spreads connections across them.
func SetReusePort(fd int, on bool) error {
	return setBool(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, "SO_REUSEPORT", on)
}

// SetReceiveBufferBytes sets SO_RCVBUF. The kernel doubles the value (for its own
// bookkeeping) and caps it at net.core.rmem_max; ReceiveBufferBytes reports the result.
func SetReceiveBufferBytes(fd, sizeBytes int) error {
	return setInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, "SO_RCVBUF", sizeBytes)
}

// SetSendBufferBytes sets SO_SNDBUF; doubled and capped at net.core.wmem_max.
func SetSendBufferBytes(fd, sizeBytes int) error {
	return setInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, "SO_SNDBUF", sizeBytes)
}

// ReceiveBufferBytes returns SO_RCVBUF as the kernel applied it.
func ReceiveBufferBytes(fd int) (int, error) {
	return getInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, "SO_RCVBUF")
}

// SendBufferBytes returns SO_SNDBUF as the kernel applied it.
func SendBufferBytes(fd int) (int, error) {
	return getInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, "SO_SNDBUF")
}

// NoDelay reports TCP_NODELAY.
func NoDelay(fd int) (bool, error) {
	v, err := getInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, "TCP_NODELAY")
	return v != 0, err
}

func setBool(fd, level, opt int, name string, on bool) error {
	v := 0
	if on {
		v = 1
	}
	return setInt(fd, level, opt, name, v)
}

func setInt(fd, level, opt int, name string, v int) error {
	if err := unix.SetsockoptInt(fd, level, opt, v); err != nil {
		return fmt.Errorf("linux: setsockopt %s=%d on fd %d: %w", name, v, fd, err)
	}
	return nil
}

func getInt(fd, level, opt int, name string) (int, error) {
	v, err := unix.GetsockoptInt(fd, level, opt)
	if err != nil {
		return 0, fmt.Errorf("linux: getsockopt %s on fd %d: %w", name, fd, err)
	}
	return v, nil
}
