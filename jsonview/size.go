package jsonview

import (
	"math/bits"
	"strconv"
	"strings"
)

// exactUnits are ordered by size, largest first.
var exactUnits = [...]struct {
	name  string
	bytes uint64
}{
	{"EiB", 1 << 60}, {"EB", 1e18}, {"PiB", 1 << 50}, {"PB", 1e15},
	{"TiB", 1 << 40}, {"TB", 1e12}, {"GiB", 1 << 30}, {"GB", 1e9},
	{"MiB", 1 << 20}, {"MB", 1e6}, {"KiB", 1 << 10}, {"KB", 1e3},
}

// ByteSize is a size in bytes as byte-unit's exact string (apache/iggy
// core/common/src/utils/byte_size.rs), the JSON's sizes: the largest unit in which
// it is a whole number of thousandths, trailing zeros cut ("1 KiB", "1.234 KB",
// "51116 KiB"), else "N B".
func ByteSize(n uint64) string {
	for _, u := range exactUnits {
		if n < u.bytes {
			continue
		}
		// n·1000 / u, exactly: n < 2^64 and u ≥ 1000 keep the quotient in 64 bits.
		hi, lo := bits.Mul64(n, 1000)
		thousandths, rem := bits.Div64(hi, lo, u.bytes)
		if rem != 0 {
			continue
		}
		text := strconv.FormatUint(thousandths/1000, 10)
		if frac := thousandths % 1000; frac != 0 {
			text += "." + strings.TrimRight(strconv.FormatUint(1000+frac, 10)[1:], "0")
		}
		return text + " " + u.name
	}
	return strconv.FormatUint(n, 10) + " B"
}
