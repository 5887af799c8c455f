package wire

import "strconv"

// System bodies:
//
//	GetSnapshot (11)      [compression u8][types_count u8][type u8] x types_count
//	DescribeOptions (13)  [scope u8]
//	GetClient (21)        [client_id u32]

// DecodeEmptyBody is the decoder of a command whose payload is empty: it accepts any
// body, because the reference reads nothing from it (Ping, GetStats, GetUsers and
// GetClusterMetadata never look at the body; GetStreams and GetPersonalAccessTokens
// decode an empty struct with decode_from, core/server/src/responses.rs).
func DecodeEmptyBody(body []byte) error { return nil }

// SnapshotCompression selects the ZIP entry compression of a GetSnapshot archive.
type SnapshotCompression uint8

// Snapshot compression codes.
const (
	SnapshotStored   SnapshotCompression = 1
	SnapshotDeflated SnapshotCompression = 2
	SnapshotBzip2    SnapshotCompression = 3
	SnapshotZstd     SnapshotCompression = 4
	SnapshotLzma     SnapshotCompression = 5
	SnapshotXz       SnapshotCompression = 6
)

// Known reports whether c is one of the six codes.
func (c SnapshotCompression) Known() bool { return c >= SnapshotStored && c <= SnapshotXz }

func (c SnapshotCompression) String() string {
	names := [...]string{"", "stored", "deflated", "bzip2", "zstd", "lzma", "xz"}
	if c.Known() {
		return names[c]
	}
	return "SnapshotCompression(" + strconv.Itoa(int(c)) + ")"
}

// SnapshotType is one section of a GetSnapshot archive.
type SnapshotType uint8

// Snapshot section codes. SnapshotAll expands to every type except SnapshotTest and
// must be the only type in a request.
const (
	SnapshotFilesystemOverview SnapshotType = 1
	SnapshotProcessList        SnapshotType = 2
	SnapshotResourceUsage      SnapshotType = 3
	SnapshotTest               SnapshotType = 4
	SnapshotServerLogs         SnapshotType = 5
	SnapshotServerConfig       SnapshotType = 6
	SnapshotAll                SnapshotType = 100
)

// Known reports whether t is a defined section code.
func (t SnapshotType) Known() bool {
	return t >= SnapshotFilesystemOverview && t <= SnapshotServerConfig || t == SnapshotAll
}

func (t SnapshotType) String() string {
	names := [...]string{"", "filesystem_overview", "process_list", "resource_usage", "test", "server_logs", "server_config"}
	switch {
	case t == SnapshotAll:
		return "all"
	case t.Known():
		return names[t]
	}
	return "SnapshotType(" + strconv.Itoa(int(t)) + ")"
}

// GetSnapshot (11). Types aliases the body: one SnapshotType per byte. An empty list
// is legal (the archive then has no entries).
type GetSnapshot struct {
	Compression SnapshotCompression
	Types       []byte
}

// Type returns the i-th requested section.
func (r *GetSnapshot) Type(i int) SnapshotType { return SnapshotType(r.Types[i]) }

// Decode reads the body. An unknown compression or type code, or All combined with
// other types, is ErrInvalidCommand (status 3).
func (r *GetSnapshot) Decode(body []byte) error {
	d := newDecoder(body)
	r.Compression = SnapshotCompression(d.u8())
	n := int(d.u8())
	r.Types = d.take(n)
	if err := d.endIgnoringTrailing(); err != nil {
		return err
	}
	return checkSnapshot(r.Compression, r.Types)
}

// Append encodes r, refusing what Decode refuses.
func (r *GetSnapshot) Append(b []byte) ([]byte, error) {
	if len(r.Types) > 255 {
		return b, ErrInvalidCommand
	}
	if err := checkSnapshot(r.Compression, r.Types); err != nil {
		return b, err
	}
	b = appendU8(b, uint8(r.Compression))
	b = appendU8(b, uint8(len(r.Types)))
	return append(b, r.Types...), nil
}

func checkSnapshot(c SnapshotCompression, types []byte) error {
	if !c.Known() {
		return ErrInvalidCommand
	}
	for _, t := range types {
		if !SnapshotType(t).Known() || SnapshotType(t) == SnapshotAll && len(types) > 1 {
			return ErrInvalidCommand
		}
	}
	return nil
}

// OptionsScope selects the option catalog DescribeOptions returns.
type OptionsScope uint8

// Option catalog scopes.
const (
	OptionsScopeTopic  OptionsScope = 1
	OptionsScopeStream OptionsScope = 2
	OptionsScopeUser   OptionsScope = 3
)

func (s OptionsScope) String() string {
	switch s {
	case OptionsScopeTopic:
		return "topic"
	case OptionsScopeStream:
		return "stream"
	case OptionsScopeUser:
		return "user"
	}
	return "OptionsScope(" + strconv.Itoa(int(s)) + ")"
}

// DescribeOptions (13).
type DescribeOptions struct {
	Scope OptionsScope
}

// Decode reads the body; a scope outside 1..3 is ErrInvalidCommand (status 3).
func (r *DescribeOptions) Decode(body []byte) error {
	d := newDecoder(body)
	r.Scope = OptionsScope(d.u8())
	if err := d.endIgnoringTrailing(); err != nil {
		return err
	}
	if r.Scope < OptionsScopeTopic || r.Scope > OptionsScopeUser {
		return ErrInvalidCommand
	}
	return nil
}

// Append encodes r, refusing a scope outside 1..3.
func (r *DescribeOptions) Append(b []byte) ([]byte, error) {
	if r.Scope < OptionsScopeTopic || r.Scope > OptionsScopeUser {
		return b, ErrInvalidCommand
	}
	return appendU8(b, uint8(r.Scope)), nil
}

// GetClient (21). A body that does not decode is answered like an unknown client id: an
// empty status-0 reply, not status 3 (apache/iggy core/server/src/dispatch.rs).
type GetClient struct {
	ClientID uint32
}

// Decode reads the body.
func (r *GetClient) Decode(body []byte) error {
	d := newDecoder(body)
	r.ClientID = d.u32()
	return d.endIgnoringTrailing()
}

// Append encodes r.
func (r *GetClient) Append(b []byte) ([]byte, error) { return appendU32(b, r.ClientID), nil }
