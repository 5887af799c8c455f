package shard

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/linux"
)

// listener is shard 0's client listener: its accept, paused with a growing backoff
// when descriptors or memory run out, and the placement of what it accepts.
type listener struct {
	acceptor
	nextShard int // where the search for the least loaded shard starts
	// handedOff counts, per target shard, the connections handed to it that did
	// not fail on the way; with the target's count of arrivals it gives those still
	// in flight, which its connection count does not show yet.
	handedOff []int64
}

func newListener(fd int) listener {
	return listener{acceptor: acceptor{fd: fd, completion: kindAccept, cancel: kindCancel, retry: timerAccept, policy: clientAccept{}}}
}

// clientAccept is the client plane's acceptPolicy.
type clientAccept struct{}

func (clientAccept) accepted(s *Shard, fd int) { s.delegate(fd) }

func (clientAccept) failed(s *Shard, a *acceptor, errno unix.Errno) time.Duration {
	if !isResourceExhaustion(errno) {
		// ECONNABORTED and friends end one pending connection, not the listener.
		s.log.Debug("accept failed", "err", errno)
		return 0
	}
	a.backoff = min(max(2*a.backoff, acceptBackoffMin), acceptBackoffMax)
	if !a.backingOff {
		s.log.Warn("accept failed, backing off", "err", errno, "backoff", a.backoff)
		a.backingOff = true
	}
	return a.backoff
}

// listen binds a TCP listener on address ("host:port") and returns its fd and the bound
// address. The accept queue is deep (4096, clamped by net.core.somaxconn) so that bursts
// wait in the kernel while shard 0 delegates.
func listen(address string) (int, *net.TCPAddr, error) {
	addrPort, err := netip.ParseAddrPort(address)
	if err != nil {
		tcpAddr, rerr := net.ResolveTCPAddr("tcp", address)
		if rerr != nil {
			return -1, nil, fmt.Errorf("shard: TCP address %q: %w", address, err)
		}
		addrPort = tcpAddr.AddrPort()
	}
	ip := addrPort.Addr()
	family := unix.AF_INET
	var sa unix.Sockaddr = &unix.SockaddrInet4{Port: int(addrPort.Port()), Addr: ip.Unmap().As4()}
	if ip.Is6() && !ip.Is4In6() {
		family = unix.AF_INET6
		sa = &unix.SockaddrInet6{Port: int(addrPort.Port()), Addr: ip.As16()}
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, nil, fmt.Errorf("shard: socket: %w", err)
	}
	if err := linux.SetReuseAddr(fd, true); err != nil {
		unix.Close(fd)
		return -1, nil, err
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("shard: bind %s: %w", address, err)
	}
	if err := unix.Listen(fd, 4096); err != nil {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("shard: listen %s: %w", address, err)
	}
	bound, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("shard: getsockname: %w", err)
	}
	var tcpAddr *net.TCPAddr
	switch b := bound.(type) {
	case *unix.SockaddrInet4:
		tcpAddr = &net.TCPAddr{IP: net.IP(b.Addr[:]).To16(), Port: b.Port}
	case *unix.SockaddrInet6:
		tcpAddr = &net.TCPAddr{IP: net.IP(b.Addr[:]), Port: b.Port}
	}
	return fd, tcpAddr, nil
}

// isResourceExhaustion reports whether an accept error means "out of descriptors or
// memory": the errors for which accepting again at once would fail again.
func isResourceExhaustion(errno unix.Errno) bool {
	switch errno {
	case unix.EMFILE, unix.ENFILE, unix.ENOBUFS, unix.ENOMEM:
		return true
	}
	return false
}

// pickShard chooses the shard for a new connection: the least loaded, counting its
// connections and those handed to it and not arrived yet, ties broken round-robin so
// that equal loads fill evenly. Connections come and go unevenly (a fleet of
// short-lived ones on one shard), so a blind rotation would let shards drift apart.
func (s *Shard) pickShard() int {
	l := &s.listener
	n := len(s.rt.shards)
	best, bestLoad := l.nextShard, int64(-1)
	for k := range n {
		i := (l.nextShard + k) % n
		load := s.rt.connCounts[i].Load()
		if i != s.index {
			load += l.handedOff[i] - s.rt.handoffsArrived[i].Load()
		}
		if bestLoad < 0 || load < bestLoad {
			best, bestLoad = i, load
		}
	}
	l.nextShard = (best + 1) % n
	return best
}

// delegate gives an accepted socket to the least loaded shard (pickShard) through fdpass:
// installed straight into the target ring's registered-file table by msg_ring
// send-fd (which also wakes the target), or as a duplicated descriptor through the
// target's inbox followed by a MSG_RING wake-up. A failed handoff closes the
// connection (the client reconnects); shard 0 keeps its own share.
func (s *Shard) delegate(fd int) {
	if err := linux.SetNoDelay(fd, true); err != nil {
		s.log.Debug("TCP_NODELAY failed", "err", err)
	}
	s.handOffClient(fd, peerNote{addr: peerAddress(fd)})
}

// handOff places a connection whose peer is known on the least loaded shard: an
// accepted socket, or one given to Runtime.Adopt.
func (s *Shard) handOffClient(fd int, note peerNote) {
	plane := uint32(0)
	if note.tls != nil {
		plane = cookieClientTLS
	}
	s.handOffTo(fd, s.pickShard(), plane, note)
}
