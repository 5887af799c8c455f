package wire

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

func randUserHeader(r *rand.Rand) UserHeader {
	return UserHeader{
		ID: r.Uint32(), CreatedAtMicros: r.Uint64(), Status: uint8(1 + r.IntN(2)),
		Username: randName(r), Options: randBytes(r, 20),
	}
}

func TestUserRepliesRoundTrip(t *testing.T) {
	t.Run("UserHeader", func(t *testing.T) {
		checkRoundTrip(t, 7, func(r *rand.Rand) *UserHeader {
			h := randUserHeader(r)
			return &h
		})
	})
	t.Run("UserDetails", func(t *testing.T) {
		checkRoundTrip(t, 8, func(r *rand.Rand) *UserDetails {
			u := UserDetails{UserHeader: randUserHeader(r)}
			if r.IntN(2) == 0 {
				u.HasPermissions = true
				u.Permissions = randomPermissions(r)
			}
			return &u
		})
	})
	t.Run("GetUsers", func(t *testing.T) {
		r := rand.New(rand.NewPCG(9, 9))
		for range 200 {
			var want usersBody
			for range 1 + r.IntN(4) {
				want = append(want, randUserHeader(r))
			}
			got, err := AppendUsers(nil, want.Append(nil))
			if err != nil || !sameReply(usersBody(got), want) {
				t.Fatalf("round trip: %v", err)
			}
		}
	})
}

// The permissions tail: "absent" is four zero bytes, "present" is 01 + length +
// block, and the length must frame a valid block exactly.
func TestUserDetailsPermissionsTail(t *testing.T) {
	header := (&UserHeader{ID: 1, Status: 1, Username: []byte("bob")}).Append(nil)
	perms := readGolden(t, "replies/permissions_none.hex")
	withPerms := func(declared uint32, block []byte) []byte {
		b := append(bytes.Clone(header), 1)
		b = appendU32(b, declared)
		return append(b, block...)
	}
	tests := []struct {
		name string
		body []byte
		ok   bool
	}{
		{"absent", append(bytes.Clone(header), 0, 0, 0, 0), true},
		{"absent with garbage", append(bytes.Clone(header), 0, 1, 0, 0), false},
		{"absent cut short", append(bytes.Clone(header), 0), false},
		{"flag 2", append(bytes.Clone(header), 2, 0, 0, 0), false},
		{"present", withPerms(uint32(len(perms)), perms), true},
		{"length too long", withPerms(uint32(len(perms)+1), perms), false},
		{"length too short", withPerms(uint32(len(perms)-1), perms), false},
		{"length huge", withPerms(0xffffffff, perms), false},
		{"no tail", header, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var u UserDetails
			err := u.Decode(tt.body)
			if tt.ok != (err == nil) {
				t.Fatalf("err = %v, want ok %v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidCommand) {
				t.Fatalf("err = %v, want %v", err, ErrInvalidCommand)
			}
		})
	}
}

// The CreateUser reply echoes whatever status byte the client sent, so the decoder
// keeps it rather than refusing it.
func TestUserHeaderKeepsRawStatus(t *testing.T) {
	h := UserHeader{Status: 0, Username: []byte("bob")}
	var got UserHeader
	if err := got.Decode(h.Append(nil)); err != nil || got.Status != 0 {
		t.Fatalf("status %d, err %v", got.Status, err)
	}
}

// The raw-block encoder writes the same bytes as UserDetails.Append.
func TestAppendUserDetailsRaw(t *testing.T) {
	for _, file := range []string{"user_details_permissions.hex", "user_details_no_permissions.hex"} {
		body := readGolden(t, "replies/"+file)
		var u UserDetails
		if err := u.Decode(body); err != nil {
			t.Fatal(err)
		}
		var block []byte
		if u.HasPermissions {
			block = u.Permissions.Append(nil)
		}
		checkGolden(t, "replies/"+file, AppendUserDetailsRaw(nil, &u.UserHeader, block))
	}
}
