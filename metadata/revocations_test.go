package metadata

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

func revokeBody(t testing.TB, tokens ...Revocation) []byte {
	t.Helper()
	b, err := AppendRevokeTokens(nil, tokens)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeRevokeTokensRefusesMalformedBodies(t *testing.T) {
	good := revokeBody(t, Revocation{JTI: "a", ExpiryMicros: 7}, Revocation{JTI: "bc", ExpiryMicros: 9})
	u32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	entry := func(expiry uint64, jti []byte) []byte {
		return append(append(binary.LittleEndian.AppendUint64(nil, expiry), byte(len(jti))), jti...)
	}
	cases := []struct {
		name string
		body []byte
	}{
		{"empty", nil},
		{"short count", []byte{1, 0}},
		{"no tokens", u32(0)},
		{"count beyond the bytes", append(u32(3), good[4:]...)},
		{"count above the bound", append(u32(RevokeTokensPerOpMax+1), bytes.Repeat(entry(1, []byte("x")), RevokeTokensPerOpMax+1)...)},
		{"hostile count", u32(0xffffffff)},
		{"trailing byte", append(bytes.Clone(good), 0)},
		{"truncated jti", good[:len(good)-1]},
		{"truncated expiry", append(u32(1), 1, 2, 3)},
		{"empty jti", append(u32(1), entry(1, nil)...)},
		{"jti not UTF-8", append(u32(1), entry(1, []byte{0xff, 0xfe})...)},
	}
	for _, c := range cases {
		if tokens, err := DecodeRevokeTokens(c.body); !errors.Is(err, wire.ErrInvalidCommand) {
			t.Errorf("%s: %v, %v; want ErrInvalidCommand", c.name, tokens, err)
		}
	}
	tokens, err := DecodeRevokeTokens(good)
	if err != nil || len(tokens) != 2 || tokens[1] != (Revocation{JTI: "bc", ExpiryMicros: 9}) {
		t.Fatalf("good body: %v, %v", tokens, err)
	}
}

func TestAppendRevokeTokensRefusesWhatDecodeRefuses(t *testing.T) {
	many := make([]Revocation, RevokeTokensPerOpMax+1)
	for i := range many {
		many[i] = Revocation{JTI: fmt.Sprint(i), ExpiryMicros: 1}
	}
	for name, tokens := range map[string][]Revocation{
		"none":       nil,
		"too many":   many,
		"empty jti":  {{JTI: "", ExpiryMicros: 1}},
		"long jti":   {{JTI: strings.Repeat("j", 256), ExpiryMicros: 1}},
		"not UTF-8":  {{JTI: "\xff", ExpiryMicros: 1}},
		"second bad": {{JTI: "ok", ExpiryMicros: 1}, {JTI: "", ExpiryMicros: 1}},
	} {
		if b, err := AppendRevokeTokens([]byte{9}, tokens); !errors.Is(err, wire.ErrInvalidCommand) || !bytes.Equal(b, []byte{9}) {
			t.Errorf("%s: %x, %v", name, b, err)
		}
	}
	if _, err := AppendRevokeTokens(nil, many[:RevokeTokensPerOpMax]); err != nil {
		t.Fatalf("the bound itself: %v", err)
	}
}

// FuzzDecodeRevokeTokens: any body decodes to tokens that encode back to exactly
// it, or is refused with ErrInvalidCommand; never a panic.
func FuzzDecodeRevokeTokens(f *testing.F) {
	f.Add(revokeBody(f, Revocation{JTI: "019388a2-7c00-7000-8000-000000000001", ExpiryMicros: 1_700_003_665_000_000}))
	f.Add(revokeBody(f, Revocation{JTI: "a", ExpiryMicros: 0}, Revocation{JTI: "a", ExpiryMicros: 1}, Revocation{JTI: "é", ExpiryMicros: ^uint64(0)}))
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{1, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, body []byte) {
		tokens, err := DecodeRevokeTokens(body)
		if err != nil {
			if !errors.Is(err, wire.ErrInvalidCommand) {
				t.Fatalf("error %v", err)
			}
			return
		}
		again, err := AppendRevokeTokens(nil, tokens)
		if err != nil || !bytes.Equal(again, body) {
			t.Fatalf("decoded %v re-encodes to %x (%v)", tokens, again, err)
		}
	})
}

func TestRevokeTokensApply(t *testing.T) {
	f := newFixture(t)
	at := func() uint64 { return f.ts } // the last applied op's timestamp
	f.must(wire.OperationCreateStream, root, createStream("s"))
	now := at()
	f.must(wire.OperationRevokeTokens, root, revokeBody(t,
		Revocation{JTI: "live", ExpiryMicros: now + 10_000_000},
		Revocation{JTI: "gone", ExpiryMicros: now}, // expired at the op's own time
	))
	opAt := at()
	if f.out.Operation != wire.OperationRevokeTokens || len(f.out.Effects) != 0 {
		t.Fatalf("output %+v", f.out)
	}
	if !f.s.TokenRevoked("live", opAt) || f.s.TokenRevoked("gone", opAt) || f.s.TokenRevoked("other", opAt) {
		t.Fatal("revoked set after apply")
	}
	// The query's clock, not the table's pruning, decides for the bearer check.
	if f.s.TokenRevoked("live", now+10_000_000) || !f.s.TokenRevoked("live", now+10_000_000-1) {
		t.Fatal("revoked at its expiry")
	}
	// Revoked again with an earlier expiry: the later one stands; with a later
	// one, it moves.
	f.must(wire.OperationRevokeTokens, root, revokeBody(t, Revocation{JTI: "live", ExpiryMicros: now + 5_000_000}))
	if !f.s.TokenRevoked("live", now+9_000_000) {
		t.Fatal("an earlier expiry shortened a revocation")
	}
	f.must(wire.OperationRevokeTokens, root, revokeBody(t, Revocation{JTI: "live", ExpiryMicros: now + 20_000_000}))
	if !f.s.TokenRevoked("live", now+15_000_000) || f.s.RevokedTokens().Len() != 1 {
		t.Fatal("a later expiry did not extend the revocation")
	}
	// Any op applied at or after the expiry takes the entry out (the fixture's
	// clock moves a second an op).
	for f.ts < now+20_000_000 {
		if f.s.RevokedTokens().Len() != 1 {
			t.Fatalf("entry gone at %d, before its expiry", f.ts)
		}
		f.apply(wire.OperationCreateStream, root, createStream("s")) // a refusal is an op too
	}
	if f.s.RevokedTokens().Len() != 0 {
		t.Fatal("an expired entry stayed")
	}
	// A malformed body commits as a refusal that changes nothing.
	if code := f.apply(wire.OperationRevokeTokens, root, []byte{1, 0, 0, 0}); code != wire.ErrInvalidCommand {
		t.Fatalf("malformed body: %v", code)
	}
}

// TestRevokedTokensBound fills the table to its bound with ops of the most tokens
// one may name, is refused past it (all or nothing, the entries already held
// unchanged), and crosses it three times as the tokens expire, at the production
// constants.
func TestRevokedTokensBound(t *testing.T) {
	if testing.Short() {
		t.Skip("fills the table three times")
	}
	f := newFixture(t)
	const lifetime = 3_665_000_000
	next := 0
	batch := func(n int, expiry uint64) []Revocation {
		tokens := make([]Revocation, n)
		for i := range tokens {
			tokens[i] = Revocation{JTI: fmt.Sprintf("%08d-jti", next), ExpiryMicros: expiry}
			next++
		}
		return tokens
	}
	for round := range 3 {
		start := f.ts
		for f.s.RevokedTokens().Len()+RevokeTokensPerOpMax <= RevokedTokensMax {
			f.must(wire.OperationRevokeTokens, root, revokeBody(t, batch(RevokeTokensPerOpMax, f.ts+1_000_000+lifetime)...))
		}
		if n := f.s.RevokedTokens().Len(); n != RevokedTokensMax {
			t.Fatalf("round %d: filled to %d", round, n)
		}
		// Full: one new token more is refused, and nothing of its op is added;
		// one held already is not new.
		held := batch(1, f.ts+1_000_000+lifetime)[0]
		full := revokeBody(t, Revocation{JTI: "held-" + held.JTI, ExpiryMicros: held.ExpiryMicros})
		if code := f.apply(wire.OperationRevokeTokens, root, full); code != RevokedTokensFullCode {
			t.Fatalf("round %d: past the bound: %v", round, code)
		}
		if f.s.TokenRevoked("held-"+held.JTI, f.ts) || f.s.RevokedTokens().Len() != RevokedTokensMax {
			t.Fatalf("round %d: a refused op added an entry", round)
		}
		var first Revocation
		for r := range f.s.RevokedTokens().All() {
			first = r
			break
		}
		f.must(wire.OperationRevokeTokens, root, revokeBody(t, first))
		// Expired (a prepare an hour later), the entries leave, and the table
		// takes new ones.
		f.ts = start + 2*lifetime
		f.must(wire.OperationCreateStream, root, createStream(fmt.Sprint("after-", round)))
		if n := f.s.RevokedTokens().Len(); n != 0 {
			t.Fatalf("round %d: %d entries left after every one expired", round, n)
		}
	}
}

func TestRevocationTableClone(t *testing.T) {
	var rt RevocationTable
	for i := range 100 {
		rt.Revoke([]Revocation{{JTI: fmt.Sprint("j", i%37), ExpiryMicros: uint64(1000 + i*7%50)}}, uint64(i))
	}
	c := rt.Clone()
	checkRevocations(t, &rt)
	checkRevocations(t, &c)
	var a, b []Revocation
	for r := range rt.All() {
		a = append(a, r)
	}
	for r := range c.All() {
		b = append(b, r)
	}
	if fmt.Sprint(a) != fmt.Sprint(b) || len(a) == 0 {
		t.Fatalf("clone %v of %v", b, a)
	}
	c.Prune(^uint64(0))
	if c.Len() != 0 || rt.Len() != len(a) {
		t.Fatal("clone shares its entries")
	}
}

// TestRevocationTableAgainstAModel drives a table and a plain map with the same
// random ops (one to five tokens, from twenty jtis, named twice, held, extended,
// shortened or expired already, as the clock moves) and compares them after each.
func TestRevocationTableAgainstAModel(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 0xBEEF))
		var table RevocationTable
		model := map[string]uint64{}
		now := uint64(1000)
		for step := range 2000 {
			now += r.Uint64N(20)
			tokens := make([]Revocation, 1+r.IntN(5))
			for i := range tokens {
				tokens[i] = Revocation{JTI: fmt.Sprint("j", r.IntN(20)), ExpiryMicros: now - 10 + r.Uint64N(200)}
			}
			if code := table.Revoke(tokens, now); code != 0 {
				t.Fatalf("seed %d step %d: %v", seed, step, code)
			}
			for jti, expiry := range model {
				if expiry <= now {
					delete(model, jti)
				}
			}
			for _, tok := range tokens {
				if tok.ExpiryMicros > now {
					model[tok.JTI] = max(model[tok.JTI], tok.ExpiryMicros)
				}
			}
			checkRevocations(t, &table)
			if table.Len() != len(model) {
				t.Fatalf("seed %d step %d: %d entries, model %d", seed, step, table.Len(), len(model))
			}
			for jti, expiry := range model {
				if table.byJTI[jti] != expiry || !table.Revoked(jti, now) || table.Revoked(jti, expiry) {
					t.Fatalf("seed %d step %d: %s until %d, model %d", seed, step, jti, table.byJTI[jti], expiry)
				}
			}
			if c := table.Clone(); !c.Equal(&table) {
				t.Fatalf("seed %d step %d: the clone differs", seed, step)
			}
		}
	}
}
