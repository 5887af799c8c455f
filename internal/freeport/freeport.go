// Package freeport finds free loopback TCP ports for tests that must name a
// port before the process or server that binds it starts (a cluster's roster
// names every node's ports up front).
//
// The ports are drawn below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range): a port the kernel hands out (a listener on
// port 0) may, once released, become the local port of another test's outgoing
// connection (go test runs packages side by side; a peer redials a killed node)
// before the node binds it, and the node's start then fails with "address
// already in use". Below the range, only another test drawing the same way can
// take it.
package freeport

import (
	mathrand "math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Loopback returns n distinct free TCP ports on 127.0.0.1. All are held open
// until every one is picked, so that no two are the same.
func Loopback(t testing.TB, n int) []int {
	t.Helper()
	low, high := ephemeralPortsLow()-16384, ephemeralPortsLow()
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for attempt := 0; len(ports) < n; attempt++ {
		if attempt == 1000 {
			t.Fatalf("no %d free ports in [%d, %d) after 1000 tries", n, low, high)
		}
		port := low + mathrand.IntN(high-low)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		listeners = append(listeners, l)
		ports = append(ports, port)
	}
	return ports
}

// ephemeralPortsLow is the first port of the kernel's ephemeral range (32768
// when it cannot be read).
func ephemeralPortsLow() int {
	const fallback = 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return fallback
	}
	fields := strings.Fields(string(b))
	if len(fields) != 2 {
		return fallback
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil || low < 16384+1024 {
		return fallback
	}
	return low
}
