package metadata

import (
	"cmp"
	"slices"

	"github.com/iggy-shard/iggy-shard/wire"
)

// The ops on users, their permissions and their personal access tokens, as Apply
// (apply.go) carries them out.

// Users.

func validUsername(name []byte) bool {
	return len(name) >= UsernameLengthMin && len(name) <= UsernameLengthMax
}

func (s *State) applyCreateUser(a access, h *Header, body []byte, out *Output) wire.ErrorCode {
	var r wire.CreateUser
	if r.Decode(body) != nil {
		return wire.ErrInvalidCommand
	}
	if _, ok := parsePHC(string(r.Password)); !ok {
		// The proposal must carry a hash (ProposeCreateUser): never store what
		// may be a plaintext password.
		return wire.ErrInvalidCommand
	}
	root := h.Client.IsZero()
	switch {
	case root && (h.UserID != RootUserID || r.HasPermissions || r.Status != wire.UserActive):
		return wire.ErrInvalidCommand
	case root && s.users.count > 0:
		// A cluster's root user is created once (ProposeRootUser): a second
		// proposal, from another primary, changes nothing.
		return wire.ErrUserAlreadyExists
	case !root && !a.manageUsers():
		return wire.ErrUnauthorized
	}
	if !validUsername(r.Username) {
		return wire.ErrInvalidUsername
	}
	if code := optionsRefused(r.Options); code != 0 {
		return code
	}
	if _, taken := s.userByName[string(r.Username)]; taken {
		return wire.ErrUserAlreadyExists
	}
	// The root user takes id 0, the lowest free id of a state without users.
	id := s.users.lowestFree()
	if id >= UserIDLimit {
		return wire.ErrUsersLimitReached
	}
	u := &User{
		ID:              uint32(id),
		CreatedAtMicros: h.TimestampMicros,
		Status:          wire.UserActive,
		Username:        string(r.Username),
		PasswordHash:    string(r.Password),
	}
	if r.Status == wire.UserInactive {
		u.Status = wire.UserInactive
	}
	if r.HasPermissions {
		u.Permissions = decodePermissions(r.Permissions)
	}
	s.insertUser(u)
	out.success()
	// The reply echoes the status byte and the permissions block as sent (apache/iggy
	// core/metadata/src/stm/user.rs).
	uh := userHeader(u)
	uh.Status = uint8(r.Status)
	var perms []byte
	if r.HasPermissions {
		perms = r.Permissions
	}
	out.Reply = wire.AppendUserDetailsRaw(out.Reply, &uh, perms)
	return 0
}

// decodePermissions decodes a block the request decoder already validated.
func decodePermissions(block []byte) *wire.Permissions {
	p := new(wire.Permissions)
	if err := p.Decode(block); err != nil {
		panic("metadata: a validated permissions block does not decode: " + err.Error())
	}
	normalizePermissions(p)
	return p
}

func (s *State) applyUpdateUser(a access, body []byte, out *Output) wire.ErrorCode {
	var r wire.UpdateUser
	if r.Decode(body) != nil {
		return wire.ErrInvalidCommand
	}
	if !a.manageUsers() {
		return wire.ErrUnauthorized
	}
	u := s.resolveUser(r.UserID)
	if u == nil {
		return wire.ErrResourceNotFound
	}
	if r.HasUsername {
		if !validUsername(r.Username) {
			return wire.ErrInvalidUsername
		}
		if id, taken := s.userByName[string(r.Username)]; taken && id != u.ID {
			return wire.ErrUserAlreadyExists
		}
	}
	if code := optionsRefused(r.Options); code != 0 {
		return code
	}
	if r.HasUsername {
		delete(s.userByName, u.Username)
		u.Username = string(r.Username)
		s.userByName[u.Username] = u.ID
	}
	// An unknown status byte is ignored, as the reference server does.
	if r.HasStatus && (r.Status == wire.UserActive || r.Status == wire.UserInactive) {
		u.Status = r.Status
	}
	out.success()
	return 0
}

func (s *State) applyDeleteUser(a access, body []byte, out *Output) wire.ErrorCode {
	var r wire.DeleteUser
	if r.Decode(body) != nil {
		return wire.ErrInvalidCommand
	}
	if !a.manageUsers() {
		return wire.ErrUnauthorized
	}
	u := s.resolveUser(r.UserID)
	if u == nil {
		return wire.ErrResourceNotFound
	}
	if u.ID == RootUserID {
		return wire.ErrCannotDeleteUser
	}
	s.removeUser(u)
	out.success()
	return 0
}

func (s *State) applyChangePassword(a access, h *Header, body []byte, out *Output) wire.ErrorCode {
	var r wire.ChangePassword
	if r.Decode(body) != nil {
		return wire.ErrInvalidCommand
	}
	if _, ok := parsePHC(string(r.NewPassword)); !ok {
		return wire.ErrInvalidCommand
	}
	u := s.resolveUser(r.UserID)
	if u == nil {
		return wire.ErrResourceNotFound
	}
	if u.ID != h.UserID && !a.manageUsers() {
		return wire.ErrUnauthorized
	}
	// The proposal carries the hash the server verified the current password
	// against (empty when it did not match). A hash changed in between means the
	// current password the client gave is no longer proven.
	if len(r.CurrentPassword) == 0 || string(r.CurrentPassword) != u.PasswordHash {
		return wire.ErrInvalidCredentials
	}
	u.PasswordHash = string(r.NewPassword)
	out.success()
	return 0
}

func (s *State) applyUpdatePermissions(a access, body []byte, out *Output) wire.ErrorCode {
	var r wire.UpdatePermissions
	if r.Decode(body) != nil {
		return wire.ErrInvalidCommand
	}
	if !a.manageUsers() {
		return wire.ErrUnauthorized
	}
	u := s.resolveUser(r.UserID)
	if u == nil {
		return wire.ErrResourceNotFound
	}
	if u.ID == RootUserID {
		return wire.ErrCannotChangePermissions
	}
	u.Permissions = nil
	if r.HasPermissions {
		u.Permissions = decodePermissions(r.Permissions)
	}
	out.success()
	return 0
}

// Personal access tokens: no grant needed, a user manages its own.

func (s *State) applyCreateToken(h *Header, body []byte, out *Output) wire.ErrorCode {
	p, ok := decodeTokenProposal(body)
	if !ok {
		return wire.ErrInvalidCommand
	}
	u := s.User(h.UserID)
	if u == nil {
		return wire.ErrResourceNotFound
	}
	i, exists := slices.BinarySearchFunc(u.Tokens, string(p.name), func(t Token, name string) int {
		return cmp.Compare(t.Name, name)
	})
	if exists {
		return wire.ErrPersonalAccessTokenAlreadyExists
	}
	if len(u.Tokens) >= PersonalAccessTokensPerUserMax {
		// Admission refuses this with status 52; two creates admitted together
		// can still race past it.
		return wire.ErrPersonalAccessTokensLimitReached
	}
	var expiryAt uint64
	switch {
	case p.expiryUs == 0 || p.expiryUs == wire.TokenExpiryNever:
	case p.expiryUs > ^uint64(0)-h.TimestampMicros:
		return wire.ErrInvalidPersonalAccessTokenExpiry
	default:
		expiryAt = h.TimestampMicros + p.expiryUs
	}
	hash := p.digest
	if _, taken := s.tokenOwner[hash]; taken {
		// Two equal 256-bit random tokens: a broken random source, not a user error.
		return wire.ErrPersonalAccessTokenAlreadyExists
	}
	u.Tokens = slices.Insert(u.Tokens, i, Token{Name: string(p.name), Hash: hash, ExpiryAtMicros: expiryAt})
	s.tokenOwner[hash] = u.ID
	// The token is withheld (see TokenWithheld): Apply never had it.
	out.success()
	return 0
}

func (s *State) applyDeleteToken(h *Header, body []byte, out *Output) wire.ErrorCode {
	var r wire.DeletePersonalAccessToken
	if r.Decode(body) != nil {
		return wire.ErrInvalidCommand
	}
	u := s.User(h.UserID)
	if u == nil {
		return wire.ErrResourceNotFound
	}
	i, exists := slices.BinarySearchFunc(u.Tokens, string(r.Name), func(t Token, name string) int {
		return cmp.Compare(t.Name, name)
	})
	if !exists {
		return wire.ErrResourceNotFound
	}
	delete(s.tokenOwner, u.Tokens[i].Hash)
	u.Tokens = slices.Delete(u.Tokens, i, i+1)
	if len(u.Tokens) == 0 {
		u.Tokens = nil
	}
	out.success()
	return 0
}

// forgetPermissions drops every user's grants on a deleted stream (or on one topic
// of it): ids are reused lowest-free-first, so a grant left behind would silently
// apply to the next stream or topic created with the same id.
func (s *State) forgetPermissions(streamID, topicID uint32, topicOnly bool) {
	for _, u := range s.users.items {
		if u == nil || u.Permissions == nil {
			continue
		}
		streams := u.Permissions.Streams[:0]
		for _, sp := range u.Permissions.Streams {
			if sp.StreamID != streamID {
				streams = append(streams, sp)
				continue
			}
			if !topicOnly {
				continue
			}
			topics := sp.Topics[:0]
			for _, tp := range sp.Topics {
				if tp.TopicID != topicID {
					topics = append(topics, tp)
				}
			}
			sp.Topics = topics
			streams = append(streams, sp)
		}
		u.Permissions.Streams = streams
	}
}
