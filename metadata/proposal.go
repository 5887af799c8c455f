package metadata

import (
	"encoding/binary"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Proposals: what the primary turns a client request into before it prepares it,
// and the admission checks it runs first. Most operations are proposed with the
// client's body unchanged; four carry what only the primary can compute:
//
//	CreateUser (141)                 the client's body, password replaced by its
//	                                 argon2id PHC string
//	ChangePassword (144)             [user Identifier][verified hash u8-len][new hash u8-len]
//	                                 (verified hash empty when the current password
//	                                 did not match)
//	CreatePersonalAccessToken (146)  [name Name][expiry u64][0 u8][token digest 32]
//	RemoveConsumerGroupMember (66)   [client u128], a connection that closed
//	EndSessions (69)                 [count u32] [client u128][epoch u64]..., closed sessions
//	RevokeTokens (70)                [count u32] [expiry_us u64][jti Name]..., logged-out
//	                                 access tokens (revocations.go)
//	CreateUser (141), client id 0    the root user of a cluster (ProposeRootUser)
//
// A personal access token never enters a proposal, the state or a reply that Apply
// builds: only its BLAKE3 digest (HashToken) is journaled, replicated, snapshotted
// and kept, so no file under the data directory holds what logs anyone in. The
// committed reply withholds the token (the success section alone, which is what
// the client table caches); the server that minted it adds it to the reply it sends
// (see TokenWithheld). The zero byte stands where journals written before this
// format carried the token itself, as a Name (never empty); Apply still reads those
// and keeps only their digest.

// ProposeCreateUser turns a CreateUser request body into its proposal: the same
// body with the password replaced by HashPassword(password, salt). It reads no
// state, so it may run on any goroutine.
func ProposeCreateUser(dst, clientBody, salt []byte) ([]byte, error) {
	var r wire.CreateUser
	if err := r.Decode(clientBody); err != nil {
		return dst, err
	}
	r.Password = []byte(HashPassword(r.Password, salt))
	return r.Append(dst)
}

// ProposeRootUser is the proposal that creates a cluster's root user: a CreateUser
// body (active, no permissions block: the root holds every grant by its id) with
// the password replaced by HashPassword(password, salt). The server proposes it
// as root (user id 0) under client id 0, which no client has (a request with
// client id 0 is refused before it is read): Apply creates the root from it on a
// state without users and refuses it on any other, so the root is created once
// whatever proposes it again. It reads no state, so it may run on any goroutine.
func ProposeRootUser(dst []byte, username, password string, salt []byte) ([]byte, error) {
	r := wire.CreateUser{Username: []byte(username), Password: []byte(password), Status: wire.UserActive}
	body, err := r.Append(nil)
	if err != nil {
		return dst, err
	}
	return ProposeCreateUser(dst, body, salt)
}

// ProposeChangePassword turns a ChangePassword request body into its proposal: it
// verifies the current password against the target's stored hash now (an unknown
// target is left for apply to report) and hashes the new one with salt. It is
// ChangePasswordCurrentHash and ProposeChangePasswordWith in one step.
func (s *State) ProposeChangePassword(dst, clientBody, salt []byte) ([]byte, error) {
	currentHash, err := s.ChangePasswordCurrentHash(clientBody)
	if err != nil {
		return dst, err
	}
	return ProposeChangePasswordWith(dst, clientBody, currentHash, salt)
}

// ChangePasswordCurrentHash is the stored hash a ChangePassword request's current
// password is to be verified against: its target's, or "" (which no password
// matches) for an unknown target. A server reads it from the state and leaves the
// slow part, ProposeChangePasswordWith, to another goroutine; the state must not
// change in between (the server runs no other metadata write meanwhile).
func (s *State) ChangePasswordCurrentHash(clientBody []byte) (string, error) {
	var r wire.ChangePassword
	if err := r.Decode(clientBody); err != nil {
		return "", err
	}
	if u := s.resolveUser(r.UserID); u != nil {
		return u.PasswordHash, nil
	}
	return "", nil
}

// ProposeChangePasswordWith is the pure, slow part of ProposeChangePassword: it
// verifies the request's current password against currentHash (from
// ChangePasswordCurrentHash) and hashes the new one with salt, two argon2id runs.
// It reads no state, so it may run on any goroutine.
func ProposeChangePasswordWith(dst, clientBody []byte, currentHash string, salt []byte) ([]byte, error) {
	var r wire.ChangePassword
	if err := r.Decode(clientBody); err != nil {
		return dst, err
	}
	verified := ""
	if currentHash != "" && VerifyPassword(currentHash, r.CurrentPassword) {
		verified = currentHash
	}
	return ProposeChangePasswordVerified(dst, clientBody, verified, salt)
}

// ProposeChangePasswordVerified is ProposeChangePasswordWith for a caller that has
// verified the request's current password against verifiedHash itself (with
// VerifyPassword; "" when it did not match): one argon2id run, the new password's.
// It reads no state, so it may run on any goroutine.
func ProposeChangePasswordVerified(dst, clientBody []byte, verifiedHash string, salt []byte) ([]byte, error) {
	var r wire.ChangePassword
	if err := r.Decode(clientBody); err != nil {
		return dst, err
	}
	p := wire.ChangePassword{
		UserID:          r.UserID,
		CurrentPassword: []byte(verifiedHash),
		NewPassword:     []byte(HashPassword(r.NewPassword, salt)),
	}
	return p.Append(dst)
}

// AuthorizeNewPassword runs, on an admitted CreateUser or ChangePassword request,
// the checks Apply would refuse it with that need no password: a server runs it
// before it spends argon2id work on the request, so that a user who may not
// create users or change another's password cannot make it hash anything. It
// returns 41 Unauthorized (CreateUser without manage_users; ChangePassword of
// another user without it), 43 InvalidUsername and 46 UserAlreadyExists
// (CreateUser), 20 ResourceNotFound (ChangePassword of an unknown user), or 0 to go
// on. Apply checks all of it again against the state it applies to.
func (s *State) AuthorizeNewPassword(op wire.Operation, userID uint32, clientBody []byte) wire.ErrorCode {
	a := s.access(userID)
	switch op {
	case wire.OperationCreateUser:
		var r wire.CreateUser
		if r.Decode(clientBody) != nil {
			return wire.ErrInvalidCommand
		}
		if !a.manageUsers() {
			return wire.ErrUnauthorized
		}
		if !validUsername(r.Username) {
			return wire.ErrInvalidUsername
		}
		if _, taken := s.userByName[string(r.Username)]; taken {
			return wire.ErrUserAlreadyExists
		}
		return 0
	case wire.OperationChangePassword:
		var r wire.ChangePassword
		if r.Decode(clientBody) != nil {
			return wire.ErrInvalidCommand
		}
		u := s.resolveUser(r.UserID)
		if u == nil {
			return wire.ErrResourceNotFound
		}
		if u.ID != userID && !a.manageUsers() {
			return wire.ErrUnauthorized
		}
		return 0
	}
	return wire.ErrInvalidCommand
}

// ProposeCreatePersonalAccessToken turns a CreatePersonalAccessToken request body
// into its proposal, carrying the digest of the token the server minted
// (HashToken(EncodeToken(secret))), never the token.
func ProposeCreatePersonalAccessToken(dst, clientBody []byte, digest TokenHash) ([]byte, error) {
	var r wire.CreatePersonalAccessToken
	if err := r.Decode(clientBody); err != nil {
		return dst, err
	}
	return appendTokenProposal(dst, r.Name, r.ExpiryUs, digest)
}

func appendTokenProposal(dst, name []byte, expiryUs uint64, digest TokenHash) ([]byte, error) {
	b, err := wire.AppendName(dst, name)
	if err != nil {
		return dst, err
	}
	b = appendU64(b, expiryUs)
	b = append(b, 0)
	return append(b, digest[:]...), nil
}

type tokenProposal struct {
	name     []byte
	expiryUs uint64
	digest   TokenHash
}

// decodeTokenProposal reads a token proposal, or one written before the digest
// replaced the token ([name Name][expiry u64][token Name]), whose token it hashes.
func decodeTokenProposal(body []byte) (tokenProposal, bool) {
	r := newReader(body)
	p := tokenProposal{name: r.name(), expiryUs: r.u64()}
	if r.ok && r.off < len(r.buf) && r.buf[r.off] != 0 {
		token := r.name()
		p.digest = HashToken(token)
		return p, r.done()
	}
	r.u8()
	copy(p.digest[:], r.take(len(p.digest)))
	return p, r.done()
}

// TokenWithheld reports whether replyBody, the body of a committed
// CreatePersonalAccessToken's reply, is a success whose token Apply withheld: the
// success section and nothing after it. The minting server appends the token
// (wire.CreatedToken) before it sends such a reply; a server that no longer has the
// token must not send it as it is.
func TokenWithheld(replyBody []byte) bool {
	return len(replyBody) == 4 && replyBody[0]|replyBody[1]|replyBody[2]|replyBody[3] == 0
}

// AppendClientGoneProposal is the body of RemoveConsumerGroupMember (66), which the
// server proposes when a client's connection closes: the client leaves every
// consumer group it was in.
func AppendClientGoneProposal(dst []byte, client wire.Uint128) []byte {
	var b [16]byte
	client.Put(b[:])
	return append(dst, b[:]...)
}

// SessionEnd is a session whose connection closed: its client and epoch.
type SessionEnd struct {
	Client wire.Uint128
	Epoch  uint64
}

// EndSessionsMax bounds the sessions one EndSessions op ends.
const EndSessionsMax = 1024

// AppendEndSessions is the body of EndSessions (69), which the node holding the
// connections proposes when they close: [count u32] then [client u128][epoch u64]
// per session.
func AppendEndSessions(dst []byte, ends []SessionEnd) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(ends)))
	var b [16]byte
	for _, e := range ends {
		e.Client.Put(b[:])
		dst = append(dst, b[:]...)
		dst = binary.LittleEndian.AppendUint64(dst, e.Epoch)
	}
	return dst
}

// DecodeEndSessions reads an EndSessions body: false for one that is malformed,
// empty, or holds more than EndSessionsMax sessions.
func DecodeEndSessions(body []byte) ([]SessionEnd, bool) {
	if len(body) < 4 {
		return nil, false
	}
	n := binary.LittleEndian.Uint32(body)
	if n == 0 || n > EndSessionsMax || uint64(len(body)-4) != uint64(n)*24 {
		return nil, false
	}
	ends := make([]SessionEnd, n)
	for i := range ends {
		b := body[4+24*i:]
		ends[i] = SessionEnd{Client: wire.GetUint128(b), Epoch: binary.LittleEndian.Uint64(b[16:])}
	}
	return ends, true
}

func decodeClientGone(body []byte) (wire.Uint128, bool) {
	r := newReader(body)
	c := r.u128()
	return c, r.done()
}

// Admit runs the pre-commit checks of a metadata write on the client's request body and
// returns the status code to deny it with, or nil to propose it. These are the outcomes
// the reference answers with a status before consensus (apache/iggy
// core/server/src/dispatch.rs): ErrInvalidCommand for a body that does not decode,
// ErrUnsupportedOptionKey, ErrInvalidOptionValue and ErrInvalidTopicSize for option
// blocks, ErrTooManyPartitions for partition counts, and
// ErrPersonalAccessTokensLimitReached. Everything else, authorization included, is
// decided by Apply and committed.
func (s *State) Admit(op wire.Operation, userID uint32, clientBody []byte) error {
	switch op {
	case wire.OperationCreateStream:
		var r wire.CreateStream
		if err := r.Decode(clientBody); err != nil {
			return err
		}
		return refuseAnyOption(r.Options)
	case wire.OperationUpdateStream:
		var r wire.UpdateStream
		if err := r.Decode(clientBody); err != nil {
			return err
		}
		return refuseAnyOption(r.Options)
	case wire.OperationCreateTopic:
		var r wire.CreateTopic
		if err := r.Decode(clientBody); err != nil {
			return err
		}
		_, err := wire.ResolveCreateTopicOptions(r.Options, r.PartitionsCount)
		return err
	case wire.OperationUpdateTopic:
		var r wire.UpdateTopic
		if err := r.Decode(clientBody); err != nil {
			return err
		}
		// The segment size is create-only, so the check made here still holds when
		// the update applies; an unknown topic is left for apply to report.
		var segmentSizeBytes uint64
		if _, t, code := s.resolveTopic(r.StreamID, r.TopicID); code == 0 {
			segmentSizeBytes = t.Options.SegmentSizeBytes
		}
		_, err := wire.CheckTopicUpdate(r.Options, segmentSizeBytes)
		return err
	case wire.OperationCreatePartitions:
		var r wire.CreatePartitions
		if err := r.Decode(clientBody); err != nil {
			return err
		}
		return r.CheckPartitionsCount()
	case wire.OperationDeletePartitions:
		var r wire.DeletePartitions
		if err := r.Decode(clientBody); err != nil {
			return err
		}
		return r.CheckPartitionsCount()
	case wire.OperationCreateUser:
		var r wire.CreateUser
		if err := r.Decode(clientBody); err != nil {
			return err
		}
		return refuseAnyOption(r.Options)
	case wire.OperationUpdateUser:
		var r wire.UpdateUser
		if err := r.Decode(clientBody); err != nil {
			return err
		}
		return refuseAnyOption(r.Options)
	case wire.OperationCreatePersonalAccessToken:
		var r wire.CreatePersonalAccessToken
		if err := r.Decode(clientBody); err != nil {
			return err
		}
		if u := s.User(userID); u != nil && len(u.Tokens) >= PersonalAccessTokensPerUserMax {
			return wire.ErrPersonalAccessTokensLimitReached
		}
		return nil
	case wire.OperationDeleteStream, wire.OperationPurgeStream:
		return (&wire.DeleteStream{}).Decode(clientBody)
	case wire.OperationDeleteTopic, wire.OperationPurgeTopic:
		return (&wire.DeleteTopic{}).Decode(clientBody)
	case wire.OperationDeleteSegments:
		return (&wire.DeleteSegments{}).Decode(clientBody)
	case wire.OperationCreateConsumerGroup:
		return (&wire.CreateConsumerGroup{}).Decode(clientBody)
	case wire.OperationDeleteConsumerGroup, wire.OperationJoinConsumerGroup, wire.OperationLeaveConsumerGroup:
		return (&wire.DeleteConsumerGroup{}).Decode(clientBody)
	case wire.OperationDeleteUser:
		return (&wire.DeleteUser{}).Decode(clientBody)
	case wire.OperationChangePassword:
		return (&wire.ChangePassword{}).Decode(clientBody)
	case wire.OperationUpdatePermissions:
		return (&wire.UpdatePermissions{}).Decode(clientBody)
	case wire.OperationDeletePersonalAccessToken:
		return (&wire.DeletePersonalAccessToken{}).Decode(clientBody)
	}
	return wire.ErrInvalidCommand
}

// refuseAnyOption checks the block of a scope with an empty catalog: a malformed
// block is ErrInvalidCommand, any key ErrUnsupportedOptionKey.
func refuseAnyOption(block []byte) error {
	pairs, err := wire.ValidateOptions(block)
	if err != nil {
		return err
	}
	if pairs > 0 {
		return wire.ErrUnsupportedOptionKey
	}
	return nil
}
