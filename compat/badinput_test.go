package compat

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"testing"
	"time"
)

// Malformed requests get the answer the reference server gives them (apache/iggy
// core/server/src/dispatch.rs), never silence.

func TestMalformedSends(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	streamID := c.createStream("bad-sends")
	topic, _ := c.createTopic(streamID, "t", 1)
	now := uint64(time.Now().UnixMicro())
	good := func() []byte {
		return sendBody(ids(streamID), ids(topic.id), 0, now, []byte("payload one"), []byte("payload two"))
	}
	// The batch starts after [metadata_length u32][metadata].
	batchAt := func(body []byte) int { return 4 + int(binary.LittleEndian.Uint32(body)) }

	for _, tc := range []struct {
		what   string
		mutate func([]byte) []byte
		want   uint32
	}{
		{"a frame payload byte flipped (frame checksum)", func(b []byte) []byte {
			b[batchAt(b)+256+48] ^= 1
			return b
		}, 4027},
		{"the batch checksum flipped", func(b []byte) []byte {
			b[batchAt(b)+40] ^= 1
			return b
		}, 4039},
		{"metadata_length larger than the metadata", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b, binary.LittleEndian.Uint32(b)+1)
			return b
		}, 20},
		{"a metadata prefix that does not decode", func(b []byte) []byte { return b[:3] }, 20},
	} {
		body := tc.mutate(good())
		r := c.do(opSendMessages, 101, body)
		if r.command != commandReply || r.status != tc.want {
			t.Errorf("send with %s: %v, want status %d", tc.what, r, tc.want)
		}
	}
	// messages_count in the metadata different from the batch's message_count.
	body := good()
	binary.LittleEndian.PutUint32(body[batchAt(body)-4:], 3)
	if r := c.do(opSendMessages, 101, body); r.command != commandReply || r.status == 0 {
		t.Errorf("send with a messages_count that disagrees with the batch: %v, want an error status", r)
	}
	// Nothing was stored by the refused sends, and the connection still works.
	if cs := c.send(streamID, topic.id, 0, []byte("fine")); len(cs) != 1 || cs[0].baseOffset != 0 {
		t.Fatalf("send after refused batches: %+v, want base offset 0", cs)
	}
}

func TestMalformedReadsAndOffsetWrites(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	streamID := c.createStream("bad-reads")
	topic, _ := c.createTopic(streamID, "t", 1)
	c.send(streamID, topic.id, 0, []byte("m"))

	// An undecodable poll body: the 16-byte prefix, partition 0, no messages.
	got := c.ok("poll with a truncated body", opNonReplicated, codePollMessages, []byte{1, 1})
	if !bytes.Equal(got[:4], []byte{0, 0, 0, 0}) || len(got) != 16 || binary.LittleEndian.Uint32(got[12:]) != 0 {
		t.Errorf("undecodable poll: % x, want a 16-byte prefix with partition 0 and 0 messages", got)
	}
	// An undecodable GetConsumerOffset or GetClient: empty.
	if got := c.ok("GetConsumerOffset truncated", opNonReplicated, codeGetConsumerOffset, []byte{1}); len(got) != 0 {
		t.Errorf("undecodable GetConsumerOffset: % x, want empty", got)
	}
	if got := c.ok("GetClient truncated", opNonReplicated, 21, []byte{1}); len(got) != 0 {
		t.Errorf("undecodable GetClient: % x, want empty", got)
	}
	// Offset writes without the ack byte, or with an unknown one: status 20.
	target := offsetTarget(consumer(consumerSingle, 1), ids(streamID), ids(topic.id), 0, true)
	c.fails("store without the ack byte", opStoreConsumerOffset, 121, binary.LittleEndian.AppendUint64(append([]byte(nil), target...), 0), 20)
	c.fails("store with ack 7", opStoreConsumerOffset, 121, storeOffsetBody(target, 0, 7), 20)
	c.fails("delete without the ack byte", opDeleteConsumerOffset, 122, target, 20)
	// Generic reads with a bad Identifier: status 3.
	for _, tc := range []struct {
		what string
		code uint32
		body []byte
	}{
		{"GetStream with identifier kind 9", codeGetStream, []byte{9, 4, 0, 0, 0, 0}},
		{"GetStream with a numeric identifier of length 2", codeGetStream, []byte{1, 2, 0, 0}},
		{"GetTopic with one identifier", codeGetTopic, ids(streamID)},
		{"GetSnapshot with All and another type", codeGetSnapshot, []byte{1, 2, 100, 1}},
		{"GetSnapshot with compression 9", codeGetSnapshot, []byte{9, 1, 1}},
	} {
		c.fails(tc.what, opNonReplicated, tc.code, tc.body, 3)
	}
	// Streams have an empty option catalog: any key is 4041; a malformed body is 3.
	c.fails("CreateStream with an option", opCreateStream, 202, option(appendName(nil, "opt"), "segment_size", kindUint64, u64Bytes(1<<20)), 4041)
	c.fails("CreateStream with an empty name", opCreateStream, 202, []byte{0}, 3)
	c.fails("CreateTopic with a truncated body", opCreateTopic, 302, ids(streamID)[:3], 3)
	c.ok("ping", opNonReplicated, codePing, nil)
}

// A frame whose size field is below the header size, or above the 64 MiB frame
// limit, is not a request: the server drops the connection (or evicts it) and
// keeps serving others.
func TestBadFrameSizeDropsOnlyThatConnection(t *testing.T) {
	addr := startServer(t)
	for _, size := range []uint32{100, frameSizeMaxBytes + 1, math.MaxUint32} {
		bad := dial(t, addr)
		f := bad.stamp(opNonReplicated, codePing, nil)
		binary.LittleEndian.PutUint32(f.bytes[48:], size)
		bad.write(f)
		bad.conn.SetReadDeadline(time.Now().Add(readDeadline))
		header := make([]byte, headerSize)
		_, err := io.ReadFull(bad.conn, header)
		switch {
		case err == nil && header[60] == commandEviction:
		case err != nil && !isTimeout(err):
			// EOF or a reset: the connection was closed.
		default:
			t.Fatalf("frame size %d: read %v, command %d; want the connection closed or evicted", size, err, header[60])
		}
	}
	good := dialRoot(t, addr)
	good.ok("ping on another connection", opNonReplicated, codePing, nil)
}

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}
