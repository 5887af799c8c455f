package compat

import (
	"encoding/binary"
	"testing"
	"time"
)

// The Rust SDK's differences from the Go SDK that a server sees
// (iggy.apache.org/docs/binary-protocol/framing, "RequestHeader": request_checksum;
// code 4 InvalidFormat for a mismatch, verify_request_checksum in apache/iggy
// core/server/src/dispatch.rs).

// The Rust SDK stamps request_checksum (header 144..160) with XxHash3-64 of the
// body, zero-extended to u128, on metadata ops, Register and Logout. A correct
// stamp is accepted on each of them.
func TestRequestChecksumAccepted(t *testing.T) {
	addr := startServer(t)
	c := dial(t, addr)
	c.requestChecksum = true
	f := c.stamp(opRegister, codeLogin, loginBody("iggy", "iggy"))
	if binary.LittleEndian.Uint64(f.bytes[144:]) == 0 || binary.LittleEndian.Uint64(f.bytes[152:]) != 0 {
		t.Fatalf("register checksum stamp % x: want XxHash3-64 in 144..152 and zero in 152..160", f.bytes[144:160])
	}
	c.login("iggy", "iggy")
	streamID := c.createStream("rust")
	topic, _ := c.createTopic(streamID, "t", 1)
	// Partition ops and reads stay unstamped, as in the Rust SDK.
	cs := c.send(streamID, topic.id, 0, []byte("from rust"))
	if len(cs) != 1 || cs[0].partitionID != 0 {
		t.Fatalf("send: %+v", cs)
	}
	c.ok("DeleteTopic with a checksum", opDeleteTopic, 303, ids(streamID, topic.id))
	r := c.do(opLogout, 39, nil)
	if r.command != commandReply || r.status != 0 || r.operation != opLogout {
		t.Fatalf("logout with a checksum: %v", r)
	}
}

// A non-zero request_checksum that does not match the body is status 4
// InvalidFormat, checked before anything else, for every operation.
func TestRequestChecksumMismatchIsInvalidFormat(t *testing.T) {
	addr := startServer(t)
	c := dial(t, addr)
	withChecksum := func(f frame) frame {
		binary.LittleEndian.PutUint64(f.bytes[144:], 0x5eed) // anything but the body's hash
		return f
	}

	f := withChecksum(c.stamp(opRegister, codeLogin, loginBody("iggy", "iggy")))
	c.write(f)
	if r := c.read(f); r.command != commandReply || r.status != 4 {
		t.Fatalf("register with a wrong checksum: %v, want status 4", r)
	}

	c.login("iggy", "iggy")
	for _, tc := range []struct {
		what      string
		operation uint8
		code      uint32
		body      []byte
	}{
		{"CreateStream", opCreateStream, 202, appendName(nil, "never")},
		{"GetStreams", opNonReplicated, codeGetStreams, nil},
		{"SendMessages", opSendMessages, 101, sendBody(ids(0), ids(0), 0, 1, []byte("x"))},
		{"StoreConsumerOffset", opStoreConsumerOffset, 121, storeOffsetBody(offsetTarget(consumer(consumerSingle, 1), ids(0), ids(0), 0, true), 0, 1)},
		{"Logout", opLogout, 39, nil},
	} {
		f := withChecksum(c.stamp(tc.operation, tc.code, tc.body))
		c.write(f)
		if r := c.read(f); r.command != commandReply || r.status != 4 {
			t.Fatalf("%s with a wrong checksum: %v, want status 4", tc.what, r)
		}
	}
	// Nothing was applied and the session survived the refused logout.
	if got := c.ok("GetStreams", opNonReplicated, codeGetStreams, nil); len(got) != 0 {
		t.Fatalf("GetStreams after refused writes: % x, want empty", got)
	}
}

// Partitioning kinds 1 (Balanced) and 3 (MessagesKey) are resolved by the server
// (iggy.apache.org/docs/binary-protocol/encodings, "Partitioning"), the key with the
// same XXH32 % count the Go SDK computes, so key placement agrees across SDKs.
func TestServerSidePartitioning(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	streamID := c.createStream("server-side")
	topic, _ := c.createTopic(streamID, "t", 3)
	now := uint64(time.Now().UnixMicro())

	for range 3 {
		cs := c.sendRaw(sendBodyPartitioned(ids(streamID), ids(topic.id), []byte{1, 0}, now, []byte("balanced")))
		if len(cs) != 1 || cs[0].partitionID >= 3 {
			t.Fatalf("balanced send confirmed %+v", cs)
		}
	}
	for _, key := range []string{"order-key-1", "k", "a key of more than sixteen bytes"} {
		partitioning := appendName([]byte{3}, key)
		cs := c.sendRaw(sendBodyPartitioned(ids(streamID), ids(topic.id), partitioning, now, []byte(key)))
		if want := xxh32([]byte(key)) % 3; len(cs) != 1 || cs[0].partitionID != want {
			t.Fatalf("key %q confirmed %+v, want partition %d (XXH32 %% 3)", key, cs, want)
		}
	}
}
