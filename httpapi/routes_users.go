package httpapi

import (
	"encoding/json"
	"sort"

	"github.com/iggy-shard/iggy-shard/jsonview"
	"github.com/iggy-shard/iggy-shard/wire"
)

// The users and personal access tokens routes (apache/iggy
// core/server/src/http/users.rs, personal_access_tokens.rs).

// userStatus is "active" or "inactive"; other text is the wrong shape (422).
type userStatus wire.UserStatus

func (s *userStatus) UnmarshalJSON(b []byte) error {
	var v string
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch v {
	case "active":
		*s = userStatus(wire.UserActive)
	case "inactive":
		*s = userStatus(wire.UserInactive)
	default:
		return &shapeError{"status: unknown variant `" + v + "`, expected `active` or `inactive`"}
	}
	return nil
}

// permissionsBlock encodes optional permissions as the binary requests carry them.
func permissionsBlock(p *permissionsJSON) (bool, []byte) {
	if p == nil {
		return false, nil
	}
	w := p.wire()
	return true, w.Append(nil)
}

// optionsBlock encodes a JSON options object (string to string) as an options
// TLV block of string values; the command's admission judges the keys.
func optionsBlock(m map[string]string) ([]byte, error) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b []byte
	for _, k := range keys {
		var err error
		if b, err = wire.AppendOption(b, k, wire.HeaderString, []byte(m[k])); err != nil {
			return nil, wire.ErrInvalidOptionValue
		}
	}
	return b, nil
}

func getUsers(rc *reqCtx) error {
	reply, err := rc.doEmpty(wire.CodeGetUsers)
	if err != nil {
		return err
	}
	users, err := wire.AppendUsers(nil, reply)
	if err != nil {
		return err
	}
	out := make([]jsonview.User, len(users))
	for i := range users {
		out[i] = jsonview.UserOf(&users[i])
	}
	return rc.json(out)
}

// userDetails answers a UserDetails reply; an empty one is a read miss.
func (rc *reqCtx) userDetails(reply []byte) error {
	if len(reply) == 0 {
		return errNotFound
	}
	var u wire.UserDetails
	if err := u.Decode(reply); err != nil {
		return err
	}
	return rc.json(jsonview.UserDetailsOf(&u))
}

type createUserBody struct {
	Username    *string          `json:"username"`
	Password    *string          `json:"password"`
	Status      *userStatus      `json:"status"`
	Permissions *permissionsJSON `json:"permissions"`
}

func (b *createUserBody) check() error {
	switch {
	case b.Username == nil:
		return &shapeError{"missing field `username`"}
	case b.Password == nil:
		return &shapeError{"missing field `password`"}
	case b.Status == nil:
		return &shapeError{"missing field `status`"}
	case b.Permissions != nil:
		return b.Permissions.check()
	}
	return nil
}

func createUser(rc *reqCtx) error {
	var b createUserBody
	if err := rc.decodeJSON(&b); err != nil {
		return err
	}
	if n := len(*b.Username); n < 3 || n > 50 {
		return wire.ErrInvalidUsername
	}
	if n := len(*b.Password); n < 3 || n > 100 {
		return wire.ErrInvalidPassword
	}
	req := wire.CreateUser{Username: []byte(*b.Username), Password: []byte(*b.Password), Status: wire.UserStatus(*b.Status)}
	req.HasPermissions, req.Permissions = permissionsBlock(b.Permissions)
	reply, err := rc.do(wire.CodeCreateUser, &req)
	if err != nil {
		return err
	}
	return rc.userDetails(reply)
}

// userID reads {user_id}; "me" is the caller on GET (apache/iggy
// core/server/src/http/users.rs).
func (rc *reqCtx) userID(meAllowed bool) (wire.Identifier, error) {
	if meAllowed && rc.path("user_id") == "me" {
		return wire.NumericIdentifier(rc.caller.UserID), nil
	}
	return rc.identifier("user_id")
}

func getUser(rc *reqCtx) error {
	id, err := rc.userID(true)
	if err != nil {
		return err
	}
	reply, err := rc.do(wire.CodeGetUser, &wire.GetUser{UserID: id})
	if err != nil {
		return err
	}
	return rc.userDetails(reply)
}

type updateUserBody struct {
	Username *string           `json:"username"`
	Status   *userStatus       `json:"status"`
	Options  map[string]string `json:"options"`
}

func updateUser(rc *reqCtx) error {
	id, err := rc.userID(false)
	if err != nil {
		return err
	}
	var b updateUserBody
	if err := rc.decodeJSON(&b); err != nil {
		return err
	}
	req := wire.UpdateUser{UserID: id}
	if b.Username != nil {
		if n := len(*b.Username); n < 3 || n > 50 {
			return wire.ErrInvalidUsername
		}
		req.HasUsername, req.Username = true, []byte(*b.Username)
	}
	if b.Status != nil {
		req.HasStatus, req.Status = true, wire.UserStatus(*b.Status)
	}
	if req.Options, err = optionsBlock(b.Options); err != nil {
		return err
	}
	if _, err := rc.do(wire.CodeUpdateUser, &req); err != nil {
		return err
	}
	return rc.noContent()
}

func deleteUser(rc *reqCtx) error {
	id, err := rc.userID(false)
	if err != nil {
		return err
	}
	if _, err := rc.do(wire.CodeDeleteUser, &wire.DeleteUser{UserID: id}); err != nil {
		return err
	}
	return rc.noContent()
}

type changePasswordBody struct {
	CurrentPassword *string `json:"current_password"`
	NewPassword     *string `json:"new_password"`
}

func (b *changePasswordBody) check() error {
	if b.CurrentPassword == nil {
		return &shapeError{"missing field `current_password`"}
	}
	if b.NewPassword == nil {
		return &shapeError{"missing field `new_password`"}
	}
	return nil
}

func changePassword(rc *reqCtx) error {
	id, err := rc.userID(false)
	if err != nil {
		return err
	}
	var b changePasswordBody
	if err := rc.decodeJSON(&b); err != nil {
		return err
	}
	for _, p := range []string{*b.CurrentPassword, *b.NewPassword} {
		if n := len(p); n < 3 || n > 100 {
			return wire.ErrInvalidPassword
		}
	}
	req := wire.ChangePassword{UserID: id, CurrentPassword: []byte(*b.CurrentPassword), NewPassword: []byte(*b.NewPassword)}
	if _, err := rc.do(wire.CodeChangePassword, &req); err != nil {
		return err
	}
	return rc.noContent()
}

type updatePermissionsBody struct {
	Permissions *permissionsJSON `json:"permissions"`
}

func (b *updatePermissionsBody) check() error {
	if b.Permissions != nil {
		return b.Permissions.check()
	}
	return nil
}

func updatePermissions(rc *reqCtx) error {
	id, err := rc.userID(false)
	if err != nil {
		return err
	}
	var b updatePermissionsBody
	if err := rc.decodeJSON(&b); err != nil {
		return err
	}
	req := wire.UpdatePermissions{UserID: id}
	req.HasPermissions, req.Permissions = permissionsBlock(b.Permissions)
	if _, err := rc.do(wire.CodeUpdatePermissions, &req); err != nil {
		return err
	}
	return rc.noContent()
}

func getPATs(rc *reqCtx) error {
	reply, err := rc.doEmpty(wire.CodeGetPersonalAccessTokens)
	if err != nil {
		return err
	}
	pats, err := wire.AppendPersonalAccessTokens(nil, reply)
	if err != nil {
		return err
	}
	out := make([]jsonview.PersonalAccessToken, len(pats))
	for i := range pats {
		out[i] = jsonview.PersonalAccessTokenOf(&pats[i])
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return rc.json(out)
}

type createPATBody struct {
	Name   *string `json:"name"`
	Expiry *uint64 `json:"expiry"`
}

func (b *createPATBody) check() error {
	if b.Name == nil {
		return &shapeError{"missing field `name`"}
	}
	if b.Expiry == nil {
		return &shapeError{"missing field `expiry`"}
	}
	return nil
}

func createPAT(rc *reqCtx) error {
	var b createPATBody
	if err := rc.decodeJSON(&b); err != nil {
		return err
	}
	if n := len(*b.Name); n < 3 || n > 30 {
		return wire.ErrInvalidPersonalAccessTokenName
	}
	reply, err := rc.do(wire.CodeCreatePersonalAccessToken, &wire.CreatePersonalAccessToken{Name: []byte(*b.Name), ExpiryUs: *b.Expiry})
	if err != nil {
		return err
	}
	var t wire.CreatedToken
	if err := t.Decode(reply); err != nil {
		return err
	}
	return rc.json(createdTokenJSON{Token: string(t.Token)})
}

func deletePAT(rc *reqCtx) error {
	name := rc.path("name")
	if len(name) == 0 || len(name) > 255 {
		return wire.ErrInvalidPersonalAccessTokenName
	}
	if _, err := rc.do(wire.CodeDeletePersonalAccessToken, &wire.DeletePersonalAccessToken{Name: []byte(name)}); err != nil {
		return err
	}
	return rc.noContent()
}
