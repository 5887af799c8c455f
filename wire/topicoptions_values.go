package wire

import (
	"encoding/binary"
	"math"
	"math/bits"
	"strings"
	"unicode/utf8"
)

// One entry of a topic options block, parsed against the catalog (topicoptions.go):
// the kinds and strings each key accepts, and the string grammars the reference
// server reads for them (humantime durations, byte sizes). Admission of a whole
// block, with the bounds that tie keys together, is in topicoptions_blocks.go.

// TopicOptionValue is one parsed option entry.
type TopicOptionValue struct {
	Key TopicOptionKey
	// ServerDefault marks a value that means "as if absent": 0 for the expiry and
	// the three sizes, or the strings default / server_default.
	ServerDefault bool
	// Uint holds the value of the integer keys and the compression code; Bool the
	// value of the two flags.
	Uint uint64
	Bool bool
}

// ParseTopicOption parses one entry of an options block against the topic catalog:
// ErrUnsupportedOptionKey (4041) for a key outside it, ErrInvalidOptionValue (4042)
// for a value of the wrong kind, width or range. Bounds that depend on other keys
// (segment size against max topic size, the preallocation cap) are checked by
// ResolveCreateTopicOptions and CheckTopicUpdate.
func ParseTopicOption(key []byte, kind HeaderKind, value []byte) (TopicOptionValue, error) {
	k, ok := LookupTopicOption(key)
	if !ok {
		return TopicOptionValue{}, ErrUnsupportedOptionKey
	}
	v := TopicOptionValue{Key: k}
	var ok2 bool
	switch k {
	case TopicOptionCompressionAlgorithm:
		v.Uint, ok2 = parseCompression(kind, value)
	case TopicOptionMessageExpiry:
		v.Uint, ok2 = parseU64Or(kind, value, parseExpiryString)
		v.ServerDefault = v.Uint == 0
	case TopicOptionMaxTopicSize:
		v.Uint, ok2 = parseU64Or(kind, value, parseMaxTopicSizeString)
		v.ServerDefault = v.Uint == 0
	case TopicOptionSegmentSize:
		v.Uint, ok2 = parseU64Or(kind, value, parseByteSizeString)
		v.ServerDefault = v.Uint == 0
	case TopicOptionSizeOfMessagesRequiredToSave:
		v.Uint, ok2 = parseU64Or(kind, value, parseByteSizeString)
		ok2 = ok2 && v.Uint <= TopicSizeOfMessagesRequiredToSaveBytesMax
		v.ServerDefault = v.Uint == 0
	case TopicOptionMessagesRequiredToSave:
		v.Uint, ok2 = parseU32(kind, value)
		ok2 = ok2 && v.Uint >= 1 && v.Uint <= uint64(TopicMessagesRequiredToSaveMax)
	case TopicOptionEnforceFsync, TopicOptionPreallocateSegments:
		v.Bool, ok2 = parseBool(kind, value)
	}
	if !ok2 {
		return TopicOptionValue{}, ErrInvalidOptionValue
	}
	return v, nil
}

// set stores v into o; a ServerDefault value leaves o unchanged.
func (v TopicOptionValue) set(o *TopicOptions) {
	if v.ServerDefault {
		return
	}
	switch v.Key {
	case TopicOptionCompressionAlgorithm:
		o.CompressionAlgorithm = uint8(v.Uint)
	case TopicOptionMessageExpiry:
		o.MessageExpiryMicros = v.Uint
	case TopicOptionMaxTopicSize:
		o.MaxTopicSizeBytes = v.Uint
	case TopicOptionSegmentSize:
		o.SegmentSizeBytes = v.Uint
	case TopicOptionEnforceFsync:
		o.EnforceFsync = v.Bool
	case TopicOptionMessagesRequiredToSave:
		o.MessagesRequiredToSave = uint32(v.Uint)
	case TopicOptionSizeOfMessagesRequiredToSave:
		o.SizeOfMessagesRequiredToSaveBytes = v.Uint
	case TopicOptionPreallocateSegments:
		o.PreallocateSegments = v.Bool
	}
}

// The value parsers of ParseTopicOption. Each returns false for a value of the wrong
// kind or width, or a string that does not parse.

func parseCompression(kind HeaderKind, v []byte) (uint64, bool) {
	switch kind {
	case HeaderUint8:
		if len(v) == 1 && (v[0] == TopicCompressionNone || v[0] == TopicCompressionGzip) {
			return uint64(v[0]), true
		}
	case HeaderString:
		switch {
		case asciiEqualFold(v, "none"):
			return uint64(TopicCompressionNone), true
		case asciiEqualFold(v, "gzip"):
			return uint64(TopicCompressionGzip), true
		}
	}
	return 0, false
}

func parseU64Or(kind HeaderKind, v []byte, fromString func(string) (uint64, bool)) (uint64, bool) {
	switch kind {
	case HeaderUint64:
		if len(v) == 8 {
			return binary.LittleEndian.Uint64(v), true
		}
	case HeaderString:
		if utf8.Valid(v) {
			return fromString(string(v))
		}
	}
	return 0, false
}

func parseU32(kind HeaderKind, v []byte) (uint64, bool) {
	switch kind {
	case HeaderUint32:
		if len(v) == 4 {
			return uint64(binary.LittleEndian.Uint32(v)), true
		}
	case HeaderString:
		n, ok := parseDecimal(strings.TrimPrefix(string(v), "+"))
		if ok && n <= math.MaxUint32 {
			return n, true
		}
	}
	return 0, false
}

func parseBool(kind HeaderKind, v []byte) (bool, bool) {
	switch kind {
	case HeaderBool:
		if len(v) == 1 && v[0] <= 1 {
			return v[0] == 1, true
		}
	case HeaderString:
		switch string(v) {
		case "true":
			return true, true
		case "false":
			return false, true
		}
	}
	return false, false
}

// parseExpiryString reads a message_expiry string: a never-expire word, a
// server-default word (0), or a humantime duration of at most u32::MAX seconds.
func parseExpiryString(s string) (uint64, bool) {
	switch s {
	case "none", "None", "unlimited", "Unlimited", "never_expire":
		return math.MaxUint64, true
	case "default", "Default", "server_default", "Server_default":
		return 0, true
	}
	micros, ok := parseHumantimeMicros(s)
	if !ok || micros/microsPerSecond > messageExpiryHumantimeSecondsMax {
		return 0, false
	}
	return micros, true
}

// parseMaxTopicSizeString reads a max_topic_size string: unlimited, a server-default
// word (0), or a byte size.
func parseMaxTopicSizeString(s string) (uint64, bool) {
	switch s {
	case "unlimited", "Unlimited":
		return math.MaxUint64, true
	case "0", "server_default", "Server_default", "default", "Default":
		return 0, true
	}
	return parseByteSizeString(s)
}

// parseByteSizeString reads a byte size as the reference server's IggyByteSize does:
// "0", "unlimited" and "none" mean 0; otherwise a decimal number (a fraction is
// allowed) and an optional case-insensitive unit: b, k/kb (10^3), ki/kib (2^10), and
// so on through e/eb and ei/eib. The result must fit in a u64; a fraction of a byte
// is dropped.
func parseByteSizeString(s string) (uint64, bool) {
	switch s {
	case "0", "unlimited", "Unlimited", "none", "None":
		return 0, true
	}
	s = strings.TrimSpace(s)
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	number, unit := s[:i], strings.TrimSpace(s[i:])
	multiplier, ok := byteUnitMultiplier(unit)
	if !ok {
		return 0, false
	}
	whole, fraction, _ := strings.Cut(number, ".")
	if whole == "" && fraction == "" || strings.Contains(fraction, ".") {
		return 0, false
	}
	w, ok := parseDecimalOrEmpty(whole)
	if !ok || (multiplier != 0 && w > math.MaxUint64/multiplier) {
		return 0, false
	}
	total := w * multiplier
	if fraction == "" {
		return total, true
	}
	// The fraction adds floor(F × multiplier / 10^k) for its k digits F, computed
	// in 128 bits so no digit is lost.
	if _, ok := parseDecimalDigits(fraction); !ok {
		return 0, false
	}
	if len(fraction) > 19 {
		fraction = fraction[:19] // 10^19 is the largest power of ten in a u64
	}
	f, _ := parseDecimal(fraction)
	pow := uint64(1)
	for range len(fraction) {
		pow *= 10
	}
	hi, lo := bits.Mul64(f, multiplier)
	if hi >= pow {
		return 0, false
	}
	add, _ := bits.Div64(hi, lo, pow)
	if total > math.MaxUint64-add {
		return 0, false
	}
	total += add
	return total, true
}

func byteUnitMultiplier(unit string) (uint64, bool) {
	u := strings.ToLower(unit)
	if u == "" || u == "b" {
		return 1, true
	}
	u = strings.TrimSuffix(u, "b")
	binaryUnit := strings.HasSuffix(u, "i")
	u = strings.TrimSuffix(u, "i")
	if len(u) != 1 {
		return 0, false
	}
	power := strings.IndexByte("kmgtpe", u[0]) + 1
	if power == 0 {
		return 0, false
	}
	base := uint64(1000)
	if binaryUnit {
		base = 1024
	}
	m := uint64(1)
	for range power {
		m *= base
	}
	return m, true
}

// humantimeUnits maps a humantime unit to microseconds, as the humantime crate
// spells them (a month is 30.44 days, a year 365.25 days). Nanosecond units round
// down to whole microseconds at the end.
var humantimeUnits = map[string]uint64{
	"nanos": 0, "nsec": 0, "ns": 0,
	"usec": 1, "us": 1, "µs": 1, "micros": 1,
	"millis": 1_000, "msec": 1_000, "ms": 1_000,
	"seconds": 1_000_000, "second": 1_000_000, "secs": 1_000_000, "sec": 1_000_000, "s": 1_000_000,
	"minutes": 60_000_000, "minute": 60_000_000, "mins": 60_000_000, "min": 60_000_000, "m": 60_000_000,
	"hours": 3_600_000_000, "hour": 3_600_000_000, "hrs": 3_600_000_000, "hr": 3_600_000_000, "h": 3_600_000_000,
	"days": 86_400_000_000, "day": 86_400_000_000, "d": 86_400_000_000,
	"weeks": 604_800_000_000, "week": 604_800_000_000, "w": 604_800_000_000,
	"months": 2_630_016_000_000, "month": 2_630_016_000_000, "M": 2_630_016_000_000,
	"years": 31_557_600_000_000, "year": 31_557_600_000_000, "y": 31_557_600_000_000,
}

// parseHumantimeMicros reads a humantime duration: one or more "<integer><unit>"
// terms, optionally separated by spaces ("7 days", "1h 30m", "1h30m").
func parseHumantimeMicros(s string) (uint64, bool) {
	var micros, nanos uint64
	terms := 0
	for {
		s = strings.TrimLeft(s, " ")
		if s == "" {
			break
		}
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		n, ok := parseDecimal(s[:i])
		if !ok {
			return 0, false
		}
		s = strings.TrimLeft(s[i:], " ")
		j := 0
		for j < len(s) && s[j] != ' ' && (s[j] < '0' || s[j] > '9') {
			j++
		}
		perUnit, known := humantimeUnits[s[:j]]
		if !known {
			return 0, false
		}
		s = s[j:]
		terms++
		if perUnit == 0 { // nanoseconds
			if nanos > math.MaxUint64-n {
				return 0, false
			}
			nanos += n
			continue
		}
		if n > (math.MaxUint64-micros)/perUnit {
			return 0, false
		}
		micros += n * perUnit
	}
	if terms == 0 || micros > math.MaxUint64-nanos/1000 {
		return 0, false
	}
	return micros + nanos/1000, true
}

// parseDecimal reads a non-empty run of ASCII digits that fits in a u64.
func parseDecimal(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	return parseDecimalOrEmpty(s)
}

// parseDecimalDigits reports whether s is all ASCII digits, whatever its length.
func parseDecimalDigits(s string) (int, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return i, false
		}
	}
	return len(s), true
}

func parseDecimalOrEmpty(s string) (uint64, bool) {
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

func asciiEqualFold(b []byte, s string) bool {
	return len(b) == len(s) && strings.EqualFold(string(b), s)
}
