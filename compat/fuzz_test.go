package compat

import (
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"time"
)

// fuzzOperations are the operation bytes an SDK may send, minus the ones that
// would change or delete the root user the target logs in as (UpdateUser,
// DeleteUser, ChangePassword, UpdatePermissions). Invalid operation bytes are out
// of scope: the reference server drops such a frame without a reply.
const sdkRequestDeadline = 30 * time.Second

var fuzzOperations = []uint8{
	opRegister, opNonReplicated, opLogout,
	128, 129, 130, 131, 132, 133, 134, 135, 136, 137, 138, 139, 140, 141, 146, 147, 148, 149,
	opSendMessages, opStoreConsumerOffset, opDeleteConsumerOffset,
}

// FuzzRequestBody sends arbitrary bodies under every SDK operation (and any op-2
// code) to a live server, logged in as root, and requires what the Go SDK
// requires of every answer: a reply echoing the request with a known operation
// byte, an empty body on a non-zero status, a well-formed result section where the
// operation byte says there is one, or an eviction, or a closed connection. Never
// silence: a hang fails the read deadline.
func FuzzRequestBody(f *testing.F) {
	addr := startServer(f)
	f.Add(uint8(1), uint32(codePing), []byte{})
	f.Add(uint8(1), uint32(codeGetStream), ids(0))
	f.Add(uint8(1), uint32(codePollMessages), pollBody(consumer(1, 1), ids(0), ids(0), 0, true, strategyFirst, 0, 10, false))
	f.Add(uint8(1), uint32(codeGetSnapshot), []byte{1, 1, 1})
	f.Add(uint8(1), uint32(60000), []byte{1, 2, 3})
	f.Add(uint8(3), uint32(0), appendName(nil, "fuzz-stream"))
	f.Add(uint8(7), uint32(0), createTopicBody(0, "fuzz-topic", 2, option(nil, "enforce_fsync", kindString, []byte("true"))))
	f.Add(uint8(21), uint32(0), sendBody(ids(0), ids(0), 0, 1, []byte("fuzz")))
	f.Add(uint8(22), uint32(0), storeOffsetBody(offsetTarget(consumer(1, 1), ids(0), ids(0), 0, true), 0, 1))
	f.Add(uint8(0), uint32(0), loginBody("iggy", "iggy"))
	f.Add(uint8(17), uint32(0), patBody("fuzz", 0))

	// One logged-in connection serves many inputs (a login costs an argon2 hash);
	// it is replaced when an input ends its session.
	var c *rawConn
	f.Cleanup(func() {
		if c != nil {
			c.conn.Close()
		}
	})
	f.Fuzz(func(t *testing.T, opIndex uint8, code uint32, body []byte) {
		if c == nil {
			c = dialUnmanaged(t, addr)
			// Inputs may create up to 1000 partitions at a time, which is slow but
			// legitimate: allow what the SDK allows a request (30 s, the Go SDK's
			// request deadline).
			c.replyTimeout = sdkRequestDeadline
			c.login("iggy", "iggy")
		}
		c.t = t
		op := fuzzOperations[int(opIndex)%len(fuzzOperations)]
		body = clampPartitionCount(op, body)
		f := c.stamp(op, code, body)
		c.write(f)
		r, err := c.tryRead(f)
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			c.conn.Close()
			c = nil // the server closed the connection: a fresh one next time
			return
		case err != nil:
			t.Fatalf("op %d code %d body % x: %v", op, code, body, err)
		}
		if r.command == commandEviction {
			c.conn.Close()
			c = nil
			return
		}
		if r.status == 0 && resultFramed(r.operation, r.body) {
			c.outcome(r) // fails on a malformed result section
		}
		if op == opSendMessages && r.status == 0 && len(r.body) < 4 {
			t.Fatalf("SendMessages answered status 0 with % x (the SDK rejects it)", r.body)
		}
		if r.operation == opRegister || r.operation == opLogout {
			// A login or logout changed the session: start again from a known state.
			c.conn.Close()
			c = nil
		}
	})
}

// fuzzPartitionsMax bounds the partition count of a fuzzed CreateTopic or
// CreatePartitions. Creating a partition costs the server directory fsyncs (a
// 1000-partition topic takes over a second), and the fuzzing coordinator takes an
// input that runs for seconds for a hung worker.
const fuzzPartitionsMax = 2

// clampPartitionCount rewrites the partitions_count that follows the leading
// Identifiers of CreateTopic (one) and CreatePartitions (two) in a copy of body;
// a body whose identifiers do not parse is returned as it is.
func clampPartitionCount(op uint8, body []byte) []byte {
	identifiers := 0
	switch op {
	case opCreateTopic:
		identifiers = 1
	case opCreatePartitions:
		identifiers = 2
	default:
		return body
	}
	at := 0
	for range identifiers {
		if len(body)-at < 2 {
			return body
		}
		at += 2 + int(body[at+1])
	}
	if len(body)-at < 4 || binary.LittleEndian.Uint32(body[at:]) <= fuzzPartitionsMax {
		return body
	}
	clamped := append([]byte(nil), body...)
	binary.LittleEndian.PutUint32(clamped[at:], fuzzPartitionsMax)
	return clamped
}
