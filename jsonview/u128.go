package jsonview

import (
	"fmt"
	"math/bits"
	"strconv"

	"github.com/iggy-shard/iggy-shard/wire"
)

// U128 is a message id: a bare JSON integer, which may exceed 2^64 (the Web UI
// reads it with json-bigint).
type U128 wire.Uint128

func (u U128) MarshalJSON() ([]byte, error) { return AppendU128(nil, wire.Uint128(u)), nil }

func (u U128) String() string { return string(AppendU128(nil, wire.Uint128(u))) }

// UnmarshalJSON reads the bare integer back, for scripts in Go and the tests.
func (u *U128) UnmarshalJSON(b []byte) error {
	var v wire.Uint128
	for _, c := range b {
		if c < '0' || c > '9' {
			return fmt.Errorf("not a u128: %s", b)
		}
		// v = v*10 + digit, refused past 128 bits.
		hiHi, hiLo := bits.Mul64(v.Hi, 10)
		loHi, loLo := bits.Mul64(v.Lo, 10)
		lo, carry := bits.Add64(loLo, uint64(c-'0'), 0)
		hi, overflow := bits.Add64(hiLo, loHi, carry)
		if hiHi != 0 || overflow != 0 {
			return fmt.Errorf("not a u128: %s", b)
		}
		v = wire.Uint128{Hi: hi, Lo: lo}
	}
	if len(b) == 0 {
		return fmt.Errorf("not a u128: %s", b)
	}
	*u = U128(v)
	return nil
}

// AppendU128 appends u in decimal.
func AppendU128(b []byte, u wire.Uint128) []byte {
	if u.Hi == 0 {
		return strconv.AppendUint(b, u.Lo, 10)
	}
	const tenPow19 = 10_000_000_000_000_000_000
	// hi:lo = q*10^19 + r, with q of up to 128 bits and r of 19 digits.
	qHi, rHi := u.Hi/tenPow19, u.Hi%tenPow19
	qLo, r := bits.Div64(rHi, u.Lo, tenPow19)
	b = AppendU128(b, wire.Uint128{Hi: qHi, Lo: qLo})
	var digits [19]byte
	for i := len(digits) - 1; i >= 0; i-- {
		digits[i] = byte('0' + r%10)
		r /= 10
	}
	return append(b, digits[:]...)
}
