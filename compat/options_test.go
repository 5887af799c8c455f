package compat

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
)

// Option value kinds (iggy.apache.org/docs/binary-protocol/encodings, "Header kinds").
const (
	kindString = 2
	kindBool   = 3
	kindUint8  = 9
	kindUint32 = 11
	kindUint64 = 12
)

// option is one request TLV entry: [2][key_len u32][key][kind][value_len u32][value].
func option(b []byte, key string, kind uint8, value []byte) []byte {
	b = binary.LittleEndian.AppendUint32(append(b, kindString), uint32(len(key)))
	b = append(b, key...)
	b = binary.LittleEndian.AppendUint32(append(b, kind), uint32(len(value)))
	return append(b, value...)
}

func u32Bytes(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func u64Bytes(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

// catalogEntry is a row of the DescribeOptions topic catalog
// (iggy.apache.org/docs/server/topic-options).
type catalogEntry struct {
	key          string
	kind         uint8
	defaultValue []byte
}

var topicCatalog = []catalogEntry{
	{"compression_algorithm", kindString, []byte("none")},
	{"message_expiry", kindUint64, u64Bytes(math.MaxUint64)},
	{"max_topic_size", kindUint64, u64Bytes(math.MaxUint64)},
	{"segment_size", kindUint64, u64Bytes(1 << 30)},
	{"enforce_fsync", kindBool, []byte{0}},
	{"messages_required_to_save", kindUint32, u32Bytes(1024)},
	{"size_of_messages_required_to_save", kindUint64, u64Bytes(1 << 20)},
	{"preallocate_segments", kindBool, []byte{0}},
}

// DescribeOptions (13): the topic catalog in the documented order, kinds and
// default bytes, each with a description; empty catalogs for streams and users;
// status 3 for any other scope.
func TestDescribeOptionsCatalog(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	d := decoder{t: t, what: "DescribeOptions", b: c.ok("DescribeOptions topic", opNonReplicated, codeDescribeOptions, []byte{1})}
	if n := d.u32(); n != uint32(len(topicCatalog)) {
		t.Fatalf("topic catalog has %d entries, want %d", n, len(topicCatalog))
	}
	for _, want := range topicCatalog {
		key, kind := d.name(), d.u8()
		def := d.take(int(d.u32()))
		description := d.str32()
		if key != want.key || kind != want.kind || !bytes.Equal(def, want.defaultValue) {
			t.Errorf("descriptor %q kind %d default % x, want %q kind %d default % x", key, kind, def, want.key, want.kind, want.defaultValue)
		}
		if description == "" {
			t.Errorf("descriptor %q has no description", key)
		}
	}
	d.end()
	for _, scope := range []byte{2, 3} {
		if got := c.ok("DescribeOptions", opNonReplicated, codeDescribeOptions, []byte{scope}); !bytes.Equal(got, []byte{0, 0, 0, 0}) {
			t.Errorf("scope %d catalog % x, want 00 00 00 00", scope, got)
		}
	}
	for _, scope := range []byte{0, 4, 255} {
		c.fails("DescribeOptions with a bad scope", opNonReplicated, codeDescribeOptions, []byte{scope}, 3)
	}
}

// createTopicWith creates a topic with an options block and returns the reply.
func (c *rawConn) createTopicWith(streamID uint32, name string, partitions uint32, options []byte) topicHeader {
	c.t.Helper()
	h, _ := topicDetails(c.t, "CreateTopic reply", c.ok("CreateTopic "+name, opCreateTopic, 302, createTopicBody(streamID, name, partitions, options)))
	return h
}

func checkBlocks(t *testing.T, what string, h topicHeader, explicit map[string]optionValue) {
	t.Helper()
	if len(h.explicit) != len(explicit) {
		t.Errorf("%s: explicit block %v, want %v", what, h.explicit, explicit)
	}
	for key, want := range explicit {
		got, ok := h.explicit[key]
		if !ok || got.kind != want.kind || !bytes.Equal(got.value, want.value) {
			t.Errorf("%s: explicit %q = %+v, want %+v", what, key, got, want)
		}
	}
	// Every other catalog key is in the derived block with its default; no key is
	// in both.
	if len(h.derived)+len(h.explicit) != len(topicCatalog) {
		t.Errorf("%s: %d explicit + %d derived keys, want %d in all", what, len(h.explicit), len(h.derived), len(topicCatalog))
	}
	for _, entry := range topicCatalog {
		if _, set := explicit[entry.key]; set {
			if _, dup := h.derived[entry.key]; dup {
				t.Errorf("%s: %q in both blocks", what, entry.key)
			}
			continue
		}
		got, ok := h.derived[entry.key]
		if !ok || got.kind != entry.kind || !bytes.Equal(got.value, entry.defaultValue) {
			t.Errorf("%s: derived %q = %+v, want kind %d value % x", what, entry.key, got, entry.kind, entry.defaultValue)
		}
	}
}

// TopicOptionsRoundTripAndCatalog / TypedTopicOptionsMatchTheCatalog
// (iggy.apache.org/docs/server/topic-options; apache/iggy
// foreign/go/tests/e2e_test.go).
func TestTopicOptionsRoundTrip(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	streamID := c.createStream("options")

	// The SDK's default CreateTopic sends an empty block: 8 derived defaults and
	// the fixed fields projected from them.
	h := c.createTopicWith(streamID, "defaults", 1, nil)
	checkBlocks(t, "defaults", h, nil)
	if h.messageExpiry != math.MaxUint64 || h.compression != 1 || h.maxTopicSize != math.MaxUint64 {
		t.Errorf("default fixed fields: expiry %d compression %d max size %d", h.messageExpiry, h.compression, h.maxTopicSize)
	}

	// A String "true" is re-encoded canonically as Bool 01, in the reply and in GetTopic.
	h = c.createTopicWith(streamID, "fsync", 1, option(nil, "enforce_fsync", kindString, []byte("true")))
	want := map[string]optionValue{"enforce_fsync": {kindBool, []byte{1}}}
	checkBlocks(t, "enforce_fsync=\"true\" reply", h, want)
	got, _ := c.getTopic(streamID, h.id)
	checkBlocks(t, "enforce_fsync=\"true\" GetTopic", got, want)

	// Typed helpers come back with exactly their kinds and bytes.
	var typed []byte
	typed = option(typed, "segment_size", kindUint64, u64Bytes(1048576))
	typed = option(typed, "enforce_fsync", kindBool, []byte{1})
	typed = option(typed, "messages_required_to_save", kindUint32, u32Bytes(7))
	typed = option(typed, "size_of_messages_required_to_save", kindUint64, u64Bytes(4096))
	typed = option(typed, "preallocate_segments", kindBool, []byte{0})
	h = c.createTopicWith(streamID, "typed", 2, typed)
	want = map[string]optionValue{
		"segment_size":                      {kindUint64, u64Bytes(1048576)},
		"enforce_fsync":                     {kindBool, []byte{1}},
		"messages_required_to_save":         {kindUint32, u32Bytes(7)},
		"size_of_messages_required_to_save": {kindUint64, u64Bytes(4096)},
		"preallocate_segments":              {kindBool, []byte{0}},
	}
	checkBlocks(t, "typed reply", h, want)
	got, _ = c.getTopic(streamID, h.id)
	checkBlocks(t, "typed GetTopic", got, want)

	// segment_size 0 means "server default": accepted and reported as derived.
	h = c.createTopicWith(streamID, "zero-segment", 1, option(nil, "segment_size", kindUint64, u64Bytes(0)))
	checkBlocks(t, "segment_size=0 reply", h, nil)
	got, _ = c.getTopic(streamID, h.id)
	checkBlocks(t, "segment_size=0 GetTopic", got, nil)

	// What the Go SDK sends for Gzip, an expiry and a size: canonical explicit
	// entries and the fixed fields follow them.
	var gz []byte
	gz = option(gz, "compression_algorithm", kindString, []byte("gzip"))
	gz = option(gz, "message_expiry", kindUint64, u64Bytes(60_000_000))
	gz = option(gz, "max_topic_size", kindUint64, u64Bytes(1<<31))
	h = c.createTopicWith(streamID, "gzip", 1, gz)
	checkBlocks(t, "gzip reply", h, map[string]optionValue{
		"compression_algorithm": {kindString, []byte("gzip")},
		"message_expiry":        {kindUint64, u64Bytes(60_000_000)},
		"max_topic_size":        {kindUint64, u64Bytes(1 << 31)},
	})
	if h.compression != 2 || h.messageExpiry != 60_000_000 || h.maxTopicSize != 1<<31 {
		t.Errorf("gzip fixed fields: compression %d expiry %d max size %d", h.compression, h.messageExpiry, h.maxTopicSize)
	}
	// compression as Uint8 2 is canonicalised to String "gzip".
	h = c.createTopicWith(streamID, "gzip-u8", 1, option(nil, "compression_algorithm", kindUint8, []byte{2}))
	checkBlocks(t, "compression Uint8 reply", h, map[string]optionValue{"compression_algorithm": {kindString, []byte("gzip")}})

	// Refusals are pre-commit status denials.
	for _, tc := range []struct {
		what    string
		options []byte
		code    uint32
	}{
		{"messages_required_to_save = 0", option(nil, "messages_required_to_save", kindUint32, u32Bytes(0)), 4042},
		{"segment_size = 1048577", option(nil, "segment_size", kindUint64, u64Bytes(1048577)), 4042},
		{"unknown key", option(nil, "not_a_real_option", kindString, []byte("x")), 4041},
		{"partitions_count as an option", option(nil, "partitions_count", kindUint32, u32Bytes(1)), 4041},
		{"max_topic_size below segment_size", option(option(nil, "segment_size", kindUint64, u64Bytes(1<<21)), "max_topic_size", kindUint64, u64Bytes(1<<20)), 1019},
		{"a truncated block", option(nil, "enforce_fsync", kindBool, []byte{1})[:5], 3},
		{"a duplicate key", option(option(nil, "enforce_fsync", kindBool, []byte{1}), "enforce_fsync", kindBool, []byte{0}), 3},
	} {
		r := c.do(opCreateTopic, 302, createTopicBody(streamID, "refused", 1, tc.options))
		if r.status != tc.code {
			t.Errorf("CreateTopic with %s: %v, want status %d", tc.what, r, tc.code)
		}
	}
	c.fails("CreateTopic with 1001 partitions", opCreateTopic, 302, createTopicBody(streamID, "too-many", 1001, nil), 2015)
}

// UpdateTopic (304, op 133): only the three updatable keys, stored verbatim.
func TestUpdateTopicOptions(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	streamID := c.createStream("update")
	h := c.createTopicWith(streamID, "t", 1, nil)
	body := appendName(ids(streamID, h.id), "renamed")
	body = option(body, "compression_algorithm", kindString, []byte("gzip"))
	if payload := c.ok("UpdateTopic", opUpdateTopic, 304, body); len(payload) != 0 {
		t.Fatalf("UpdateTopic payload % x, want empty", payload)
	}
	got, _ := c.getTopic(streamID, h.id)
	if got.name != "renamed" || got.compression != 2 {
		t.Fatalf("after UpdateTopic: name %q compression %d, want renamed and 2", got.name, got.compression)
	}
	if v := got.explicit["compression_algorithm"]; v.kind != kindString || string(v.value) != "gzip" {
		t.Errorf("explicit compression_algorithm %+v, want String gzip", v)
	}
	if _, ok := got.derived["compression_algorithm"]; ok {
		t.Errorf("compression_algorithm still in the derived block after the update")
	}
	body = option(appendName(ids(streamID, h.id), "renamed"), "segment_size", kindUint64, u64Bytes(1<<20))
	c.fails("UpdateTopic of a create-only key", opUpdateTopic, 304, body, 4041)
}
