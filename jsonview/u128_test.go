package jsonview

import (
	"math"
	"math/big"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

func TestU128(t *testing.T) {
	for _, u := range []wire.Uint128{{}, {Lo: 9}, {Lo: 42}, {Hi: 1}, {Lo: 1, Hi: 1}, {Hi: 5421010862427522170, Lo: 687399551400673279},
		{Hi: 5421010862427522170, Lo: 687399551400673280}, {Hi: math.MaxUint64, Lo: math.MaxUint64},
		{Hi: 10_000_000_000_000_000_000, Lo: 0}, {Hi: 1 << 63, Lo: 1}} {
		want := new(big.Int).Lsh(new(big.Int).SetUint64(u.Hi), 64)
		want.Or(want, new(big.Int).SetUint64(u.Lo))
		b, _ := U128(u).MarshalJSON()
		if string(b) != want.String() || U128(u).String() != want.String() {
			t.Errorf("%#x:%#x: %s, want %s", u.Hi, u.Lo, b, want)
		}
		var back U128
		if err := back.UnmarshalJSON(b); err != nil || wire.Uint128(back) != u {
			t.Errorf("%v -> %s -> %v, %v", u, b, back, err)
		}
	}
	var x U128
	for _, bad := range []string{"340282366920938463463374607431768211456", "-1", "", "1.5", `"1"`} {
		if x.UnmarshalJSON([]byte(bad)) == nil {
			t.Errorf("%s read as a u128", bad)
		}
	}
}
