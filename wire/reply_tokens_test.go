package wire

import (
	"math/rand/v2"
	"testing"
)

func TestTokenRepliesRoundTrip(t *testing.T) {
	t.Run("PatEntry", func(t *testing.T) {
		checkRoundTrip(t, 17, func(r *rand.Rand) *PatEntry {
			return &PatEntry{Name: randName(r), ExpiryAtMicros: r.Uint64()}
		})
	})
	t.Run("CreatedToken", func(t *testing.T) {
		checkRoundTrip(t, 18, func(r *rand.Rand) *CreatedToken {
			return &CreatedToken{Token: randName(r)}
		})
	})
	t.Run("GetPersonalAccessTokens", func(t *testing.T) {
		r := rand.New(rand.NewPCG(19, 19))
		for range 200 {
			var want patsBody
			for range r.IntN(4) {
				want = append(want, PatEntry{Name: randName(r), ExpiryAtMicros: r.Uint64()})
			}
			got, err := AppendPersonalAccessTokens(nil, want.Append(nil))
			if err != nil || !sameReply(patsBody(got), want) {
				t.Fatalf("round trip: %v", err)
			}
		}
	})
}

// A token is a Name: it can be neither empty nor longer than 255 bytes.
func TestCreatedTokenIsAName(t *testing.T) {
	var tok CreatedToken
	if err := tok.Decode([]byte{0}); err == nil {
		t.Fatal("an empty token was accepted")
	}
}
