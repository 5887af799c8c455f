package wire

// Replies to metadata writes, to the consumer-offset writes and to a register are
// result-framed: the body starts with a committed-result section.
//
//	[count u32] count x { [index u32][result u32] } [payload]
//
//	success            00 00 00 00                      then the typed payload (may be empty)
//	committed reject   01 00 00 00  00 00 00 00  code   and no payload (exactly 12 bytes)
//
// The header status and the result section are exclusive: a reply either failed
// before commit (status != 0, empty body) or committed (status 0, section present).
// A client treats a non-zero status and a non-zero result alike.

const (
	resultCountBytes = 4
	resultEntryBytes = 8
	// ResultSuccessBytes is the size of a success section (the payload follows).
	ResultSuccessBytes = resultCountBytes
	// ResultRejectionBytes is the size of a whole committed-rejection body.
	ResultRejectionBytes = resultCountBytes + resultEntryBytes
)

// AppendResultSuccess appends the success section; the caller appends the payload.
func AppendResultSuccess(b []byte) []byte { return appendU32(b, 0) }

// AppendResultRejection appends the one-entry section of a committed rejection. It is
// the whole body: a rejection carries no payload.
func AppendResultRejection(b []byte, code ErrorCode) []byte {
	b = appendU32(b, 1)
	b = appendU32(b, 0)
	return appendU32(b, uint32(code))
}

// SplitResult strips the result section from a result-framed reply body. result is
// the first entry's code (0 for success, as the SDKs read it) and payload is what
// follows the section. A body too short for its count or for the entries the count
// claims is ErrInvalidCommand: a truncated rejection must never read as success.
// The count is checked against the body length before anything is sized by it.
func SplitResult(body []byte) (payload []byte, result ErrorCode, err error) {
	d := newDecoder(body)
	count := d.u32()
	if d.err != nil {
		return nil, 0, d.err
	}
	if uint64(count)*resultEntryBytes > uint64(d.remaining()) {
		return nil, 0, ErrInvalidCommand
	}
	if count > 0 {
		d.u32() // index
		result = ErrorCode(d.u32())
		d.take(int(count-1) * resultEntryBytes)
	}
	return d.rest(), result, nil
}
