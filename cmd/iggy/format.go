package main

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Value formats shared by the commands: byte sizes, durations in Rust's humantime
// notation (what the reference CLI reads and prints: apache/iggy
// core/common/src/utils/{byte_size,duration,expiry}.rs), and timestamps.

// displayUnits are the decimal units of a size shown to a person.
var displayUnits = [...]string{"KB", "MB", "GB", "TB", "PB", "EB"}

// displaySize renders a byte count as the reference CLI shows sizes: below 1000 as
// "N B", otherwise with two decimals in the largest decimal unit that fits
// ("1.00 KB", "568.00 MB").
func displaySize(n uint64) string {
	if n < 1000 {
		return strconv.FormatUint(n, 10) + " B"
	}
	value := float64(n)
	unit := -1
	for value >= 1000 && unit < len(displayUnits)-1 {
		value /= 1000
		unit++
	}
	return strconv.FormatFloat(value, 'f', 2, 64) + " " + displayUnits[unit]
}

// sizeUnits are the units parseSize accepts, lower-cased, with and without the B.
var sizeUnits = map[string]uint64{
	"": 1, "b": 1,
	"k": 1e3, "kb": 1e3, "ki": 1 << 10, "kib": 1 << 10,
	"m": 1e6, "mb": 1e6, "mi": 1 << 20, "mib": 1 << 20,
	"g": 1e9, "gb": 1e9, "gi": 1 << 30, "gib": 1 << 30,
	"t": 1e12, "tb": 1e12, "ti": 1 << 40, "tib": 1 << 40,
	"p": 1e15, "pb": 1e15, "pi": 1 << 50, "pib": 1 << 50,
	"e": 1e18, "eb": 1e18, "ei": 1 << 60, "eib": 1 << 60,
}

// parseSize reads a byte size: a number (decimals allowed) and an optional unit,
// decimal (KB, MB, ...) or binary (KiB, MiB, ...), any case, with or without a
// space: "1048576", "15GB", "1 GiB", "1.5 MiB".
func parseSize(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return !unicode.IsDigit(r) && r != '.' })
	if i < 0 {
		i = len(t)
	}
	number, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	scale, ok := sizeUnits[unit]
	if number == "" || !ok {
		return 0, fmt.Errorf("invalid size %q: expected a number of bytes with an optional unit (B, KB, KiB, MB, MiB, GB, GiB, ...)", s)
	}
	if whole, err := strconv.ParseUint(number, 10, 64); err == nil {
		hi, lo := bits.Mul64(whole, scale)
		if hi != 0 {
			return 0, fmt.Errorf("invalid size %q: more than %d bytes", s, uint64(math.MaxUint64))
		}
		return lo, nil
	}
	f, err := strconv.ParseFloat(number, 64)
	if err != nil || f*float64(scale) >= math.MaxUint64 {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	return uint64(f * float64(scale)), nil
}

// Humantime's units (the Rust crate the reference parses and prints durations
// with): a month is 30.44 days and a year 365.25 days.
const (
	secondsPerMinute = 60
	secondsPerHour   = 3600
	secondsPerDay    = 86400
	secondsPerMonth  = 2_630_016
	secondsPerYear   = 31_557_600
)

var durationUnits = map[string]time.Duration{
	"nsec": time.Nanosecond, "ns": time.Nanosecond,
	"usec": time.Microsecond, "us": time.Microsecond, "µs": time.Microsecond,
	"msec": time.Millisecond, "ms": time.Millisecond,
	"seconds": time.Second, "second": time.Second, "sec": time.Second, "secs": time.Second, "s": time.Second,
	"minutes": time.Minute, "minute": time.Minute, "min": time.Minute, "mins": time.Minute, "m": time.Minute,
	"hours": time.Hour, "hour": time.Hour, "hr": time.Hour, "hrs": time.Hour, "h": time.Hour,
	"days": 24 * time.Hour, "day": 24 * time.Hour, "d": 24 * time.Hour,
	"weeks": 7 * 24 * time.Hour, "week": 7 * 24 * time.Hour, "w": 7 * 24 * time.Hour,
	"months": secondsPerMonth * time.Second, "month": secondsPerMonth * time.Second, "M": secondsPerMonth * time.Second,
	"years": secondsPerYear * time.Second, "year": secondsPerYear * time.Second, "y": secondsPerYear * time.Second,
}

// parseHumanDuration reads a humantime duration: number-unit pairs, spaces
// optional between them ("15days", "1day 1hour 1min 1sec", "1h30m").
func parseHumanDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, errors.New("empty duration")
	}
	var total time.Duration
	for t != "" {
		i := strings.IndexFunc(t, func(r rune) bool { return r < '0' || r > '9' })
		if i == 0 {
			return 0, fmt.Errorf("invalid duration %q: expected a number at %q", s, t)
		}
		if i < 0 || strings.TrimSpace(t[i:]) == "" {
			return 0, fmt.Errorf("invalid duration %q: a unit must follow %s (s, min, h, days, ...)", s, strings.TrimSpace(t))
		}
		n, err := strconv.ParseUint(t[:i], 10, 63)
		if err != nil {
			return 0, fmt.Errorf("invalid duration %q: %s is too large", s, t[:i])
		}
		t = strings.TrimLeftFunc(t[i:], unicode.IsSpace)
		j := strings.IndexFunc(t, func(r rune) bool { return (r >= '0' && r <= '9') || unicode.IsSpace(r) })
		if j < 0 {
			j = len(t)
		}
		unit, ok := durationUnits[t[:j]]
		if !ok {
			return 0, fmt.Errorf("invalid duration %q: unknown unit %q (s, min, h, days, weeks, months, years, ...)", s, t[:j])
		}
		part := time.Duration(n) * unit
		if n != 0 && (part/unit != time.Duration(n) || total+part < total) {
			return 0, fmt.Errorf("invalid duration %q: too long", s)
		}
		total += part
		t = strings.TrimLeftFunc(t[j:], unicode.IsSpace)
	}
	return total, nil
}

// formatHumanDuration prints d as humantime does: years, months, days, then h, m,
// s, ms, us, ns, each non-zero part once ("15days", "1day 1h 1m 1s").
func formatHumanDuration(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	secs := uint64(d / time.Second)
	nanos := uint64(d % time.Second)
	var parts []string
	add := func(n uint64, one, many string) {
		switch {
		case n == 1:
			parts = append(parts, "1"+one)
		case n > 1:
			parts = append(parts, strconv.FormatUint(n, 10)+many)
		}
	}
	add(secs/secondsPerYear, "year", "years")
	secs %= secondsPerYear
	add(secs/secondsPerMonth, "month", "months")
	secs %= secondsPerMonth
	add(secs/secondsPerDay, "day", "days")
	secs %= secondsPerDay
	add(secs/secondsPerHour, "h", "h")
	secs %= secondsPerHour
	add(secs/secondsPerMinute, "m", "m")
	add(secs%secondsPerMinute, "s", "s")
	add(nanos/1e6, "ms", "ms")
	add(nanos/1e3%1e3, "us", "us")
	add(nanos%1e3, "ns", "ns")
	return strings.Join(parts, " ")
}

// Words the reference accepts for "never" and for "the server's default" in expiry
// arguments (core/common/src/utils/expiry.rs).
var (
	neverWords         = []string{"unlimited", "Unlimited", "none", "None", "never_expire"}
	serverDefaultWords = []string{"default", "Default", "server_default", "Server_default"}
)

// parseExpiryParts sums the parts of an expiry given as several arguments ("1day",
// "1hour"). It returns never for a lone never word and zero (the server default)
// for none at all or a lone default word.
func parseExpiryParts(parts []string) (d time.Duration, never bool, err error) {
	if len(parts) == 1 {
		switch p := parts[0]; {
		case containsWord(neverWords, p):
			return 0, true, nil
		case containsWord(serverDefaultWords, p):
			return 0, false, nil
		}
	}
	if len(parts) == 0 {
		return 0, false, nil
	}
	d, err = parseHumanDuration(strings.Join(parts, " "))
	if err != nil {
		return 0, false, fmt.Errorf("%w; or one of: unlimited, none, never_expire, server_default", err)
	}
	if d < time.Microsecond {
		return 0, false, fmt.Errorf("invalid duration %q: shorter than a microsecond", strings.Join(parts, " "))
	}
	return d, false, nil
}

func containsWord(words []string, w string) bool {
	for _, x := range words {
		if x == w {
			return true
		}
	}
	return false
}

// Reply values with special meanings.
const (
	expiryServerDefault  = 0
	expiryNever          = math.MaxUint64
	topicSizeDefault     = 0
	topicSizeUnlimited   = math.MaxUint64
	microsecondsPerMilli = 1000
)

// displayExpiry shows a topic's message expiry in microseconds.
func displayExpiry(micros uint64) string {
	switch micros {
	case expiryNever:
		return "unlimited"
	case expiryServerDefault:
		return "server_default"
	}
	if micros > uint64(math.MaxInt64/int64(time.Microsecond)) {
		return strconv.FormatUint(micros/1e6, 10) + "s"
	}
	return formatHumanDuration(time.Duration(micros) * time.Microsecond)
}

// displayTopicSize shows a topic's size cap in bytes.
func displayTopicSize(bytes uint64) string {
	switch bytes {
	case topicSizeUnlimited:
		return "unlimited"
	case topicSizeDefault:
		return "server_default"
	}
	return displaySize(bytes)
}

// timeLayout is how the reference CLI prints timestamps.
const timeLayout = "2006-01-02 15:04:05"

// utcTime shows a timestamp in microseconds since the epoch, in UTC.
func utcTime(micros uint64) string {
	return time.UnixMicro(int64(micros)).UTC().Format(timeLayout)
}

// localTime shows a timestamp in microseconds since the epoch, in local time.
func localTime(micros uint64) string {
	return time.UnixMicro(int64(micros)).Local().Format(timeLayout)
}
