package compat

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/zeebo/xxh3"
)

// The reply header (iggy.apache.org/docs/binary-protocol/framing, "ReplyHeader"): zero
// seals and release, command 8, the request's request_checksum and timestamp echoed,
// size = 256 + body, zero reserved tail.
func TestReplyHeaderFields(t *testing.T) {
	addr := startServer(t)
	c := dial(t, addr)
	f := c.stamp(opNonReplicated, codePing, nil)
	binary.LittleEndian.PutUint64(f.bytes[144:], xxh3.Hash(nil)) // a correct stamp of the empty body
	binary.LittleEndian.PutUint64(f.bytes[160:], 0x0123456789abcdef)
	c.write(f)
	r := c.read(f)
	h := r.header
	if !bytes.Equal(h[0:32], make([]byte, 32)) {
		t.Errorf("checksum/checksum_body % x, want zero", h[0:32])
	}
	if got := binary.LittleEndian.Uint32(h[48:]); got != headerSize {
		t.Errorf("size %d, want 256 for an empty body", got)
	}
	if got := binary.LittleEndian.Uint32(h[56:]); got != 0 {
		t.Errorf("release %d, want 0", got)
	}
	if !bytes.Equal(h[128:144], f.bytes[144:160]) {
		t.Errorf("request_checksum echo % x, sent % x", h[128:144], f.bytes[144:160])
	}
	if got := binary.LittleEndian.Uint64(h[192:]); got != 0x0123456789abcdef {
		t.Errorf("timestamp echo %#x, sent 0x0123456789abcdef", got)
	}
	if !bytes.Equal(h[209:216], make([]byte, 7)) || !bytes.Equal(h[220:256], make([]byte, 36)) {
		t.Errorf("padding or reserved tail not zero: % x / % x", h[209:216], h[220:256])
	}
}

// Login failures are Eviction frames (iggy.apache.org/docs/binary-protocol/framing,
// "EvictionHeader"): header only, command 13, the reason at 255, and the protocol
// window at 144/148 only for reason 14.
func TestLoginEvictions(t *testing.T) {
	addr := startServer(t)
	for _, tc := range []struct {
		what   string
		body   []byte
		code   uint32
		op     uint8
		reason uint8
	}{
		{"an unknown user", loginBody("nobody", "iggy"), codeLogin, opRegister, 9},
		{"a body without a version prefix", []byte{1, 2}, codeLogin, opRegister, 15},
		{"a body of neither shape", append(binary.LittleEndian.AppendUint32(nil, protocolVersion0110), appendName(appendName(nil, sdkName), sdkVersion)...), codeLogin, opRegister, 15},
		{"protocol 1.0.0", loginBodyVersion(1<<20, "iggy", "iggy"), codeLogin, opRegister, 14},
		{"the legacy code 38 as op 2", loginBody("iggy", "iggy"), 38, opNonReplicated, 15},
		{"the legacy code 44 as op 2", loginBody("iggy", "iggy"), 44, opNonReplicated, 15},
	} {
		c := dial(t, addr)
		f := c.stamp(tc.op, tc.code, tc.body)
		c.write(f)
		r, err := c.tryRead(f)
		if err != nil {
			t.Fatalf("%s: %v", tc.what, err)
		}
		if r.command != commandEviction || r.reason != tc.reason {
			t.Errorf("login with %s: %v, want eviction reason %d", tc.what, r, tc.reason)
			continue
		}
		maxVersion, minVersion := binary.LittleEndian.Uint32(r.header[144:]), binary.LittleEndian.Uint32(r.header[148:])
		if tc.reason == 14 {
			// The SDK surfaces 14003 only with a sane window, else 40 (apache/iggy
			// core/common/src/error/eviction.rs).
			if minVersion == 0 || maxVersion < minVersion || maxVersion < protocolVersion0110 || minVersion > protocolVersion0110 {
				t.Errorf("%s: window [%d, %d] does not hold 0.11.0", tc.what, minVersion, maxVersion)
			}
		} else if maxVersion != 0 || minVersion != 0 {
			t.Errorf("%s: version window %d/%d set on reason %d", tc.what, maxVersion, minVersion, tc.reason)
		}
		if !bytes.Equal(r.header[152:255], make([]byte, 103)) {
			t.Errorf("%s: eviction reserved bytes not zero", tc.what)
		}
	}
}

func loginBodyVersion(version uint32, username, password string) []byte {
	b := loginBody(username, password)
	binary.LittleEndian.PutUint32(b, version)
	return b
}

// FlushUnsavedBuffer (102) is always status 5, whatever the body; a replicated
// command's code sent as op 2 is status 5 too (apache/iggy
// core/server/src/responses.rs).
func TestFeatureUnavailable(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	c.fails("FlushUnsavedBuffer", opNonReplicated, 102, append(ids(0, 0), 0, 0, 0, 0, 1), 5)
	c.fails("FlushUnsavedBuffer with a malformed body", opNonReplicated, 102, []byte{9}, 5)
	c.fails("CreateStream's code as op 2", opNonReplicated, 202, appendName(nil, "x"), 5)
	if got := c.ok("GetStreams", opNonReplicated, codeGetStreams, nil); len(got) != 0 {
		t.Fatalf("a stream was created by an op-2 request: % x", got)
	}
}

// GetStats (10): the 108-byte numeric prefix, then five Str32s, the semver, no cache
// metrics, threads and disk figures (apache/iggy
// core/binary_protocol/src/responses/system/get_stats.rs).
func TestGetStats(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	streamID := c.createStream("stats")
	topic, _ := c.createTopic(streamID, "t", 2)
	c.send(streamID, topic.id, 1, payloads("m", 0, 3)...)
	d := decoder{t: t, what: "Stats", b: c.ok("GetStats", opNonReplicated, codeGetStats, nil)}
	processID := d.u32()
	d.take(8) // cpu_usage, total_cpu_usage
	d.take(8 * 8)
	streams, topics, partitions, _ := d.u32(), d.u32(), d.u32(), d.u32()
	messages, clients, groups := d.u64(), d.u32(), d.u32()
	if d.off != 108 {
		t.Fatalf("numeric prefix ended at %d, want 108", d.off)
	}
	for range 5 {
		d.str32()
	}
	d.u32() // semver
	if cacheMetrics := d.u32(); cacheMetrics != 0 {
		d.take(32 * int(cacheMetrics))
	}
	d.u32()
	d.u64()
	d.u64()
	d.end()
	if processID == 0 || streams != 1 || topics != 1 || partitions != 2 || messages != 3 || clients < 1 || groups != 0 {
		t.Errorf("stats: pid %d streams %d topics %d partitions %d messages %d clients %d groups %d",
			processID, streams, topics, partitions, messages, clients, groups)
	}
}

// clientHeader is ClientResponse (apache/iggy
// core/binary_protocol/src/responses/clients/client_response.rs).
type clientHeader struct {
	clientID, userID uint32
	transport        uint8
	address          string
	groups           uint32
}

func (d *decoder) clientHeader() clientHeader {
	d.t.Helper()
	return clientHeader{clientID: d.u32(), userID: d.u32(), transport: d.u8(), address: d.str32(), groups: d.u32()}
}

// GetMe (20), GetClient (21) and GetClients (22): the caller's own ClientDetails
// with its group memberships, found again by id; an unknown id is empty.
func TestClientReads(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	streamID := c.createStream("clients")
	topic, _ := c.createTopic(streamID, "t", 1)
	group := ids(streamID, topic.id, 0)
	c.ok("CreateConsumerGroup", opCreateConsumerGroup, 602, appendName(ids(streamID, topic.id), "g"))
	c.ok("JoinConsumerGroup", opJoinConsumerGroup, 604, group)

	d := decoder{t: t, what: "GetMe", b: c.ok("GetMe", opNonReplicated, 20, nil)}
	me := d.clientHeader()
	if me.userID != 0 || me.transport != 1 || me.groups != 1 {
		t.Fatalf("GetMe %+v, want user 0, transport 1 (TCP), 1 group", me)
	}
	if entry := [3]uint32{d.u32(), d.u32(), d.u32()}; entry != [3]uint32{streamID, topic.id, 0} {
		t.Errorf("GetMe group entry %v", entry)
	}
	d.end()

	d = decoder{t: t, what: "GetClient", b: c.ok("GetClient", opNonReplicated, 21, u32Body(nil, me.clientID))}
	if again := d.clientHeader(); again.clientID != me.clientID || again.groups != 1 {
		t.Fatalf("GetClient %+v, want %+v", again, me)
	}
	d.take(12)
	d.end()
	if got := c.ok("GetClient of an unknown id", opNonReplicated, 21, u32Body(nil, me.clientID+1000)); len(got) != 0 {
		t.Errorf("GetClient of an unknown id: % x, want empty", got)
	}

	// The reference also lists connections that have not logged in (user
	// 0xFFFFFFFF) and fills in the peer address; see the disagreements file.
	d = decoder{t: t, what: "GetClients", b: c.ok("GetClients", opNonReplicated, 22, nil)}
	found := false
	for !d.done() {
		h := d.clientHeader()
		if h.transport != 1 {
			t.Errorf("GetClients entry %+v: transport %d, want 1 (TCP)", h, h.transport)
		}
		found = found || h.clientID == me.clientID && h.userID == 0
	}
	if !found {
		t.Errorf("GetClients does not list the caller (client %d, user 0)", me.clientID)
	}
}

// DescribeOptions' topic catalog descriptions convey their bounds in English; at
// least segment_size's must be non-empty (the Go e2e suite's only check) and
// mention its range.
func TestSegmentSizeDescription(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	d := decoder{t: t, what: "DescribeOptions", b: c.ok("DescribeOptions", opNonReplicated, codeDescribeOptions, []byte{1})}
	for range d.u32() {
		key := d.name()
		d.u8()
		d.take(int(d.u32()))
		description := d.str32()
		if key == "segment_size" && !strings.Contains(description, "512") {
			t.Errorf("segment_size description %q does not state the 512-byte multiple", description)
		}
	}
}
