package wire

import "encoding/binary"

// UserHeader is one user in GetUsers and the head of UserDetails (apache/iggy
// core/binary_protocol/src/responses/users/), 18 + N + M bytes:
//
//	+----+------------+--------+-----+----------+-------------+---------+
//	| id | created_at | status | N   | username | options_len | options |
//	| u32| u64 µs     | u8     | u8  | N bytes  | u32 (M)     | M bytes |
//	+----+------------+--------+-----+----------+-------------+---------+
//
// Status is 1 active or 2 inactive. The decoder keeps whatever byte arrives: the
// CreateUser reply echoes the client's raw status byte, which may be neither.
type UserHeader struct {
	ID              uint32
	CreatedAtMicros uint64
	Status          uint8
	Username        []byte
	// Options is the client-explicit options TLV block without its length prefix
	// (always empty today: users have no options).
	Options []byte
}

// EncodedLen is the exact number of bytes Append writes.
func (h *UserHeader) EncodedLen() int { return 18 + len(h.Username) + len(h.Options) }

// Append encodes h onto b.
func (h *UserHeader) Append(b []byte) []byte {
	b = appendU32(b, h.ID)
	b = appendU64(b, h.CreatedAtMicros)
	b = appendU8(b, h.Status)
	b = appendReplyName(b, h.Username)
	return appendBlock32(b, h.Options)
}

func (h *UserHeader) decodeFrom(d *decoder) {
	h.ID = d.u32()
	h.CreatedAtMicros = d.u64()
	h.Status = d.u8()
	h.Username = d.name()
	h.Options = d.block32()
}

// Decode reads a body that holds exactly one UserHeader.
func (h *UserHeader) Decode(body []byte) error { return decodeExact(h, body) }

// IterUsers walks a GetUsers body: UserHeaders back to back, no count.
func IterUsers(body []byte) ListIter[UserHeader, *UserHeader] {
	return newUncountedIter[UserHeader](body)
}

// AppendUsers decodes a GetUsers body onto dst.
func AppendUsers(dst []UserHeader, body []byte) ([]UserHeader, error) {
	return collect(dst, IterUsers(body))
}

// AppendUsersReply encodes a GetUsers body: the headers back to back.
func AppendUsersReply(b []byte, users []UserHeader) []byte {
	for i := range users {
		b = users[i].Append(b)
	}
	return b
}

// UserDetails is the GetUser reply and the CreateUser success payload (apache/iggy
// core/binary_protocol/src/responses/users/): a UserHeader and a permissions tail,
//
//	no permissions:   00 00 00 00                    (4 bytes, not 1)
//	with permissions: 01 [perm_len u32][Permissions]
type UserDetails struct {
	UserHeader
	HasPermissions bool
	Permissions    Permissions
}

// EncodedLen is the exact number of bytes Append writes.
func (u *UserDetails) EncodedLen() int {
	if !u.HasPermissions {
		return u.UserHeader.EncodedLen() + 4
	}
	return u.UserHeader.EncodedLen() + 1 + 4 + u.Permissions.EncodedLen()
}

// Append encodes u onto b.
func (u *UserDetails) Append(b []byte) []byte {
	b = u.UserHeader.Append(b)
	if !u.HasPermissions {
		return appendU32(b, 0)
	}
	b = appendU8(b, 1)
	lenAt := len(b)
	b = appendU32(b, 0)
	b = u.Permissions.Append(b)
	binary.LittleEndian.PutUint32(b[lenAt:], uint32(len(b)-lenAt-4))
	return b
}

// Decode reads a GetUser body (or a CreateUser payload). An empty body is the
// server's "user not found" and decodes as ErrResourceNotFound, as the Go SDK
// reports it. The absent-permissions tail must be four zero bytes.
func (u *UserDetails) Decode(body []byte) error {
	if len(body) == 0 {
		return ErrResourceNotFound
	}
	d := newDecoder(body)
	var h UserHeader
	h.decodeFrom(&d)
	var perms Permissions
	hasPermissions := false
	switch flag := d.u8(); {
	case d.err != nil:
	case flag == 0:
		if z := d.take(3); z != nil && (z[0]|z[1]|z[2]) != 0 {
			d.fail(ErrInvalidCommand)
		}
	case flag == 1:
		hasPermissions = true
		block := d.block32()
		if d.err == nil {
			if err := perms.Decode(block); err != nil {
				d.fail(err)
			}
		}
	default:
		d.fail(ErrInvalidCommand)
	}
	if err := d.end(); err != nil {
		return err
	}
	*u = UserDetails{UserHeader: h, HasPermissions: hasPermissions, Permissions: perms}
	return nil
}

// AppendUserDetailsRaw encodes a UserDetails body whose permissions are an encoded
// Permissions block kept as bytes (as CreateUser and UpdatePermissions requests carry
// it), so a server can echo the client's block byte for byte without decoding it. A
// nil block writes the 4-byte "no permissions" tail. The block must be valid (the
// request decoders check it); a server stores only validated blocks.
func AppendUserDetailsRaw(b []byte, h *UserHeader, permissions []byte) []byte {
	b = h.Append(b)
	if permissions == nil {
		return appendU32(b, 0)
	}
	b = appendU8(b, 1)
	return appendBlock32(b, permissions)
}
