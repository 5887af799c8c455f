package wire

// Stream request bodies:
//
//	GetStream (200), DeleteStream (203), PurgeStream (205)  [stream_id Identifier]
//	CreateStream (202)   [name Name][options block to end]
//	UpdateStream (204)   [stream_id Identifier][name Name][options block to end]
//
// The stream option catalog is empty, so the block is normally empty; a key in it is
// refused by the catalog (4041) after the block has passed ValidateOptions here.

// GetStream (200).
type GetStream struct {
	StreamID Identifier
}

// Decode reads the body.
func (r *GetStream) Decode(body []byte) error { return decodeIdentifierBody(body, &r.StreamID) }

// Append encodes r.
func (r *GetStream) Append(b []byte) ([]byte, error) { return r.StreamID.Append(b) }

// DeleteStream (203).
type DeleteStream struct {
	StreamID Identifier
}

// Decode reads the body.
func (r *DeleteStream) Decode(body []byte) error { return decodeIdentifierBody(body, &r.StreamID) }

// Append encodes r.
func (r *DeleteStream) Append(b []byte) ([]byte, error) { return r.StreamID.Append(b) }

// PurgeStream (205).
type PurgeStream struct {
	StreamID Identifier
}

// Decode reads the body.
func (r *PurgeStream) Decode(body []byte) error { return decodeIdentifierBody(body, &r.StreamID) }

// Append encodes r.
func (r *PurgeStream) Append(b []byte) ([]byte, error) { return r.StreamID.Append(b) }

// CreateStream (202).
type CreateStream struct {
	Name    []byte
	Options []byte
}

// Decode reads the body.
func (r *CreateStream) Decode(body []byte) error {
	d := newDecoder(body)
	r.Name = d.name()
	r.Options = d.optionsBlock()
	return d.end()
}

// Append encodes r.
func (r *CreateStream) Append(b []byte) ([]byte, error) {
	e := encoder{b: b}
	e.name(r.Name)
	e.optionsBlock(r.Options)
	return e.finish(b)
}

// UpdateStream (204): a patch; absent option keys are left alone.
type UpdateStream struct {
	StreamID Identifier
	Name     []byte
	Options  []byte
}

// Decode reads the body.
func (r *UpdateStream) Decode(body []byte) error {
	d := newDecoder(body)
	r.StreamID = d.identifier()
	r.Name = d.name()
	r.Options = d.optionsBlock()
	return d.end()
}

// Append encodes r.
func (r *UpdateStream) Append(b []byte) ([]byte, error) {
	e := encoder{b: b}
	e.identifier(r.StreamID)
	e.name(r.Name)
	e.optionsBlock(r.Options)
	return e.finish(b)
}
