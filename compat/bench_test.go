package compat

import (
	"io"
	"net"
	"testing"
	"time"
)

// BenchmarkRawPing is one PING round trip (a 256-byte request, a 256-byte reply)
// over loopback TCP, framed by hand as the SDK frames it, against the server.
// BenchmarkLoopbackEcho is its baseline in the same run: the same bytes echoed by
// a goroutine that does nothing else, so the difference is the server's cost.
func BenchmarkRawPing(b *testing.B) {
	addr := startServer(b)
	c := dial(b, addr)
	f := c.stamp(opNonReplicated, codePing, nil)
	reply := make([]byte, headerSize)
	b.SetBytes(2 * headerSize)
	b.ReportAllocs()
	c.conn.SetDeadline(time.Now().Add(time.Minute))
	b.ResetTimer()
	for range b.N {
		if _, err := c.conn.Write(f.bytes); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c.conn, reply); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if reply[60] != commandReply || reply[216] != 0 {
		b.Fatalf("last reply: command %d status %d", reply[60], reply[216])
	}
}

func BenchmarkLoopbackEcho(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		buf := make([]byte, headerSize)
		for {
			if _, err := io.ReadFull(conn, buf); err != nil {
				return
			}
			if _, err := conn.Write(buf); err != nil {
				return
			}
		}
	}()
	conn, err := net.DialTimeout("tcp", ln.Addr().String(), readDeadline)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Minute))
	request := make([]byte, headerSize)
	reply := make([]byte, headerSize)
	b.SetBytes(2 * headerSize)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := conn.Write(request); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(conn, reply); err != nil {
			b.Fatal(err)
		}
	}
}
