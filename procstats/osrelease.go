package procstats

import (
	"bytes"
	"io/fs"
)

// OSRelease names the distribution, from /etc/os-release (os-release(5)) or, for
// a field it lacks, /etc/lsb-release, as the reference's sysinfo crate reads
// them.
type OSRelease struct {
	// Name is NAME ("Debian GNU/Linux"), else DISTRIB_ID.
	Name string
	// VersionID is VERSION_ID ("12"), else DISTRIB_RELEASE.
	VersionID string
}

// ParseOSRelease reads the texts of /etc/os-release and /etc/lsb-release (either
// may be nil).
func ParseOSRelease(osRelease, lsbRelease []byte) OSRelease {
	name, ok := releaseValue(osRelease, "NAME")
	if !ok {
		name, _ = releaseValue(lsbRelease, "DISTRIB_ID")
	}
	version, ok := releaseValue(osRelease, "VERSION_ID")
	if !ok {
		version, _ = releaseValue(lsbRelease, "DISTRIB_RELEASE")
	}
	return OSRelease{Name: name, VersionID: version}
}

// releaseValue is the value of the first line KEY=value, without its quotes.
func releaseValue(text []byte, key string) (string, bool) {
	for len(text) > 0 {
		var line []byte
		line, text, _ = bytes.Cut(text, []byte("\n"))
		value, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte(key+"="))
		if !ok {
			continue
		}
		if n := len(value); n >= 2 && (value[0] == '"' || value[0] == '\'') && value[n-1] == value[0] {
			value = value[1 : n-1]
		}
		if len(value) == 0 {
			continue
		}
		return string(value), true
	}
	return "", false
}

// LongVersion is the os_version the reference reports: "Linux (Debian GNU/Linux
// 12)", "Linux (<name>)" when there is no version, "Linux" when there is neither
// (a version without a name names the distribution "unknown", as the reference
// does).
func (r OSRelease) LongVersion() string {
	switch {
	case r.VersionID != "":
		name := r.Name
		if name == "" {
			name = "unknown"
		}
		return "Linux (" + name + " " + r.VersionID + ")"
	case r.Name != "":
		return "Linux (" + r.Name + ")"
	default:
		return "Linux"
	}
}

// ReadOSRelease reads etc/os-release and etc/lsb-release of root (os.DirFS("/")
// on a host); a file that cannot be read counts as empty.
func ReadOSRelease(root fs.FS) OSRelease {
	osRelease, _ := readBounded(root, "etc/os-release")
	lsbRelease, _ := readBounded(root, "etc/lsb-release")
	return ParseOSRelease(osRelease, lsbRelease)
}
