package wire

import "strconv"

// A protocol version is a semver packed into one u32, 10 bits per component, so
// integer order equals semver order:
//
//	 31 30 29          20 19          10 9            0
//	+-----+--------------+--------------+--------------+
//	|  0  |    major     |    minor     |    patch     |
//	+-----+--------------+--------------+--------------+
//
// Both login bodies (codes 40 and 45) begin with ClientVersionInfo so the server can
// gate on the version before it touches credentials:
//
//	[protocol_version u32][sdk_name Name][sdk_version Name]
//
// The gate: under 0.x a minor release may change the wire, so a client is accepted
// when its version is at least the window's minimum and its major.minor is at most
// the server's (patch releases never change the wire, so the upper bound ignores
// patch). From 1.0.0 on the gate is strict semver: the same major, at least the
// minimum.

// ProtocolVersion is a packed protocol version.
type ProtocolVersion uint32

const (
	versionComponentBits = 10
	versionComponentMax  = 1<<versionComponentBits - 1
	versionReservedMask  = 0b11 << 30
)

// The server speaks protocol 0.11.0 and accepts every 0.11.x client: the minimum is
// the current version with patch zeroed, exactly as the reference server sets it.
const (
	ServerProtocolVersion    ProtocolVersion = 0<<20 | 11<<10 | 0
	ServerProtocolVersionMin ProtocolVersion = ServerProtocolVersion &^ versionComponentMax
)

// AcceptedProtocolWindow is the window this server accepts at login and reports in a
// reason-14 eviction (max at header byte 144, min at 148).
var AcceptedProtocolWindow = ProtocolWindow{Min: ServerProtocolVersionMin, Max: ServerProtocolVersion}

// PackProtocolVersion packs major.minor.patch; ok is false when a component does not
// fit its 10 bits.
func PackProtocolVersion(major, minor, patch uint32) (v ProtocolVersion, ok bool) {
	if major > versionComponentMax || minor > versionComponentMax || patch > versionComponentMax {
		return 0, false
	}
	return ProtocolVersion(major<<(2*versionComponentBits) | minor<<versionComponentBits | patch), true
}

// Major is bits 29..20.
func (v ProtocolVersion) Major() uint32 {
	return uint32(v) >> (2 * versionComponentBits) & versionComponentMax
}

// Minor is bits 19..10.
func (v ProtocolVersion) Minor() uint32 {
	return uint32(v) >> versionComponentBits & versionComponentMax
}

// Patch is bits 9..0.
func (v ProtocolVersion) Patch() uint32 { return uint32(v) & versionComponentMax }

// Valid reports whether the reserved bits 31..30 are zero.
func (v ProtocolVersion) Valid() bool { return uint32(v)&versionReservedMask == 0 }

// String formats v as major.minor.patch, or as the raw number when the reserved bits
// are set.
func (v ProtocolVersion) String() string {
	if !v.Valid() {
		return "ProtocolVersion(" + strconv.FormatUint(uint64(v), 10) + ")"
	}
	return strconv.FormatUint(uint64(v.Major()), 10) + "." +
		strconv.FormatUint(uint64(v.Minor()), 10) + "." +
		strconv.FormatUint(uint64(v.Patch()), 10)
}

// ParseProtocolVersion reads "major.minor.patch", ignoring a pre-release or build
// suffix ("0.11.0-edge.4" is 0.11.0), as the reference packs its crate version.
func ParseProtocolVersion(s string) (ProtocolVersion, bool) {
	var parts [3]uint32
	i := 0
	for p := range parts {
		if p > 0 {
			if i >= len(s) || s[i] != '.' {
				return 0, false
			}
			i++
		}
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' && i-start < 5 {
			parts[p] = parts[p]*10 + uint32(s[i]-'0')
			i++
		}
		if i == start {
			return 0, false
		}
	}
	if i < len(s) && s[i] != '-' && s[i] != '+' {
		return 0, false
	}
	return PackProtocolVersion(parts[0], parts[1], parts[2])
}

// ProtocolWindow is the range of client protocol versions a server accepts.
type ProtocolWindow struct {
	Min, Max ProtocolVersion
}

// Accepts is the login gate.
func (w ProtocolWindow) Accepts(client ProtocolVersion) bool {
	if !client.Valid() || client < w.Min {
		return false
	}
	if w.Max.Major() == 0 {
		// 0.x: minor-scoped; compare major.minor, ignoring patch.
		return client>>versionComponentBits <= w.Max>>versionComponentBits
	}
	return client.Major() == w.Max.Major()
}

// ClientVersionInfo is the prefix of both login bodies. The names alias the body.
type ClientVersionInfo struct {
	ProtocolVersion ProtocolVersion
	SDKName         []byte // e.g. "go-sdk", "rust-sdk"; 1..255 bytes of UTF-8
	SDKVersion      []byte // the SDK's own build version; 1..255 bytes of UTF-8
}

// EncodedLen is the number of bytes Append writes for a valid value.
func (c *ClientVersionInfo) EncodedLen() int { return 4 + 1 + len(c.SDKName) + 1 + len(c.SDKVersion) }

// Append encodes c; ErrInvalidCommand when a name is empty, too long or not UTF-8.
func (c *ClientVersionInfo) Append(b []byte) ([]byte, error) {
	e := encoder{b: b}
	e.clientVersionInfo(c)
	return e.finish(b)
}

func (e *encoder) clientVersionInfo(c *ClientVersionInfo) {
	e.u32(uint32(c.ProtocolVersion))
	e.name(c.SDKName)
	e.name(c.SDKVersion)
}

// DecodeClientVersionInfo reads the prefix from the front of a login body and
// returns it with the number of bytes it took. A failure (ErrInvalidCommand) is what
// the server answers with a MalformedLogin (15) eviction.
func DecodeClientVersionInfo(body []byte) (ClientVersionInfo, int, error) {
	d := newDecoder(body)
	c := d.clientVersionInfo()
	return c, d.off, d.err
}

func (d *decoder) clientVersionInfo() ClientVersionInfo {
	v := ProtocolVersion(d.u32())
	name := d.name()
	version := d.name()
	if d.err != nil {
		return ClientVersionInfo{}
	}
	return ClientVersionInfo{ProtocolVersion: v, SDKName: name, SDKVersion: version}
}
