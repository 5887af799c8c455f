package wire

import (
	"bytes"
	"errors"
	"testing"
)

func TestProtocolVersionPacking(t *testing.T) {
	v, ok := PackProtocolVersion(0, 11, 0)
	if !ok || v != 11264 || ServerProtocolVersion != 11264 {
		t.Fatalf("0.11.0 packs to %d, %v; want 11264", v, ok)
	}
	if v.String() != "0.11.0" || v.Major() != 0 || v.Minor() != 11 || v.Patch() != 0 {
		t.Fatalf("components of %d: %s", v, v)
	}
	max, ok := PackProtocolVersion(1023, 1023, 1023)
	if !ok || max != 0x3fffffff || !max.Valid() {
		t.Fatalf("1023.1023.1023 packs to %#x, %v", max, ok)
	}
	for _, c := range [][3]uint32{{1024, 0, 0}, {0, 1024, 0}, {0, 0, 1024}} {
		if _, ok := PackProtocolVersion(c[0], c[1], c[2]); ok {
			t.Errorf("%v packed", c)
		}
	}
	if ProtocolVersion(1 << 30).Valid() {
		t.Error("reserved bit 30 accepted")
	}
	if s := ProtocolVersion(1 << 31).String(); s != "ProtocolVersion(2147483648)" {
		t.Errorf("String of invalid version = %q", s)
	}
	// Integer order is semver order.
	a, _ := PackProtocolVersion(0, 9, 1023)
	b, _ := PackProtocolVersion(0, 10, 0)
	c, _ := PackProtocolVersion(1, 0, 0)
	if !(a < b && b < c) {
		t.Errorf("order broken: %d %d %d", a, b, c)
	}
}

func TestParseProtocolVersion(t *testing.T) {
	tests := []struct {
		in   string
		want string
		ok   bool
	}{
		{"0.11.0", "0.11.0", true},
		{"0.11.0-edge.4", "0.11.0", true},
		{"1.2.3+build.7", "1.2.3", true},
		{"1023.0.1", "1023.0.1", true},
		{"1024.0.0", "", false},
		{"0.11", "", false},
		{"0.11.", "", false},
		{"x.1.2", "", false},
		{"0.11.0x", "", false},
		{"99999999.0.0", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		v, ok := ParseProtocolVersion(tt.in)
		if ok != tt.ok || (ok && v.String() != tt.want) {
			t.Errorf("ParseProtocolVersion(%q) = %v, %v; want %q, %v", tt.in, v, ok, tt.want, tt.ok)
		}
	}
}

func TestProtocolWindowGate(t *testing.T) {
	pv := func(major, minor, patch uint32) ProtocolVersion {
		v, ok := PackProtocolVersion(major, minor, patch)
		if !ok {
			t.Fatalf("bad test version %d.%d.%d", major, minor, patch)
		}
		return v
	}
	zero := AcceptedProtocolWindow
	if zero.Min != pv(0, 11, 0) || zero.Max != pv(0, 11, 0) {
		t.Fatalf("window = %v..%v, want 0.11.0..0.11.0", zero.Min, zero.Max)
	}
	one := ProtocolWindow{Min: pv(1, 2, 0), Max: pv(1, 4, 2)}
	tests := []struct {
		name   string
		window ProtocolWindow
		client ProtocolVersion
		want   bool
	}{
		{"0.x exact", zero, pv(0, 11, 0), true},
		{"0.x newer patch", zero, pv(0, 11, 1023), true},
		{"0.x older minor", zero, pv(0, 10, 9), false},
		{"0.x newer minor", zero, pv(0, 12, 0), false},
		{"0.x major 1", zero, pv(1, 0, 0), false},
		{"0.x zero", zero, 0, false},
		{"0.x reserved bits", zero, pv(0, 11, 0) | 1<<30, false},
		{"1.x at min", one, pv(1, 2, 0), true},
		{"1.x below min", one, pv(1, 1, 9), false},
		{"1.x newer minor same major", one, pv(1, 9, 0), true},
		{"1.x next major", one, pv(2, 0, 0), false},
	}
	for _, tt := range tests {
		if got := tt.window.Accepts(tt.client); got != tt.want {
			t.Errorf("%s: Accepts(%v) = %v, want %v", tt.name, tt.client, got, tt.want)
		}
	}
}

func goSDKVersionInfo() ClientVersionInfo {
	return ClientVersionInfo{
		ProtocolVersion: ServerProtocolVersion,
		SDKName:         []byte("go-sdk"),
		SDKVersion:      []byte("0.9.0-edge.4"),
	}
}

func TestClientVersionInfoGolden(t *testing.T) {
	c := goSDKVersionInfo()
	got, err := c.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "requests/client_version_info.hex", got)
	if len(got) != c.EncodedLen() {
		t.Errorf("EncodedLen = %d, wrote %d", c.EncodedLen(), len(got))
	}
	golden := readGolden(t, "requests/client_version_info.hex")
	dec, n, err := DecodeClientVersionInfo(golden)
	if err != nil || n != len(golden) || dec.ProtocolVersion != c.ProtocolVersion ||
		!bytes.Equal(dec.SDKName, c.SDKName) || !bytes.Equal(dec.SDKVersion, c.SDKVersion) {
		t.Fatalf("decode = %+v, %d, %v", dec, n, err)
	}
	for cut := 0; cut < len(golden); cut++ {
		if _, _, err := DecodeClientVersionInfo(golden[:cut]); !errors.Is(err, ErrInvalidCommand) {
			t.Fatalf("prefix %d decoded: %v", cut, err)
		}
	}
	bad := []ClientVersionInfo{
		{SDKName: nil, SDKVersion: []byte("1")},
		{SDKName: []byte("x"), SDKVersion: bytes.Repeat([]byte("1"), 256)},
		{SDKName: []byte{0xff}, SDKVersion: []byte("1")},
	}
	for i := range bad {
		if _, err := bad[i].Append(nil); !errors.Is(err, ErrInvalidCommand) {
			t.Errorf("bad[%d].Append err = %v", i, err)
		}
	}
}
