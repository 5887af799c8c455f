package metadata

import (
	"crypto/subtle"
	"encoding/base64"
	"strconv"
	"strings"

	"golang.org/x/crypto/argon2"
	"lukechampine.com/blake3"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Credentials are checked outside Apply. Password hashing is salted (so it is not
// deterministic) and slow on purpose, and token generation needs randomness, so the
// server does both before it proposes an operation and the operation carries the
// result: CreateUser and ChangePassword carry argon2id PHC strings, and
// CreatePersonalAccessToken carries the fresh token, of which Apply keeps only the
// BLAKE3 digest.

// Argon2id parameters: the OWASP minimum for argon2id (19 MiB, 2 passes, 1 lane),
// which is also what the reference server's argon2 defaults amount to. Verification
// accepts other parameters within the bounds below, so they can be raised later
// without invalidating stored hashes.
const (
	argon2MemoryKiB   = 19 * 1024
	argon2Iterations  = 2
	argon2Parallelism = 1
	argon2KeyBytes    = 32
	// PasswordSaltBytes is the salt size HashPassword expects.
	PasswordSaltBytes = 16

	// A stored hash names its own cost; these bound it so a corrupt or hostile hash
	// cannot make a login allocate gigabytes or spin for minutes.
	argon2MemoryKiBMax   = 256 * 1024
	argon2IterationsMax  = 16
	argon2ParallelismMax = 16
)

var b64 = base64.RawStdEncoding

// HashPassword returns the argon2id PHC string of password with salt (which must be
// PasswordSaltBytes random bytes; the caller draws them so that this function stays
// deterministic):
//
//	$argon2id$v=19$m=19456,t=2,p=1$<salt, base64>$<key, base64>
func HashPassword(password, salt []byte) string {
	key := argon2.IDKey(password, salt, argon2Iterations, argon2MemoryKiB, argon2Parallelism, argon2KeyBytes)
	return "$argon2id$v=" + strconv.Itoa(argon2.Version) +
		"$m=" + strconv.Itoa(argon2MemoryKiB) + ",t=" + strconv.Itoa(argon2Iterations) +
		",p=" + strconv.Itoa(argon2Parallelism) +
		"$" + b64.EncodeToString(salt) + "$" + b64.EncodeToString(key)
}

// VerifyPassword reports whether password matches the PHC string phc. A malformed
// string, or one whose cost is out of bounds, matches nothing.
func VerifyPassword(phc string, password []byte) bool {
	p, ok := parsePHC(phc)
	if !ok {
		return false
	}
	key := argon2.IDKey(password, p.salt, p.iterations, p.memoryKiB, p.parallelism, uint32(len(p.key)))
	return subtle.ConstantTimeCompare(key, p.key) == 1
}

type phcParams struct {
	memoryKiB, iterations uint32
	parallelism           uint8
	salt, key             []byte
}

func parsePHC(phc string) (phcParams, bool) {
	// "", "argon2id", "v=19", "m=..,t=..,p=..", salt, key
	parts := strings.Split(phc, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" ||
		parts[2] != "v="+strconv.Itoa(argon2.Version) {
		return phcParams{}, false
	}
	var p phcParams
	params := strings.Split(parts[3], ",")
	if len(params) != 3 {
		return phcParams{}, false
	}
	m, okM := phcNumber(params[0], "m=", argon2MemoryKiBMax)
	t, okT := phcNumber(params[1], "t=", argon2IterationsMax)
	l, okP := phcNumber(params[2], "p=", argon2ParallelismMax)
	if !okM || !okT || !okP || t == 0 || l == 0 || m < 8*l {
		return phcParams{}, false
	}
	p.memoryKiB, p.iterations, p.parallelism = m, t, uint8(l)
	var err error
	if p.salt, err = b64.DecodeString(parts[4]); err != nil || len(p.salt) < 8 {
		return phcParams{}, false
	}
	if p.key, err = b64.DecodeString(parts[5]); err != nil || len(p.key) < 16 || len(p.key) > 64 {
		return phcParams{}, false
	}
	return p, true
}

func phcNumber(s, prefix string, limit uint64) (uint32, bool) {
	if !strings.HasPrefix(s, prefix) {
		return 0, false
	}
	v, err := strconv.ParseUint(s[len(prefix):], 10, 32)
	if err != nil || v > limit {
		return 0, false
	}
	return uint32(v), true
}

// TokenSecretBytes is the entropy of a personal access token.
const TokenSecretBytes = 32

// EncodeToken turns TokenSecretBytes random bytes into the token text a client
// receives (base64url without padding, 43 characters, which fits a Name).
func EncodeToken(secret *[TokenSecretBytes]byte) []byte {
	out := make([]byte, base64.RawURLEncoding.EncodedLen(TokenSecretBytes))
	base64.RawURLEncoding.Encode(out, secret[:])
	return out
}

// HashToken is the digest kept for a token. A token is high-entropy random text, so
// a fast hash suffices: no dictionary exists to slow down.
func HashToken(token []byte) TokenHash { return blake3.Sum256(token) }

// UserByName finds an account for a password login: its id, password hash and
// whether it is active.
func (s *State) UserByName(username []byte) (id uint32, passwordHash string, active bool, ok bool) {
	uid, found := s.userByName[string(username)]
	if !found {
		return 0, "", false, false
	}
	u := s.users.items[uid]
	return u.ID, u.PasswordHash, u.Status == wire.UserActive, true
}

// CheckToken resolves a personal access token at nowMicros: the owner's id, or the
// eviction reason for the login (EvictionInvalidToken for an unknown or expired
// token, EvictionUserInactive for an inactive owner).
func (s *State) CheckToken(token []byte, nowMicros uint64) (userID uint32, reason wire.EvictionReason) {
	h := HashToken(token)
	uid, ok := s.tokenOwner[h]
	if !ok {
		return 0, wire.EvictionInvalidToken
	}
	u := s.users.items[uid]
	for i := range u.Tokens {
		t := &u.Tokens[i]
		if t.Hash != h {
			continue
		}
		if t.ExpiryAtMicros != 0 && t.ExpiryAtMicros <= nowMicros {
			return 0, wire.EvictionInvalidToken
		}
		if u.Status != wire.UserActive {
			return 0, wire.EvictionUserInactive
		}
		return u.ID, wire.EvictionReserved
	}
	panic("metadata: token index names a user without the token")
}

// Credentials adapts a State to wire.CredentialChecker for wire.DecideRegister:
// passwords are verified with VerifyPassword (tens of milliseconds of argon2id),
// tokens at NowMicros.
type Credentials struct {
	State     *State
	NowMicros uint64
}

// CheckPassword implements wire.CredentialChecker: a wrong username, a wrong
// password and an inactive user are all a plain refusal (reason 9), as in the
// reference server.
func (c Credentials) CheckPassword(username, password []byte) (uint32, bool) {
	id, hash, active, ok := c.State.UserByName(username)
	if !ok {
		// Spend the same argon2id work as for a real account, so that the answer's
		// timing does not tell which usernames exist.
		VerifyPassword(unknownUserHash, password)
		return 0, false
	}
	if !VerifyPassword(hash, password) || !active {
		return 0, false
	}
	return id, true
}

// PasswordHashToCheck is the hash a login's password is verified against, for a
// caller that verifies off the state's goroutine (VerifyPassword): the user's, or for
// an unknown username a hash of the same cost that nothing matches, so that the
// refusal takes as long as a wrong password does.
func (s *State) PasswordHashToCheck(username []byte) string {
	if _, hash, _, ok := s.UserByName(username); ok {
		return hash
	}
	return unknownUserHash
}

// unknownUserHash is a well-formed hash with the default cost that no password is
// expected to match.
const unknownUserHash = "$argon2id$v=19$m=19456,t=2,p=1$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"

// CheckToken implements wire.CredentialChecker.
func (c Credentials) CheckToken(token []byte) (uint32, wire.EvictionReason) {
	return c.State.CheckToken(token, c.NowMicros)
}
