package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/iggy-shard/iggy-shard/wire"
)

// headerKinds are the kind names of -H, any case.
var headerKinds = map[string]wire.HeaderKind{
	"raw": wire.HeaderRaw, "string": wire.HeaderString, "bool": wire.HeaderBool,
	"int8": wire.HeaderInt8, "int16": wire.HeaderInt16, "int32": wire.HeaderInt32, "int64": wire.HeaderInt64,
	"int128": wire.HeaderInt128, "uint8": wire.HeaderUint8, "uint16": wire.HeaderUint16, "uint32": wire.HeaderUint32,
	"uint64": wire.HeaderUint64, "uint128": wire.HeaderUint128, "float32": wire.HeaderFloat32, "float64": wire.HeaderFloat64,
}

// parseHeaders reads -H values, "key:kind:value" entries joined by commas (the
// value may hold ':' but not ','), into a user headers block with string keys.
func parseHeaders(specs []string) ([]byte, error) {
	var block []byte
	seen := map[string]bool{}
	for _, spec := range specs {
		for _, entry := range strings.Split(spec, ",") {
			key, rest, ok1 := strings.Cut(entry, ":")
			kindName, value, ok2 := strings.Cut(rest, ":")
			if !ok1 || !ok2 || key == "" {
				return nil, usageErrorf("invalid header %q: expected key:kind:value", entry)
			}
			kind, ok := headerKinds[strings.ToLower(kindName)]
			if !ok {
				return nil, usageErrorf("invalid header %q: unknown kind %q (raw, string, bool, int8..int128, uint8..uint128, float32, float64)", entry, kindName)
			}
			v, err := headerValue(kind, value)
			if err != nil {
				return nil, usageErrorf("invalid header %q: %v", entry, err)
			}
			if seen[key] {
				return nil, usageErrorf("header %q is given twice", key)
			}
			seen[key] = true
			if block, err = wire.AppendTLV(block, wire.HeaderString, []byte(key), kind, v); err != nil {
				return nil, usageErrorf("invalid header %q: key and value must be 1 to 255 bytes", entry)
			}
		}
	}
	if _, err := wire.ValidateUserHeaders(block); err != nil {
		return nil, usageErrorf("invalid headers: %v", err)
	}
	return block, nil
}

// headerValue encodes a value of kind from its text: numbers little-endian, bools
// as one byte.
func headerValue(kind wire.HeaderKind, s string) ([]byte, error) {
	le := binary.LittleEndian
	switch kind {
	case wire.HeaderRaw, wire.HeaderString:
		return []byte(s), nil
	case wire.HeaderBool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not true or false", s)
		}
		if b {
			return []byte{1}, nil
		}
		return []byte{0}, nil
	case wire.HeaderFloat32:
		f, err := strconv.ParseFloat(s, 32)
		if err != nil {
			return nil, fmt.Errorf("%q is not a float32", s)
		}
		return le.AppendUint32(nil, math.Float32bits(float32(f))), nil
	case wire.HeaderFloat64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a float64", s)
		}
		return le.AppendUint64(nil, math.Float64bits(f)), nil
	case wire.HeaderInt128, wire.HeaderUint128:
		return int128Bytes(s, kind == wire.HeaderInt128)
	}
	size := kind.FixedSizeBytes()
	signed := kind >= wire.HeaderInt8 && kind <= wire.HeaderInt64
	var u uint64
	if signed {
		n, err := strconv.ParseInt(s, 10, size*8)
		if err != nil {
			return nil, fmt.Errorf("%q is not an %s", s, kind)
		}
		u = uint64(n)
	} else {
		n, err := strconv.ParseUint(s, 10, size*8)
		if err != nil {
			return nil, fmt.Errorf("%q is not a %s", s, kind)
		}
		u = n
	}
	return le.AppendUint64(nil, u)[:size], nil
}

// int128Bytes encodes a decimal 128-bit integer, little-endian, two's complement.
func int128Bytes(s string, signed bool) ([]byte, error) {
	n, ok := new(big.Int).SetString(s, 10)
	lo := new(big.Int)
	hi := new(big.Int).Lsh(big.NewInt(1), 128)
	if signed {
		lo.Neg(new(big.Int).Lsh(big.NewInt(1), 127))
		hi.Lsh(big.NewInt(1), 127)
	}
	if !ok || n.Cmp(lo) < 0 || n.Cmp(hi) >= 0 {
		return nil, fmt.Errorf("%q is not a %s", s, map[bool]string{true: "int128", false: "uint128"}[signed])
	}
	if n.Sign() < 0 {
		n.Add(n, new(big.Int).Lsh(big.NewInt(1), 128))
	}
	be := n.FillBytes(make([]byte, 16))
	for i, j := 0, 15; i < j; i, j = i+1, j-1 {
		be[i], be[j] = be[j], be[i]
	}
	return be, nil
}
