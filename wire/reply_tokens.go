package wire

// PatEntry is one personal access token in a GetPersonalAccessTokens reply (apache/iggy
// core/binary_protocol/src/responses/personal_access_tokens/), 9 + N bytes:
// [name: Name][expiry_at: u64 µs since the epoch, 0 = never expires]. The list has no
// count prefix and holds only the caller's own tokens; the token secret itself is
// never listed.
type PatEntry struct {
	Name           []byte
	ExpiryAtMicros uint64
}

// EncodedLen is the exact number of bytes Append writes.
func (p *PatEntry) EncodedLen() int { return 9 + len(p.Name) }

// Append encodes p onto b.
func (p *PatEntry) Append(b []byte) []byte {
	b = appendReplyName(b, p.Name)
	return appendU64(b, p.ExpiryAtMicros)
}

func (p *PatEntry) decodeFrom(d *decoder) {
	p.Name = d.name()
	p.ExpiryAtMicros = d.u64()
}

// Decode reads a body that holds exactly one PatEntry.
func (p *PatEntry) Decode(body []byte) error { return decodeExact(p, body) }

// IterPersonalAccessTokens walks a GetPersonalAccessTokens body: PatEntries back to
// back, no count; an empty body is an empty list.
func IterPersonalAccessTokens(body []byte) ListIter[PatEntry, *PatEntry] {
	return newUncountedIter[PatEntry](body)
}

// AppendPersonalAccessTokens decodes a GetPersonalAccessTokens body onto dst.
func AppendPersonalAccessTokens(dst []PatEntry, body []byte) ([]PatEntry, error) {
	return collect(dst, IterPersonalAccessTokens(body))
}

// AppendPersonalAccessTokensReply encodes a GetPersonalAccessTokens body.
func AppendPersonalAccessTokensReply(b []byte, tokens []PatEntry) []byte {
	for i := range tokens {
		b = tokens[i].Append(b)
	}
	return b
}

// CreatedToken is the CreatePersonalAccessToken success payload (after the result
// section): the raw token, shown once, as a Name.
type CreatedToken struct {
	Token []byte
}

// EncodedLen is the exact number of bytes Append writes.
func (t *CreatedToken) EncodedLen() int { return 1 + len(t.Token) }

// Append encodes t onto b.
func (t *CreatedToken) Append(b []byte) []byte { return appendReplyName(b, t.Token) }

func (t *CreatedToken) decodeFrom(d *decoder) { t.Token = d.name() }

// Decode reads a CreatePersonalAccessToken payload.
func (t *CreatedToken) Decode(body []byte) error { return decodeExact(t, body) }
