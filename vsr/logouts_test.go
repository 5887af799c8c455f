package vsr

import (
	"bytes"
	"errors"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// TestClientTableLogoutReplayedUntilForgotten: a committed Logout is replayed,
// in its session and by its request number only, until LoggedOutMax later
// Logouts have pushed it out; the record is crossed three times over at its
// bound and never grows past it, and its ICT2 encoding round-trips.
func TestClientTableLogoutReplayedUntilForgotten(t *testing.T) {
	tab := NewClientTable(4)
	client := func(i int) wire.Uint128 { return wire.Uint128{Lo: uint64(i) + 1, Hi: 7} }
	sum := wire.Uint128{Lo: 99}
	op := uint64(0)
	const logouts = 3 * LoggedOutMax
	epochs := make([]uint64, logouts)
	for i := range logouts {
		op++
		epochs[i] = tab.CommitRegister(client(i), 1, op, reply(op, 0, "login"))
		op++
		if !tab.CommitLogout(client(i), 1, sum, reply(op, 1, "")) {
			t.Fatalf("logout %d: no entry", i)
		}
		if tab.Len() != 0 || tab.LoggedOutLen() != min(i+1, LoggedOutMax) {
			t.Fatalf("after logout %d: %d entries, %d logouts kept", i, tab.Len(), tab.LoggedOutLen())
		}
		if v, r := tab.Preflight(client(i), epochs[i], 1, sum); v != PreflightReplay || !bytes.Equal(r, reply(op, 1, "")) {
			t.Fatalf("the replay of logout %d: %v", i, v)
		}
		if oldest := i - LoggedOutMax + 1; oldest >= 0 {
			if v, _ := tab.Preflight(client(oldest), epochs[oldest], 1, sum); v != PreflightReplay {
				t.Fatalf("logout %d, %d logouts back, forgotten early: %v", oldest, LoggedOutMax-1, v)
			}
		}
		if gone := i - LoggedOutMax; gone >= 0 {
			if v, _ := tab.Preflight(client(gone), epochs[gone], 1, sum); v != PreflightNoSession {
				t.Fatalf("logout %d, %d logouts back, still kept: %v", gone, LoggedOutMax, v)
			}
		}
	}
	last := logouts - 1
	for _, c := range []struct {
		name     string
		session  uint64
		request  uint64
		checksum wire.Uint128
		want     Preflight
	}{
		{"another session", epochs[last] + 1, 1, sum, PreflightNoSession},
		{"another request", epochs[last], 2, sum, PreflightNoSession},
		{"other arguments", epochs[last], 1, wire.Uint128{Lo: 1}, PreflightConflict},
		{"no checksum", epochs[last], 1, wire.Uint128{}, PreflightReplay},
	} {
		if v, _ := tab.Preflight(client(last), c.session, c.request, c.checksum); v != c.want {
			t.Fatalf("%s: %v, want %v", c.name, v, c.want)
		}
	}
	if _, ok := tab.LoggedOutReply(client(last), 1); !ok {
		t.Fatal("the last logout's reply is not kept")
	}

	enc := tab.AppendICT2(nil)
	back, err := DecodeICT2(enc, 4)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.AppendICT2(nil), enc) {
		t.Fatal("ICT2 with logouts: decode/encode is not the identity")
	}
	if v, _ := back.Preflight(client(last), epochs[last], 1, sum); v != PreflightReplay {
		t.Fatalf("the restored table's replay: %v", v)
	}

	// The client registers again: its session is live, the record gone.
	op++
	epoch := tab.CommitRegister(client(last), 1, op, reply(op, 0, "login"))
	if _, ok := tab.LoggedOutReply(client(last), 1); ok || tab.LoggedOutLen() != LoggedOutMax-1 {
		t.Fatalf("a registered client's logout kept (%d kept)", tab.LoggedOutLen())
	}
	if v, _ := tab.Preflight(client(last), epoch, 1, sum); v != PreflightExecute {
		t.Fatalf("the new session's first request: %v", v)
	}
	// A session ended otherwise (Remove: its connection closed) is no logout.
	tab.Remove(client(last))
	if v, _ := tab.Preflight(client(last), epoch, 1, sum); v != PreflightNoSession {
		t.Fatalf("a session ended otherwise: %v", v)
	}
}

// TestICT2WithoutLogoutsIsUnchanged: a table that keeps no logout encodes as
// before the logouts section existed; one that does is refused when corrupt.
func TestICT2WithoutLogoutsIsUnchanged(t *testing.T) {
	tab := filledTable()
	before := tab.AppendICT2(nil)
	c := wire.Uint128{Lo: 6000, Hi: 6}
	tab.CommitRegister(c, 6, 100, reply(100, 0, "login"))
	tab.Remove(c)
	if !bytes.Equal(tab.AppendICT2(nil), before) {
		t.Fatal("a table without logouts encodes otherwise")
	}
	tab.CommitRegister(c, 6, 101, reply(101, 0, "login"))
	tab.CommitLogout(c, 1, wire.Uint128{}, reply(102, 1, ""))
	enc := tab.AppendICT2(nil)
	for i := range enc {
		bad := bytes.Clone(enc)
		bad[i] ^= 0x40
		if _, err := DecodeICT2(bad, 16); !errors.Is(err, ErrClientTableCorrupt) {
			t.Fatalf("flip at byte %d accepted (%v)", i, err)
		}
	}
}
