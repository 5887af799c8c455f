package httpapi

import "encoding/binary"

// appendBase64 appends standard base64 with padding, as
// base64.StdEncoding.AppendEncode does, two output characters to a table look-up:
// a poll answer is mostly its payloads' base64, and the standard encoder spent three
// quarters of its time.
func appendBase64(b, src []byte) []byte {
	n := (len(src) + 2) / 3 * 4
	b = growBytes(b, n)
	dst := b[len(b) : len(b)+n]
	di := 0
	// Six bytes to eight characters, one 8-byte load and store (the load reads two
	// bytes it does not use: hence 8).
	for len(src) >= 8 {
		x := binary.BigEndian.Uint64(src)
		binary.LittleEndian.PutUint64(dst[di:], uint64(base64Pairs[x>>52&0xfff])|uint64(base64Pairs[x>>40&0xfff])<<16|
			uint64(base64Pairs[x>>28&0xfff])<<32|uint64(base64Pairs[x>>16&0xfff])<<48)
		src, di = src[6:], di+8
	}
	for len(src) >= 3 {
		v := uint(src[0])<<16 | uint(src[1])<<8 | uint(src[2])
		binary.LittleEndian.PutUint16(dst[di:], base64Pairs[v>>12])
		binary.LittleEndian.PutUint16(dst[di+2:], base64Pairs[v&0xfff])
		src, di = src[3:], di+4
	}
	switch len(src) {
	case 2:
		v := uint(src[0])<<16 | uint(src[1])<<8
		binary.LittleEndian.PutUint16(dst[di:], base64Pairs[v>>12])
		dst[di+2], dst[di+3] = base64Alphabet[v>>6&0x3f], '='
	case 1:
		v := uint(src[0]) << 16
		binary.LittleEndian.PutUint16(dst[di:], base64Pairs[v>>12])
		dst[di+2], dst[di+3] = '=', '='
	}
	return b[:len(b)+n]
}

// growBytes makes room for n more bytes after len(b).
func growBytes(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	return append(b[:cap(b)], make([]byte, len(b)+n-cap(b))...)[:len(b)]
}

const base64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

// base64Pairs maps 12 bits to their two characters, the first in the low byte.
var base64Pairs = func() (t [4096]uint16) {
	for v := range t {
		t[v] = uint16(base64Alphabet[v>>6]) | uint16(base64Alphabet[v&0x3f])<<8
	}
	return t
}()
