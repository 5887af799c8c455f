package wire

import (
	"bytes"
	"errors"
	"testing"
)

func TestCreateUserFlagsAndBlocks(t *testing.T) {
	head := []byte{3, 'b', 'o', 'b', 3, 'p', 'w', 'd', 7} // username, password, status 7
	perms := (&Permissions{Global: GlobalPermissions{ReadUsers: true}}).Append(nil)
	options := reqMust(AppendOption(nil, "k", HeaderString, []byte("v")))
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

	tests := []struct {
		name     string
		body     []byte
		wantErr  bool
		hasPerms bool
		options  []byte
	}{
		{name: "no permissions, no options", body: cat(head, []byte{0})},
		// Only 1 means present: flag 2 is absent and the options block follows.
		{name: "flag 2 is absent", body: cat(head, []byte{2}, options), options: options},
		{name: "permissions then options", body: cat(head, []byte{1}, appendU32(nil, uint32(len(perms))), perms, options), hasPerms: true, options: options},
		{name: "permissions length past the body", body: cat(head, []byte{1, 0xff, 0xff, 0xff, 0xff}), wantErr: true},
		{name: "permissions length 0", body: cat(head, []byte{1, 0, 0, 0, 0}), wantErr: true},
		{name: "permissions block malformed", body: cat(head, []byte{1, 11, 0, 0, 0}, make([]byte, 10), []byte{2}), wantErr: true},
		{name: "options duplicate key", body: cat(head, []byte{0}, options, options), wantErr: true},
		{name: "options garbage", body: cat(head, []byte{0, 9}), wantErr: true},
		{name: "missing flag", body: head, wantErr: true},
		{name: "empty username", body: cat([]byte{0, 3, 'p', 'w', 'd', 1, 0}), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r CreateUser
			err := r.Decode(tt.body)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidCommand) {
					t.Fatalf("err = %v, want %v", err, ErrInvalidCommand)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != 7 || r.HasPermissions != tt.hasPerms || !bytes.Equal(r.Options, tt.options) {
				t.Fatalf("decoded %+v", r)
			}
			if tt.hasPerms {
				var p Permissions
				if err := p.Decode(r.Permissions); err != nil || !p.Global.ReadUsers {
					t.Fatalf("permissions %+v, %v", p, err)
				}
			}
		})
	}
	// The encoder refuses what the decoder would.
	bad := []CreateUser{
		{Username: nil, Password: []byte("p")},
		{Username: []byte("u"), Password: make([]byte, 256)},
		{Username: []byte("u"), HasPermissions: true, Permissions: []byte{1, 2}},
		{Username: []byte("u"), Options: []byte{1}},
		{Username: []byte("u"), Options: append(bytes.Clone(options), options...)},
	}
	for i := range bad {
		if b, err := bad[i].Append([]byte{9}); !errors.Is(err, ErrInvalidCommand) || len(b) != 1 {
			t.Errorf("bad[%d].Append = % x, %v", i, b, err)
		}
	}
}

func TestUpdateUserFlags(t *testing.T) {
	user := []byte{1, 4, 2, 0, 0, 0}
	tests := []struct {
		name        string
		tail        []byte
		wantErr     bool
		hasUsername bool
		username    string
		hasStatus   bool
		status      UserStatus
		optionsLen  int
	}{
		{name: "nothing", tail: []byte{0, 0}},
		{name: "both", tail: []byte{1, 2, 'x', 'y', 1, 2}, hasUsername: true, username: "xy", hasStatus: true, status: 2},
		// Flag 5 reads as absent: no username follows, the next byte is has_status.
		{name: "flag 5 absent", tail: []byte{5, 1, 9}, hasStatus: true, status: 9},
		{name: "status flag 3 absent, options follow", tail: append([]byte{0, 3}, reqMust(AppendOption(nil, "a", HeaderRaw, []byte{1}))...), optionsLen: 12},
		{name: "status flag without status", tail: []byte{0, 1}, wantErr: true},
		{name: "username flag with empty name", tail: []byte{1, 0, 0}, wantErr: true},
		{name: "missing status flag", tail: []byte{0}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r UpdateUser
			err := r.Decode(append(bytes.Clone(user), tt.tail...))
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidCommand) {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.HasUsername != tt.hasUsername || string(r.Username) != tt.username ||
				r.HasStatus != tt.hasStatus || r.Status != tt.status || len(r.Options) != tt.optionsLen {
				t.Fatalf("decoded %+v", r)
			}
		})
	}
}

func TestUpdatePermissionsAndChangePasswordMalformed(t *testing.T) {
	user := []byte{1, 4, 2, 0, 0, 0}
	var up UpdatePermissions
	// has_permissions 0 ends the body: what follows it is ignored.
	if err := up.Decode(append(bytes.Clone(user), 0, 0)); err != nil || up.HasPermissions {
		t.Fatalf("trailing after flag 0: %+v, %v", up, err)
	}
	if err := up.Decode(append(bytes.Clone(user), 7)); err != nil || up.HasPermissions {
		t.Fatalf("flag 7: %+v, %v", up, err)
	}
	var cp ChangePassword
	if err := cp.Decode(append(bytes.Clone(user), 0, 0)); err != nil || len(cp.CurrentPassword) != 0 || len(cp.NewPassword) != 0 {
		t.Fatalf("empty passwords decode (the server refuses them later): %+v, %v", cp, err)
	}
	if err := cp.Decode(append(bytes.Clone(user), 1, 0xff, 0)); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("non-UTF-8 password: %v", err)
	}
	var gu GetUser
	if err := gu.Decode([]byte{3, 4, 2, 0, 0, 0}); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("identifier kind 3: %v", err)
	}
}
