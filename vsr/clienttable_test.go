package vsr

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// reply builds a committed reply frame the way the server caches it: a reply header
// with op and request set, plus a body.
func reply(op, request uint64, body string) []byte {
	var h wire.ReplyHeader
	h.Command = wire.CommandReply
	h.Size = uint32(wire.HeaderSize + len(body))
	h.Op, h.Commit, h.Request = op, op, request
	b := make([]byte, wire.HeaderSize, int(h.Size))
	h.Put(b)
	return append(b, body...)
}

func TestClientTablePreflight(t *testing.T) {
	c := wire.Uint128{Lo: 1, Hi: 2}
	sum := func(x uint64) wire.Uint128 { return wire.Uint128{Lo: x} }
	tab := NewClientTable(4)

	if v, _ := tab.Preflight(c, 0, 1, wire.Uint128{}); v != PreflightNoSession {
		t.Fatalf("unregistered client: %v", v)
	}
	epoch := tab.CommitRegister(c, 5, 10, reply(10, 0, "login"))
	if epoch != 10 {
		t.Fatalf("epoch %d, want the register's commit op 10", epoch)
	}
	tab.CommitRequest(c, 3, sum(33), 11, reply(11, 3, "three"))

	cases := []struct {
		name     string
		session  uint64
		request  uint64
		checksum wire.Uint128
		want     Preflight
		reply    string
	}{
		{"zombie session", 9, 4, sum(0), PreflightSessionTooLow, ""},
		{"session never handed out", 11, 4, sum(0), PreflightSessionTooHigh, ""},
		{"new request", 10, 4, sum(44), PreflightExecute, ""},
		{"gap is fine", 10, 400, sum(0), PreflightExecute, ""},
		{"retry of the watermark", 10, 3, sum(33), PreflightReplay, "three"},
		{"retry without checksum", 10, 3, sum(0), PreflightReplay, "three"},
		{"watermark reused with other arguments", 10, 3, sum(34), PreflightConflict, ""},
		{"old request, reply gone", 10, 2, sum(0), PreflightAlreadyApplied, ""},
	}
	for _, tc := range cases {
		v, r := tab.Preflight(c, tc.session, tc.request, tc.checksum)
		if v != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, v, tc.want)
			continue
		}
		if tc.reply != "" && !bytes.HasSuffix(r, []byte(tc.reply)) {
			t.Errorf("%s: replayed %q", tc.name, r)
		}
	}

	tab.Admit(c)
	if v, _ := tab.Preflight(c, 10, 4, sum(0)); v != PreflightInFlight {
		t.Fatalf("second request while one is in flight: %v", v)
	}
	tab.Abandon(c)
	if v, _ := tab.Preflight(c, 10, 4, sum(0)); v != PreflightExecute {
		t.Fatalf("after abandon: %v", v)
	}

	// Re-registering fences the old epoch and keeps the watermark.
	if epoch := tab.CommitRegister(c, 6, 12, reply(12, 0, "login2")); epoch != 12 {
		t.Fatalf("rebind epoch %d", epoch)
	}
	if v, _ := tab.Preflight(c, 10, 4, sum(0)); v != PreflightSessionTooLow {
		t.Fatalf("old epoch after rebind: %v", v)
	}
	if v, _ := tab.Preflight(c, 12, 3, sum(33)); v != PreflightReplay {
		t.Fatalf("watermark after rebind: %v", v)
	}
	if _, user, _ := tab.Session(c); user != 6 {
		t.Fatalf("rebind kept user %d", user)
	}

	if !tab.Remove(c) || tab.Remove(c) {
		t.Fatal("remove")
	}
	if v, _ := tab.Preflight(c, 12, 5, sum(0)); v != PreflightNoSession {
		t.Fatalf("after logout: %v", v)
	}
}

func TestClientTableReplyRing(t *testing.T) {
	c := wire.Uint128{Lo: 9}
	tab := NewClientTable(2)
	tab.CommitRegister(c, 0, 1, reply(1, 0, "login"))
	for req := uint64(1); req <= 8; req++ {
		tab.CommitRequest(c, req, wire.Uint128{}, 1+req, reply(1+req, req, "r"))
	}
	// The ring keeps the five newest; older ones answer RequestAlreadyApplied.
	for req := uint64(1); req <= 8; req++ {
		v, _ := tab.Preflight(c, 1, req, wire.Uint128{})
		want := PreflightReplay
		if req <= 3 {
			want = PreflightAlreadyApplied
		}
		if v != want {
			t.Errorf("request %d: %v, want %v", req, v, want)
		}
	}
	// A lower commit or request than what is recorded is skipped.
	tab.CommitRequest(c, 2, wire.Uint128{}, 100, reply(100, 2, "stale"))
	if v, _ := tab.Preflight(c, 1, 9, wire.Uint128{}); v != PreflightExecute {
		t.Fatalf("after a stale commit: %v", v)
	}
}

func TestClientTableEvictsLeastRecentlyCommitted(t *testing.T) {
	tab := NewClientTable(3)
	a, b, c, d := wire.Uint128{Lo: 1}, wire.Uint128{Lo: 2}, wire.Uint128{Lo: 3}, wire.Uint128{Lo: 4}
	tab.CommitRegister(a, 0, 1, reply(1, 0, ""))
	tab.CommitRegister(b, 0, 2, reply(2, 0, ""))
	tab.CommitRegister(c, 0, 3, reply(3, 0, ""))
	tab.CommitRequest(a, 1, wire.Uint128{}, 4, reply(4, 1, "")) // a is now the most recent
	tab.Admit(b)                                                // b is in flight: never evicted
	tab.CommitRegister(d, 0, 5, reply(5, 0, ""))
	if _, _, ok := tab.Session(c); ok {
		t.Fatal("c (oldest commit, not in flight) should have been evicted")
	}
	for _, k := range []wire.Uint128{a, b, d} {
		if _, _, ok := tab.Session(k); !ok {
			t.Fatalf("client %v evicted", k)
		}
	}
	if tab.Len() != 3 {
		t.Fatalf("len %d", tab.Len())
	}
}

func filledTable() *ClientTable {
	tab := NewClientTable(16)
	for i := uint64(1); i <= 5; i++ {
		c := wire.Uint128{Lo: i * 1000, Hi: i}
		tab.CommitRegister(c, uint32(i), i*10, reply(i*10, 0, "login"))
		for req := uint64(1); req <= i; req++ {
			tab.CommitRequest(c, req, wire.Uint128{Lo: req}, i*10+req, reply(i*10+req, req, "body"))
		}
	}
	return tab
}

func TestICT2RoundTrip(t *testing.T) {
	tab := filledTable()
	enc := tab.AppendICT2(nil)
	if string(enc[:4]) != "ICT2" || binary.LittleEndian.Uint32(enc[4:]) != 5 {
		t.Fatalf("prefix % x", enc[:8])
	}
	back, err := DecodeICT2(enc, 16)
	if err != nil {
		t.Fatal(err)
	}
	if again := back.AppendICT2(nil); !bytes.Equal(again, enc) {
		t.Fatal("ICT2 decode/encode is not the identity")
	}
	c := wire.Uint128{Lo: 3000, Hi: 3}
	if v, r := back.Preflight(c, 30, 3, wire.Uint128{Lo: 3}); v != PreflightReplay || !bytes.HasSuffix(r, []byte("body")) {
		t.Fatalf("restored table: %v", v)
	}
	if _, err := DecodeICT2(enc, 4); err == nil {
		t.Fatal("decoded 5 clients into a table of 4")
	}
}

func TestICT2RejectsEveryCorruption(t *testing.T) {
	enc := filledTable().AppendICT2(nil)
	for i := range enc {
		bad := bytes.Clone(enc)
		bad[i] ^= 0x40
		if _, err := DecodeICT2(bad, 16); !errors.Is(err, ErrClientTableCorrupt) {
			t.Fatalf("flip at byte %d accepted (%v)", i, err)
		}
	}
	for n := 0; n < len(enc); n++ {
		if _, err := DecodeICT2(enc[:n], 16); err == nil {
			t.Fatalf("truncation to %d bytes accepted", n)
		}
	}
}

func FuzzDecodeICT2(f *testing.F) {
	f.Add(filledTable().AppendICT2(nil))
	f.Add(NewClientTable(2).AppendICT2(nil))
	withLogout := filledTable()
	withLogout.CommitLogout(wire.Uint128{Lo: 1000, Hi: 1}, 2, wire.Uint128{Lo: 2}, reply(20, 2, ""))
	f.Add(withLogout.AppendICT2(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		tab, err := DecodeICT2(b, 64)
		if err != nil {
			return
		}
		if again := tab.AppendICT2(nil); !bytes.Equal(again, b) {
			t.Fatalf("accepted bytes that do not re-encode identically")
		}
	})
}
