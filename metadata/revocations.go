package metadata

import (
	"cmp"
	"encoding/binary"
	"iter"
	"maps"
	"slices"
	"unicode/utf8"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Revoked access tokens. An HTTP logout revokes its bearer on every node: the
// node proposes a RevokeTokens op (70) naming the token's id (its JWT jti) and
// the instant it stops being accepted anyway (its exp plus the verifier's leeway
// and a margin for the nodes' clocks), and every replica keeps the entry until
// then. Time is an input: entries carry their own instants, and Apply drops the
// expired ones at the timestamp of the prepare it applies, never by a clock, so
// every replica holds the same table at every op.
//
//	RevokeTokens (70)  [count u32] ([expiry_us u64][jti Name])*  count 1..RevokeTokensPerOpMax
//
// The table is bounded (RevokedTokensMax). A RevokeTokens op whose new entries
// would take it past the bound commits as a refusal (RevokedTokensFullCode) and
// adds nothing: the logout is answered with an error and its token stays valid
// until it expires, which its holder is told, rather than a revocation silently
// lost. The bound: at the default lifetime of an access token (an hour; the entry
// lives its lifetime, 5 s of leeway and a minute of margin, 3,665 s), 65,536
// entries hold the logouts of about 17.9 per second sustained for an hour, far
// above what people at a web console or scripts that log in and out cause. In
// memory an entry of a 36-byte jti takes about 127 bytes (8.3 MB at the bound,
// in every copy of the state: shard 0's, each shard's view, the HTTP checks'
// copy); in a snapshot 45 (2.9 MB).
// Tokens that never expire (access_token_expiry "none") keep their entries for
// their 31 years: each logout of one takes a slot for good.

const (
	// RevokedTokensMax bounds the revoked tokens the state holds.
	RevokedTokensMax = 65_536
	// RevokeTokensPerOpMax bounds the tokens one RevokeTokens op names.
	RevokeTokensPerOpMax = 1024
	// RevokedTokensFullCode is the result a RevokeTokens op commits with when its
	// new entries do not fit under RevokedTokensMax. Iggy has no code for it (the
	// reference keeps no revocations), and the op is internal, so the number
	// reaches no client: the plane answers it as metaplane.ErrRevokedTokensFull,
	// which the HTTP layer renders as its own error.
	RevokedTokensFullCode = wire.ErrFeatureUnavailable

	revocationMinBytes = 8 + 2
)

// Revocation is one revoked access token: its id (a JWT's jti, 1..255 bytes of
// UTF-8) and the instant, in unix microseconds, from which it is no longer
// accepted anyway: the entry leaves the table then.
type Revocation struct {
	JTI          string
	ExpiryMicros uint64
}

// AppendRevokeTokens is the body of a RevokeTokens op: [count u32] then
// [expiry_us u64][jti Name] per token. It refuses, with wire.ErrInvalidCommand,
// no tokens, more than RevokeTokensPerOpMax, and a jti that is empty, longer
// than 255 bytes or not UTF-8.
func AppendRevokeTokens(dst []byte, tokens []Revocation) ([]byte, error) {
	if len(tokens) == 0 || len(tokens) > RevokeTokensPerOpMax {
		return dst, wire.ErrInvalidCommand
	}
	b := binary.LittleEndian.AppendUint32(dst, uint32(len(tokens)))
	for _, t := range tokens {
		if !validJTI(t.JTI) {
			return dst, wire.ErrInvalidCommand
		}
		b = appendU64(b, t.ExpiryMicros)
		b = appendName(b, t.JTI)
	}
	return b, nil
}

// DecodeRevokeTokens reads a RevokeTokens body. A body that is truncated, has
// trailing bytes, names no token or more than RevokeTokensPerOpMax, or a jti
// that is empty or not UTF-8, is wire.ErrInvalidCommand.
func DecodeRevokeTokens(body []byte) ([]Revocation, error) {
	r := newReader(body)
	n := r.count(revocationMinBytes)
	if !r.ok || n == 0 || n > RevokeTokensPerOpMax {
		return nil, wire.ErrInvalidCommand
	}
	tokens := make([]Revocation, n)
	for i := range tokens {
		tokens[i].ExpiryMicros = r.u64()
		tokens[i].JTI = string(r.name())
	}
	if !r.done() {
		return nil, wire.ErrInvalidCommand
	}
	return tokens, nil
}

func validJTI(jti string) bool {
	return len(jti) >= 1 && len(jti) <= 255 && utf8.ValidString(jti)
}

// RevocationTable is a set of revoked tokens, each until its expiry: the state's
// (State.TokenRevoked), and the copies a server keeps for readers on other
// goroutines (metaplane.RevokedTokens), which apply the same ops the same way.
// The zero value is an empty table.
type RevocationTable struct {
	byJTI map[string]uint64
	// byExpiry holds the live entries from head on, in (expiry, jti) order: the
	// next to expire first, and the snapshot's order.
	byExpiry []Revocation
	head     int
}

// Len is the number of entries held.
func (t *RevocationTable) Len() int { return len(t.byJTI) }

// Revoked reports whether jti is revoked at nowMicros: an entry holds it and
// has not expired.
func (t *RevocationTable) Revoked(jti string, nowMicros uint64) bool {
	expiry, ok := t.byJTI[jti]
	return ok && expiry > nowMicros
}

// All yields the entries in (expiry, jti) order.
func (t *RevocationTable) All() iter.Seq[Revocation] {
	return func(yield func(Revocation) bool) {
		for _, r := range t.byExpiry[t.head:] {
			if !yield(r) {
				return
			}
		}
	}
}

// Prune drops the entries expired at nowMicros (expiry at or before it).
func (t *RevocationTable) Prune(nowMicros uint64) {
	live := t.byExpiry[t.head:]
	k, _ := slices.BinarySearchFunc(live, nowMicros, func(r Revocation, now uint64) int {
		if r.ExpiryMicros <= now {
			return -1
		}
		return 1
	})
	for _, r := range live[:k] {
		delete(t.byJTI, r.JTI)
	}
	clear(live[:k]) // let the strings go
	t.head += k
	if t.head > 0 && t.head >= len(t.byExpiry)/2 {
		// Compact once the dead prefix is half the slice: amortised O(1) a prune.
		n := copy(t.byExpiry, t.byExpiry[t.head:])
		clear(t.byExpiry[n:])
		t.byExpiry, t.head = t.byExpiry[:n], 0
	}
}

// Revoke applies a RevokeTokens op's tokens at nowMicros, all or none: those
// already expired are skipped, one already held keeps the later expiry, and if
// the new entries would take the table past RevokedTokensMax nothing is added
// and it returns RevokedTokensFullCode. Expired entries are pruned first.
func (t *RevocationTable) Revoke(tokens []Revocation, nowMicros uint64) wire.ErrorCode {
	t.Prune(nowMicros)
	// The op's entries, one per jti at its latest expiry, that add to the table
	// or extend an entry.
	var changes map[string]uint64
	added := 0
	for _, r := range tokens {
		if r.ExpiryMicros <= nowMicros {
			continue
		}
		if prev, ok := changes[r.JTI]; ok {
			changes[r.JTI] = max(prev, r.ExpiryMicros)
			continue
		}
		held, ok := t.byJTI[r.JTI]
		if ok && held >= r.ExpiryMicros {
			continue
		}
		if !ok {
			added++
		}
		if changes == nil {
			changes = make(map[string]uint64, len(tokens))
		}
		changes[r.JTI] = r.ExpiryMicros
	}
	if t.Len()+added > RevokedTokensMax {
		return RevokedTokensFullCode
	}
	if len(changes) == 1 {
		for jti, expiry := range changes {
			t.put(Revocation{JTI: jti, ExpiryMicros: expiry})
		}
		return 0
	}
	// Many at once: drop the entries they extend, then merge the new ones, in
	// order, into the live ones: O(n + k log k) rather than k inserts.
	adds := make([]Revocation, 0, len(changes))
	extended := false
	for jti, expiry := range changes {
		adds = append(adds, Revocation{JTI: jti, ExpiryMicros: expiry})
		if _, held := t.byJTI[jti]; held {
			extended = true
		}
	}
	slices.SortFunc(adds, compareRevocations)
	live := t.byExpiry[t.head:]
	if extended {
		live = slices.DeleteFunc(slices.Clone(live), func(r Revocation) bool {
			_, changed := changes[r.JTI]
			return changed
		})
	}
	merged := make([]Revocation, 0, len(live)+len(adds))
	i, k := 0, 0
	for i < len(live) && k < len(adds) {
		if compareRevocations(live[i], adds[k]) < 0 {
			merged = append(merged, live[i])
			i++
		} else {
			merged = append(merged, adds[k])
			k++
		}
	}
	merged = append(append(merged, live[i:]...), adds[k:]...)
	if t.byJTI == nil {
		t.byJTI = make(map[string]uint64, len(adds))
	}
	for _, r := range adds {
		t.byJTI[r.JTI] = r.ExpiryMicros
	}
	t.byExpiry, t.head = merged, 0
	return 0
}

// put holds r, or extends the expiry of the entry of its jti to r's if later.
func (t *RevocationTable) put(r Revocation) {
	if t.byJTI == nil {
		t.byJTI = make(map[string]uint64)
	}
	if old, held := t.byJTI[r.JTI]; held {
		if old >= r.ExpiryMicros {
			return
		}
		i, found := slices.BinarySearchFunc(t.byExpiry[t.head:], Revocation{JTI: r.JTI, ExpiryMicros: old}, compareRevocations)
		if !found {
			panic("metadata: a revoked token's entry is missing from the expiry order")
		}
		t.byExpiry = slices.Delete(t.byExpiry, t.head+i, t.head+i+1)
	}
	t.byJTI[r.JTI] = r.ExpiryMicros
	// Tokens are revoked in about the order they were issued, so the new entry
	// usually goes at the end.
	live := t.byExpiry[t.head:]
	if n := len(live); n == 0 || compareRevocations(live[n-1], r) < 0 {
		t.byExpiry = append(t.byExpiry, r)
		return
	}
	i, _ := slices.BinarySearchFunc(live, r, compareRevocations)
	t.byExpiry = slices.Insert(t.byExpiry, t.head+i, r)
}

func compareRevocations(a, b Revocation) int {
	if c := cmp.Compare(a.ExpiryMicros, b.ExpiryMicros); c != 0 {
		return c
	}
	return cmp.Compare(a.JTI, b.JTI)
}

// Clone is a copy of the table that shares nothing with it.
func (t *RevocationTable) Clone() RevocationTable {
	return RevocationTable{byJTI: maps.Clone(t.byJTI), byExpiry: slices.Clone(t.byExpiry[t.head:])}
}

// Equal reports whether u holds exactly t's entries.
func (t *RevocationTable) Equal(u *RevocationTable) bool {
	return slices.Equal(t.byExpiry[t.head:], u.byExpiry[u.head:])
}

// TokenRevoked reports whether the access token jti is revoked at nowMicros (a
// bearer check's clock): a RevokeTokens op named it and its expiry is later.
func (s *State) TokenRevoked(jti string, nowMicros uint64) bool {
	return s.revoked.Revoked(jti, nowMicros)
}

// RevokedTokens is the table of revoked tokens (read it, never change it).
func (s *State) RevokedTokens() *RevocationTable { return &s.revoked }

// applyRevokeTokens applies a RevokeTokens op at the prepare's timestamp.
func (s *State) applyRevokeTokens(h *Header, body []byte, out *Output) wire.ErrorCode {
	tokens, err := DecodeRevokeTokens(body)
	if err != nil {
		return wire.ErrInvalidCommand
	}
	if code := s.revoked.Revoke(tokens, h.TimestampMicros); code != 0 {
		return code
	}
	out.Reply = wire.AppendResultSuccess(out.Reply)
	return 0
}

// appendRevocations is the snapshot's revocation section (version 2).
func (s *State) appendRevocations(b []byte) []byte {
	b = appendU32(b, uint32(s.revoked.Len()))
	for r := range s.revoked.All() {
		b = appendU64(b, r.ExpiryMicros)
		b = appendName(b, r.JTI)
	}
	return b
}

// decodeRevocations reads the snapshot's revocation section: at most
// RevokedTokensMax entries, in strictly ascending (expiry, jti) order, each jti
// once.
func (s *State) decodeRevocations(r *reader) error {
	n := r.count(revocationMinBytes)
	if n > RevokedTokensMax {
		return corrupt("too many revoked tokens")
	}
	var prev Revocation
	for i := range n {
		e := Revocation{ExpiryMicros: r.u64()}
		e.JTI = string(r.name())
		if !r.ok {
			return corrupt("truncated revoked token")
		}
		if i > 0 && compareRevocations(prev, e) >= 0 {
			return corrupt("revoked tokens out of order")
		}
		if _, dup := s.revoked.byJTI[e.JTI]; dup {
			return corrupt("duplicate revoked token")
		}
		s.revoked.put(e)
		prev = e
	}
	return nil
}
