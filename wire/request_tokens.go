package wire

// Personal access token request bodies:
//
//	CreatePersonalAccessToken (42)  [name Name][expiry u64]
//	DeletePersonalAccessToken (43)  [name Name]
//
// expiry is a duration in microseconds: 0 is the server default (no expiry) and
// 2^64-1 never expires. The Go SDK writes its uint32 expiry into the upper four
// bytes, so a server reads expiry<<32; only 0 reads as that SDK intends.

// TokenExpiryNever is the CreatePersonalAccessToken expiry that never expires.
const TokenExpiryNever = ^uint64(0)

// CreatePersonalAccessToken (42).
type CreatePersonalAccessToken struct {
	Name     []byte
	ExpiryUs uint64
}

// Decode reads the body.
func (r *CreatePersonalAccessToken) Decode(body []byte) error {
	d := newDecoder(body)
	r.Name = d.name()
	r.ExpiryUs = d.u64()
	return d.endIgnoringTrailing()
}

// Append encodes r.
func (r *CreatePersonalAccessToken) Append(b []byte) ([]byte, error) {
	e := encoder{b: b}
	e.name(r.Name)
	e.u64(r.ExpiryUs)
	return e.finish(b)
}

// DeletePersonalAccessToken (43).
type DeletePersonalAccessToken struct {
	Name []byte
}

// Decode reads the body.
func (r *DeletePersonalAccessToken) Decode(body []byte) error {
	d := newDecoder(body)
	r.Name = d.name()
	return d.endIgnoringTrailing()
}

// Append encodes r.
func (r *DeletePersonalAccessToken) Append(b []byte) ([]byte, error) {
	return AppendName(b, r.Name)
}
