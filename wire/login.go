package wire

import "unicode/utf8"

// The two register bodies (operation 1) and the login reply:
//
//	LOGIN_REGISTER (40)           [ClientVersionInfo]
//	                              [username Name][password_len u8][password]
//	                              [context_len u32][context]
//	LOGIN_REGISTER_WITH_PAT (45)  [ClientVersionInfo]
//	                              [token_len u8][token]
//	                              [context_len u32][context]
//	LoginRegisterReply            [user_id u32][session u64]
//	                              [server_protocol_version u32][server_version Name]
//
// The reply travels behind a success result section ([0 u32]), which AppendResult*
// writes. Password, token and context are UTF-8 and may be empty on the wire.
//
// A Register request header carries no command code (the Go SDK leaves bytes
// 196..200 zero), so the server cannot tell the two shapes apart by code: it tries
// the password shape, then the token shape, as DecodeRegisterBody does.

// Credential lengths the reference server accepts at login. A username or password
// outside them is answered as a wrong password (eviction reason 9).
const (
	LoginUsernameLengthMin = 3
	LoginUsernameLengthMax = 50
	LoginPasswordLengthMin = 3
	LoginPasswordLengthMax = 100
)

const secretLengthMax = 255

// LoginRegister is the body of LOGIN_REGISTER (40). Fields alias the body.
type LoginRegister struct {
	Version  ClientVersionInfo
	Username []byte
	Password []byte
	Context  []byte
}

// CredentialsInRange reports whether username and password lengths are within the
// login bounds; the server answers reason 9 (InvalidCredentials) when they are not.
func (r *LoginRegister) CredentialsInRange() bool {
	return len(r.Username) >= LoginUsernameLengthMin && len(r.Username) <= LoginUsernameLengthMax &&
		len(r.Password) >= LoginPasswordLengthMin && len(r.Password) <= LoginPasswordLengthMax
}

// Append encodes r; ErrInvalidCommand when a field cannot be represented (username
// not a Name, password over 255 bytes, a field not UTF-8).
func (r *LoginRegister) Append(b []byte) ([]byte, error) {
	e := encoder{b: b}
	e.clientVersionInfo(&r.Version)
	e.name(r.Username)
	e.shortString(r.Password)
	e.context(r.Context)
	return e.finish(b)
}

// Decode parses a LOGIN_REGISTER body; bytes after the context are ignored.
func (r *LoginRegister) Decode(body []byte) error {
	d := newDecoder(body)
	v := d.clientVersionInfo()
	out := d.loginRegisterAfterPrefix(v)
	if err := d.endIgnoringTrailing(); err != nil {
		return err
	}
	*r = out
	return nil
}

func (d *decoder) loginRegisterAfterPrefix(v ClientVersionInfo) LoginRegister {
	username := d.name()
	password := d.shortString()
	context := d.str32() // [len u32][UTF-8], bounded by the body
	if d.err != nil {
		return LoginRegister{}
	}
	return LoginRegister{Version: v, Username: username, Password: password, Context: context}
}

// LoginRegisterWithPAT is the body of LOGIN_REGISTER_WITH_PAT (45). Fields alias the
// body.
type LoginRegisterWithPAT struct {
	Version ClientVersionInfo
	Token   []byte
	Context []byte
}

// Append encodes r; ErrInvalidCommand when the token is over 255 bytes or a field
// is not UTF-8.
func (r *LoginRegisterWithPAT) Append(b []byte) ([]byte, error) {
	e := encoder{b: b}
	e.clientVersionInfo(&r.Version)
	e.shortString(r.Token)
	e.context(r.Context)
	return e.finish(b)
}

// Decode parses a LOGIN_REGISTER_WITH_PAT body; bytes after the context are ignored.
func (r *LoginRegisterWithPAT) Decode(body []byte) error {
	d := newDecoder(body)
	v := d.clientVersionInfo()
	out := d.patAfterPrefix(v)
	if err := d.endIgnoringTrailing(); err != nil {
		return err
	}
	*r = out
	return nil
}

func (d *decoder) patAfterPrefix(v ClientVersionInfo) LoginRegisterWithPAT {
	token := d.shortString()
	context := d.str32() // [len u32][UTF-8], bounded by the body
	if d.err != nil {
		return LoginRegisterWithPAT{}
	}
	return LoginRegisterWithPAT{Version: v, Token: token, Context: context}
}

// RegisterBody is what a register body can be read as: its version prefix and each
// credential shape that decodes. DecideRegister turns it into the server's answer.
//
// Like the reference, a shape is recognised without requiring it to consume the whole
// body: that is what makes a code-40 body with an empty password also read as a token
// body (the username becomes the token and the password's zero length byte plus three
// bytes of the context length read as a zero context length), whose failed token check
// answers reason 10 (apache/iggy core/server/src/auth.rs).
type RegisterBody struct {
	Version     ClientVersionInfo
	Password    LoginRegister        // meaningful when HasPassword
	Token       LoginRegisterWithPAT // meaningful when HasToken
	HasPassword bool
	HasToken    bool
}

// DecodeRegisterBody reads the version prefix and probes both credential shapes. It
// fails (ErrInvalidCommand) only when the prefix does not decode.
func DecodeRegisterBody(body []byte) (RegisterBody, error) {
	c, n, err := DecodeClientVersionInfo(body)
	if err != nil {
		return RegisterBody{}, err
	}
	out := RegisterBody{Version: c}
	tail := body[n:]

	d := newDecoder(tail)
	out.Password = d.loginRegisterAfterPrefix(c)
	out.HasPassword = d.err == nil

	d = newDecoder(tail)
	out.Token = d.patAfterPrefix(c)
	out.HasToken = d.err == nil
	return out, nil
}

// shortString is [len u8][UTF-8, 0..255 bytes]: passwords and tokens.
func (d *decoder) shortString() []byte {
	return d.utf8String(int(d.u8()))
}

func (e *encoder) shortString(v []byte) {
	if len(v) > secretLengthMax || !utf8.Valid(v) {
		e.fail(ErrInvalidCommand)
		return
	}
	e.u8(uint8(len(v)))
	e.bytes(v)
}

func (e *encoder) context(v []byte) {
	if uint64(len(v)) > 1<<32-1 || !utf8.Valid(v) {
		e.fail(ErrInvalidCommand)
		return
	}
	e.u32(uint32(len(v)))
	e.bytes(v)
}

// LoginRegisterReply is the payload of a successful register reply. ServerVersion
// aliases the body on decode.
type LoginRegisterReply struct {
	UserID                uint32
	Session               uint64 // never 0: SDKs refuse a zero session
	ServerProtocolVersion ProtocolVersion
	ServerVersion         []byte // 1..255 bytes of UTF-8, e.g. "0.11.0"
}

// LoginRegisterReplyFixedBytes is the reply's size without the version string.
const LoginRegisterReplyFixedBytes = 4 + 8 + 4 + 1

// Append encodes the reply payload (without the result section). ErrInvalidSession
// for a zero session, ErrInvalidCommand for a version string that is not a Name.
func (r *LoginRegisterReply) Append(b []byte) ([]byte, error) {
	e := encoder{b: b}
	if r.Session == 0 {
		e.fail(ErrInvalidSession)
	}
	e.u32(r.UserID)
	e.u64(r.Session)
	e.u32(uint32(r.ServerProtocolVersion))
	e.name(r.ServerVersion)
	return e.finish(b)
}

// Decode parses a reply payload (after the result section is stripped); it must be
// consumed exactly. A zero session is ErrInvalidSession, as the SDKs treat it.
func (r *LoginRegisterReply) Decode(payload []byte) error {
	d := newDecoder(payload)
	out := LoginRegisterReply{
		UserID:                d.u32(),
		Session:               d.u64(),
		ServerProtocolVersion: ProtocolVersion(d.u32()),
		ServerVersion:         d.name(),
	}
	if err := d.end(); err != nil {
		return err
	}
	if out.Session == 0 {
		return ErrInvalidSession
	}
	*r = out
	return nil
}

// CredentialChecker is the server's account lookup, passed into DecideRegister so
// the decision itself stays pure. CheckPassword is only called with lengths inside
// the login bounds.
type CredentialChecker interface {
	// CheckPassword returns the user id, or false for a wrong username or password
	// or an inactive user (the reference answers all three with reason 9).
	CheckPassword(username, password []byte) (userID uint32, ok bool)
	// CheckToken returns the token owner's id, or the reason to evict with:
	// EvictionInvalidToken or EvictionUserInactive.
	CheckToken(token []byte) (userID uint32, reason EvictionReason)
}

// RegisterDecision is the outcome of a register body: a user to log in (Reason 0)
// or the reason of the Eviction frame to answer with.
type RegisterDecision struct {
	UserID  uint32
	Reason  EvictionReason
	Version ClientVersionInfo // meaningful when the prefix decoded; aliases the body
}

// LoggedIn reports whether the body authenticated a user.
func (d RegisterDecision) LoggedIn() bool { return d.Reason == EvictionReserved }

// DecideRegister reproduces the reference server's register handling (apache/iggy
// core/server/src/auth.rs): the version gate first, then the password shape, then the
// token shape.
//
//	prefix does not decode                       reason 15 MalformedLogin
//	version outside window                       reason 14 IncompatibleProtocol
//	password shape, credentials in range, ok     logged in
//	token shape, token ok                        logged in
//	token shape, token refused                   the token's reason (10 or 11)
//	password shape refused, no token shape       reason 9 InvalidCredentials
//	neither shape                                reason 15 MalformedLogin
//
// A refused password falls through to the token shape, which is how a code-40 body
// with an empty password ends as reason 10.
func DecideRegister(body []byte, window ProtocolWindow, creds CredentialChecker) RegisterDecision {
	rb, err := DecodeRegisterBody(body)
	if err != nil {
		return RegisterDecision{Reason: EvictionMalformedLogin}
	}
	if !window.Accepts(rb.Version.ProtocolVersion) {
		return RegisterDecision{Reason: EvictionIncompatibleProtocol, Version: rb.Version}
	}
	passwordRefused := false
	if rb.HasPassword {
		if rb.Password.CredentialsInRange() {
			if id, ok := creds.CheckPassword(rb.Password.Username, rb.Password.Password); ok {
				return RegisterDecision{UserID: id, Version: rb.Version}
			}
		}
		passwordRefused = true
	}
	if rb.HasToken {
		id, reason := creds.CheckToken(rb.Token.Token)
		return RegisterDecision{UserID: id, Reason: reason, Version: rb.Version}
	}
	if passwordRefused {
		return RegisterDecision{Reason: EvictionInvalidCredentials, Version: rb.Version}
	}
	return RegisterDecision{Reason: EvictionMalformedLogin, Version: rb.Version}
}
