package main

import (
	"encoding/hex"
	"math"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/jsonview"
	"github.com/iggy-shard/iggy-shard/wire"
)

func TestDisplaySize(t *testing.T) {
	for n, want := range map[uint64]string{
		0: "0 B", 999: "999 B", 1000: "1.00 KB", 568_000_000: "568.00 MB", 2 << 30: "2.15 GB", math.MaxUint64: "18.45 EB",
	} {
		if got := displaySize(n); got != want {
			t.Errorf("displaySize(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestParseSize(t *testing.T) {
	for s, want := range map[string]uint64{
		"1048576": 1048576, "15GB": 15e9, "1 GiB": 1 << 30, "1.5 MiB": 3 << 19, "128mib": 128 << 20, "2 kb": 2000, "7B": 7,
	} {
		if got, err := parseSize(s); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "GB", "1 XB", "-1", "20 EiB", "1e3"} {
		if got, err := parseSize(s); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", s, got)
		}
	}
}

func TestHumanDurations(t *testing.T) {
	day := 24 * time.Hour
	for s, want := range map[string]time.Duration{
		"15days": 15 * day, "1day 1hour 1min 1sec": day + time.Hour + time.Minute + time.Second, "1h30m": 90 * time.Minute,
		"2 weeks": 14 * day, "1month": secondsPerMonth * time.Second, "1y": secondsPerYear * time.Second, "250ms": 250 * time.Millisecond,
	} {
		if got, err := parseHumanDuration(s); err != nil || got != want {
			t.Errorf("parseHumanDuration(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "days", "15", "1 fortnight", "99999999999999999999s", "300000years"} {
		if got, err := parseHumanDuration(s); err == nil {
			t.Errorf("parseHumanDuration(%q) = %v, want an error", s, got)
		}
	}
	for d, want := range map[time.Duration]string{
		15 * day: "15days", day + time.Hour + time.Minute + time.Second: "1day 1h 1m 1s", time.Minute: "1m",
		secondsPerYear*time.Second + 2*day: "1year 2days", 1500 * time.Microsecond: "1ms 500us", 0: "0s",
	} {
		if got := formatHumanDuration(d); got != want {
			t.Errorf("formatHumanDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestParseExpiryParts(t *testing.T) {
	for _, tc := range []struct {
		parts []string
		d     time.Duration
		never bool
	}{
		{nil, 0, false}, {[]string{"server_default"}, 0, false}, {[]string{"unlimited"}, 0, true},
		{[]string{"never_expire"}, 0, true}, {[]string{"1day", "2h"}, 26 * time.Hour, false},
	} {
		d, never, err := parseExpiryParts(tc.parts)
		if err != nil || d != tc.d || never != tc.never {
			t.Errorf("parseExpiryParts(%q) = %v, %v, %v", tc.parts, d, never, err)
		}
	}
	if _, _, err := parseExpiryParts([]string{"unlimited", "1day"}); err == nil {
		t.Error("a never word among durations is accepted")
	}
}

// Header values are encoded little-endian in their kind's size, and read back
// in the same text.
func TestHeaderValues(t *testing.T) {
	for _, tc := range []struct {
		kind       wire.HeaderKind
		text, hexb string
	}{
		{wire.HeaderBool, "true", "01"}, {wire.HeaderInt8, "-2", "fe"}, {wire.HeaderUint16, "513", "0102"},
		{wire.HeaderInt32, "-5", "fbffffff"}, {wire.HeaderUint64, "1", "0100000000000000"},
		{wire.HeaderInt128, "-1", "ffffffffffffffffffffffffffffffff"},
		{wire.HeaderUint128, "340282366920938463463374607431768211455", "ffffffffffffffffffffffffffffffff"},
		{wire.HeaderUint128, "256", "00010000000000000000000000000000"},
		{wire.HeaderFloat32, "1.5", "0000c03f"}, {wire.HeaderFloat64, "-2", "00000000000000c0"},
		{wire.HeaderString, "a:b", "613a62"},
	} {
		b, err := headerValue(tc.kind, tc.text)
		if err != nil || hex.EncodeToString(b) != tc.hexb {
			t.Errorf("headerValue(%s, %q) = %x, %v; want %s", tc.kind, tc.text, b, err, tc.hexb)
			continue
		}
		if back := jsonview.ValueText(tc.kind, b); back != tc.text {
			t.Errorf("jsonview.ValueText(%s, %x) = %q, want %q", tc.kind, b, back, tc.text)
		}
	}
	for _, tc := range []struct {
		kind wire.HeaderKind
		text string
	}{
		{wire.HeaderInt8, "128"}, {wire.HeaderUint32, "-1"}, {wire.HeaderInt128, "170141183460469231731687303715884105728"},
		{wire.HeaderUint128, "-1"}, {wire.HeaderFloat32, "x"}, {wire.HeaderBool, "2"},
	} {
		if b, err := headerValue(tc.kind, tc.text); err == nil {
			t.Errorf("headerValue(%s, %q) = %x, want an error", tc.kind, tc.text, b)
		}
	}
	if got := jsonview.ValueText(wire.HeaderUint32, []byte{1}); got != "0x01" {
		t.Errorf("a value of the wrong size: %q", got)
	}
}

func TestServerFileName(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:8090": "127.0.0.1_8090.toml", "[::1]:8090": "___1__8090.toml", "iggy-1.example.com:80": "iggy-1.example.com_80.toml",
		"../../etc:1": ".._.._etc_1.toml",
	} {
		if got := serverFileName(addr); got != want {
			t.Errorf("serverFileName(%q) = %q, want %q", addr, got, want)
		}
	}
}
