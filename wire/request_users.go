package wire

// User request bodies:
//
//	GetUser (31), DeleteUser (34)  [user_id Identifier]
//	CreateUser (33)                [username Name][password_len u8][password]
//	                               [status u8][has_permissions u8]
//	                               ([permissions_len u32][permissions], only when 1)
//	                               [options block to end]
//	UpdateUser (35)                [user_id Identifier]
//	                               [has_username u8]([username Name], only when 1)
//	                               [has_status u8]([status u8], only when 1)
//	                               [options block to end]
//	UpdatePermissions (36)         [user_id Identifier][has_permissions u8]
//	                               ([permissions_len u32][permissions], only when 1)
//	ChangePassword (37)            [user_id Identifier]
//	                               [current_len u8][current][new_len u8][new]
//
// A presence flag means "present" only when it is 1; any other value reads as
// absent and its field is not on the wire, as the reference server reads it. The
// permissions bytes are validated in place (Permissions.Decode turns them into a
// value when the apply step needs one). Status values other than 1 (active) and 2
// (inactive) are carried verbatim: the server stores them as active and echoes the
// raw byte in the CreateUser reply.

// UserStatus is the status byte of CreateUser and UpdateUser.
type UserStatus uint8

// User statuses.
const (
	UserActive   UserStatus = 1
	UserInactive UserStatus = 2
)

// GetUser (31).
type GetUser struct {
	UserID Identifier
}

// Decode reads the body.
func (r *GetUser) Decode(body []byte) error { return decodeIdentifierBody(body, &r.UserID) }

// Append encodes r.
func (r *GetUser) Append(b []byte) ([]byte, error) { return r.UserID.Append(b) }

// DeleteUser (34).
type DeleteUser struct {
	UserID Identifier
}

// Decode reads the body.
func (r *DeleteUser) Decode(body []byte) error { return decodeIdentifierBody(body, &r.UserID) }

// Append encodes r.
func (r *DeleteUser) Append(b []byte) ([]byte, error) { return r.UserID.Append(b) }

// CreateUser (33). Permissions is an encoded Permissions block (see
// Permissions.Append); it is on the wire only when HasPermissions.
type CreateUser struct {
	Username       []byte
	Password       []byte
	Status         UserStatus
	HasPermissions bool
	Permissions    []byte
	Options        []byte
}

// Decode reads the body.
func (r *CreateUser) Decode(body []byte) error {
	d := newDecoder(body)
	r.Username = d.name()
	r.Password = d.shortString()
	r.Status = UserStatus(d.u8())
	r.HasPermissions, r.Permissions = d.optionalPermissions()
	r.Options = d.optionsBlock()
	return d.end()
}

// Append encodes r.
func (r *CreateUser) Append(b []byte) ([]byte, error) {
	e := encoder{b: b}
	e.name(r.Username)
	e.shortString(r.Password)
	e.u8(uint8(r.Status))
	e.optionalPermissions(r.HasPermissions, r.Permissions)
	e.optionsBlock(r.Options)
	return e.finish(b)
}

// UpdateUser (35): a patch; absent fields and option keys are left alone.
type UpdateUser struct {
	UserID      Identifier
	HasUsername bool
	Username    []byte
	HasStatus   bool
	Status      UserStatus
	Options     []byte
}

// Decode reads the body.
func (r *UpdateUser) Decode(body []byte) error {
	d := newDecoder(body)
	r.UserID = d.identifier()
	r.HasUsername, r.Username = d.u8() == 1, nil
	if r.HasUsername {
		r.Username = d.name()
	}
	r.HasStatus, r.Status = d.u8() == 1, 0
	if r.HasStatus {
		r.Status = UserStatus(d.u8())
	}
	r.Options = d.optionsBlock()
	return d.end()
}

// Append encodes r.
func (r *UpdateUser) Append(b []byte) ([]byte, error) {
	e := encoder{b: b}
	e.identifier(r.UserID)
	e.flag(r.HasUsername)
	if r.HasUsername {
		e.name(r.Username)
	}
	e.flag(r.HasStatus)
	if r.HasStatus {
		e.u8(uint8(r.Status))
	}
	e.optionsBlock(r.Options)
	return e.finish(b)
}

// UpdatePermissions (36). Without permissions the body ends at the flag and the
// user's permissions are cleared.
type UpdatePermissions struct {
	UserID         Identifier
	HasPermissions bool
	Permissions    []byte
}

// Decode reads the body.
func (r *UpdatePermissions) Decode(body []byte) error {
	d := newDecoder(body)
	r.UserID = d.identifier()
	r.HasPermissions, r.Permissions = d.optionalPermissions()
	return d.endIgnoringTrailing()
}

// Append encodes r.
func (r *UpdatePermissions) Append(b []byte) ([]byte, error) {
	e := encoder{b: b}
	e.identifier(r.UserID)
	e.optionalPermissions(r.HasPermissions, r.Permissions)
	return e.finish(b)
}

// ChangePassword (37).
type ChangePassword struct {
	UserID          Identifier
	CurrentPassword []byte
	NewPassword     []byte
}

// Decode reads the body.
func (r *ChangePassword) Decode(body []byte) error {
	d := newDecoder(body)
	r.UserID = d.identifier()
	r.CurrentPassword = d.shortString()
	r.NewPassword = d.shortString()
	return d.endIgnoringTrailing()
}

// Append encodes r.
func (r *ChangePassword) Append(b []byte) ([]byte, error) {
	e := encoder{b: b}
	e.identifier(r.UserID)
	e.shortString(r.CurrentPassword)
	e.shortString(r.NewPassword)
	return e.finish(b)
}

// optionalPermissions reads [has u8]([len u32][block]) and validates the block's
// structure without building it.
func (d *decoder) optionalPermissions() (bool, []byte) {
	if d.u8() != 1 {
		return false, nil
	}
	n := d.u32()
	if d.err != nil {
		return false, nil
	}
	if uint64(n) > uint64(d.remaining()) {
		d.fail(ErrInvalidCommand)
		return false, nil
	}
	block := d.take(int(n))
	if _, _, err := walkPermissions(block, nil, nil); err != nil {
		d.fail(err)
		return false, nil
	}
	return true, block
}

func (e *encoder) optionalPermissions(has bool, block []byte) {
	if !has {
		e.u8(0)
		return
	}
	if _, _, err := walkPermissions(block, nil, nil); err != nil {
		e.fail(err)
		return
	}
	e.u8(1)
	e.u32(uint32(len(block)))
	e.bytes(block)
}

// decodeIdentifierBody reads a body that is exactly one Identifier.
func decodeIdentifierBody(body []byte, id *Identifier) error {
	d := newDecoder(body)
	*id = d.identifier()
	return d.endIgnoringTrailing()
}
