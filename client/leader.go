package client

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Leader redirection, as the official Go SDK settles the leader (apache/iggy
// foreign/go/client/tcp, HandleLeaderRedirection; iggy.apache.org/docs/clustering/
// client-failover). In a cluster only the leader takes writes: a backup answers
// them 58 TransientNotAccepted. So after every successful login, and after a write
// was answered 58 for a whole NotAcceptedWindow, the client asks the node it is on
// for GetClusterMetadata and:
//
//   - any error: stays (a broken connection is still the request's error);
//   - exactly one node in the roster: stays, whatever the node says;
//   - else the first node with role leader and status healthy is the leader; when
//     there is none (an election is under way), it asks again every
//     LeaderPollInterval for up to LeaderPollWindow, then stays;
//   - the leader's address, net.JoinHostPort(ip, tcp_port), compared with the
//     address the client dialed (sameNodeAddress): the same, it stays and the
//     redirect count starts again from zero; another, it dials the leader, closes
//     this connection and replays the login there, which settles the leader
//     again. After MaxLeaderRedirects moves in a row it stays.
//
// One difference from the Go SDK: it dials the leader before it closes the current
// connection, so a leader it cannot reach leaves it logged in where it was (the
// SDK is left disconnected). A write whose 58s sent it to the leader goes on there
// under the new session until its deadline (the Go SDK's 30 s request budget).
// Reads are never redirected: followers serve them.
const (
	// MaxLeaderRedirects is the Go SDK's MaxLeaderRedirects.
	MaxLeaderRedirects = 3
	// LeaderPollInterval and LeaderPollWindow are how often, and how long, a
	// leaderless roster is asked again.
	LeaderPollInterval = 250 * time.Millisecond
	LeaderPollWindow   = 5 * time.Second
)

// Addr is the address of the node the client is connected to: Dial's address, or
// the advertised address of the leader it was redirected to.
func (c *Client) Addr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addr
}

// leaderToFollowLocked settles the leader: the address to move to, or "" to stay.
// Its error is that of a connection that broke, or of ctx ending the wait for a
// leader.
func (c *Client) leaderToFollowLocked(ctx context.Context) (string, error) {
	pollEnd := time.Now().Add(LeaderPollWindow)
	for {
		payload, err := c.do(ctx, c.frame(), wire.OperationNonReplicated, wire.CodeGetClusterMetadata)
		if err != nil {
			if c.broken != nil {
				return "", err
			}
			return "", nil
		}
		leader, nodes, err := leaderOf(payload)
		if err != nil || nodes == 1 {
			return "", nil
		}
		if leader != "" {
			if sameNodeAddress(leader, c.addr) {
				c.leaderRedirects = 0
				return "", nil
			}
			if c.leaderRedirects >= MaxLeaderRedirects {
				return "", nil
			}
			return leader, nil
		}
		wake := time.Now().Add(LeaderPollInterval)
		if d, ok := ctx.Deadline(); wake.After(pollEnd) || ok && wake.After(d) {
			return "", nil
		}
		if !sleepCtx(ctx, LeaderPollInterval) {
			return "", ctx.Err()
		}
	}
}

// leaderOf reads a GetClusterMetadata payload: the address of its first healthy
// leader ("" for none) and the number of nodes.
func leaderOf(payload []byte) (string, int, error) {
	_, it := wire.IterClusterNodes(payload)
	nodes := 0
	leader := ""
	for it.Next() {
		n := it.Value()
		nodes++
		if leader == "" && n.Role == wire.ClusterRoleLeader && n.Status == wire.ClusterNodeHealthy {
			leader = net.JoinHostPort(string(n.IP), strconv.Itoa(int(n.TCPPort)))
		}
	}
	return leader, nodes, it.Err()
}

// moveLocked connects to the leader at addr in place of the current connection and
// reports whether it did; the caller logs in there. A leader that cannot be dialed
// leaves the client where it was.
func (c *Client) moveLocked(ctx context.Context, addr string) bool {
	conn, err := dialConn(ctx, addr, &c.opts)
	if err != nil {
		return false
	}
	c.connMu.Lock()
	old := c.conn
	c.conn = conn
	c.connMu.Unlock()
	_ = old.Close()
	if c.closed.Load() {
		// Close ran while the leader was dialed and closed the old connection.
		_ = conn.Close()
	}
	c.addr = addr
	c.leaderRedirects++
	// A new connection is a new client to the server, as after Dial.
	c.session = 0
	c.identity = Identity{}
	c.requestNumber = 1
	c.topologyGen++
	return true
}

// followsLeaderOn reports whether a request of op that failed with err looks for
// the leader: a write (metadata or partition plane) answered 58 for its whole
// window, with redirection on and a login to replay at the leader.
func (c *Client) followsLeaderOn(err error, op wire.Operation) bool {
	code, _ := err.(wire.ErrorCode)
	return code == wire.ErrTransientNotAccepted && c.opts.leaderRedirection && c.opts.clusterMetadataOnLogin &&
		c.relogin != nil && op != wire.OperationRegister && op != wire.OperationNonReplicated
}

// followLeaderLocked runs the leader check for a write answered 58 in *frame, by
// budget. It reports whether the client moved (and logged in again), in which case
// the caller stamps the frame afresh. *frame is restored either way: the check's
// own requests are built in the same buffer.
func (c *Client) followLeaderLocked(ctx context.Context, budget time.Time, frame *[]byte) (bool, error) {
	saved := bytes.Clone(*frame)
	defer func() {
		*frame = append(c.req[:0], saved...)
		c.keep(*frame)
	}()
	checkCtx, cancel := context.WithDeadline(ctx, budget)
	defer cancel()
	leader, err := c.leaderToFollowLocked(checkCtx)
	if err != nil {
		if ctx.Err() == nil && c.broken == nil {
			// The budget ended the wait: the caller returns the 58.
			return false, nil
		}
		return false, err
	}
	if leader == "" || !c.moveLocked(checkCtx, leader) {
		return false, nil
	}
	if _, err := c.registerLocked(checkCtx, c.relogin); err != nil {
		return false, err
	}
	return true, nil
}

// sameNodeAddress compares two host:port addresses as the Go SDK does, without
// DNS: hosts lower-cased, localhost read as 127.0.0.1 and :: as ::1, IP literals
// compared as IPs (so ::ffff:127.0.0.1 is 127.0.0.1), ports as given.
func sameNodeAddress(a, b string) bool {
	hostA, portA, errA := net.SplitHostPort(a)
	hostB, portB, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil {
		return strings.EqualFold(a, b)
	}
	if portA != portB {
		return false
	}
	hostA, hostB = canonicalHost(hostA), canonicalHost(hostB)
	ipA, ipB := net.ParseIP(hostA), net.ParseIP(hostB)
	if ipA != nil && ipB != nil {
		return ipA.Equal(ipB)
	}
	return hostA == hostB
}

func canonicalHost(host string) string {
	host = strings.ToLower(host)
	switch host {
	case "localhost":
		return "127.0.0.1"
	case "::":
		return "::1"
	}
	return host
}
