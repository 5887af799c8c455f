package httpapi

import "encoding/binary"

// decodeBase64To decodes canonical-length standard base64 (whole quads, padding
// only at the end) into dst, which has room for base64.StdEncoding.DecodedLen.
// It reports !ok for anything else, which encoding/base64 may still read (the old
// decoder then does): what it reads, it reads as StdEncoding.Decode does, a quad
// to four table look-ups without the standard decoder's checks per character.
func decodeBase64To(dst, src []byte) (n int, ok bool) {
	if len(src)%4 != 0 || len(src) == 0 {
		return 0, false
	}
	last := src[len(src)-4:]
	src = src[:len(src)-4]
	// Eight characters to six bytes, one 8-byte store (two bytes the next round
	// overwrites: hence the room for 8).
	for len(src) >= 8 && len(dst)-n >= 8 {
		a, b, c, d := base64Values[src[0]], base64Values[src[1]], base64Values[src[2]], base64Values[src[3]]
		e, f, g, h := base64Values[src[4]], base64Values[src[5]], base64Values[src[6]], base64Values[src[7]]
		if (a|b|c|d|e|f|g|h)&0x80 != 0 {
			return 0, false
		}
		v := uint64(a)<<58 | uint64(b)<<52 | uint64(c)<<46 | uint64(d)<<40 | uint64(e)<<34 | uint64(f)<<28 | uint64(g)<<22 | uint64(h)<<16
		binary.BigEndian.PutUint64(dst[n:], v)
		src, n = src[8:], n+6
	}
	for len(src) >= 4 {
		a, b, c, d := base64Values[src[0]], base64Values[src[1]], base64Values[src[2]], base64Values[src[3]]
		if (a|b|c|d)&0x80 != 0 {
			return 0, false
		}
		v := uint(a)<<18 | uint(b)<<12 | uint(c)<<6 | uint(d)
		dst[n], dst[n+1], dst[n+2] = byte(v>>16), byte(v>>8), byte(v)
		src, n = src[4:], n+3
	}
	a, b := base64Values[last[0]], base64Values[last[1]]
	if (a|b)&0x80 != 0 {
		return 0, false
	}
	v := uint(a)<<18 | uint(b)<<12
	switch {
	case last[2] == '=' && last[3] == '=':
		dst[n] = byte(v >> 16)
		return n + 1, true
	case last[3] == '=':
		c := base64Values[last[2]]
		if c&0x80 != 0 {
			return 0, false
		}
		v |= uint(c) << 6
		dst[n], dst[n+1] = byte(v>>16), byte(v>>8)
		return n + 2, true
	}
	c, d := base64Values[last[2]], base64Values[last[3]]
	if (c|d)&0x80 != 0 {
		return 0, false
	}
	v |= uint(c)<<6 | uint(d)
	dst[n], dst[n+1], dst[n+2] = byte(v>>16), byte(v>>8), byte(v)
	return n + 3, true
}

// base64Values maps a character to its 6 bits, or 0xff outside the alphabet.
var base64Values = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i := range len(base64Alphabet) {
		t[base64Alphabet[i]] = byte(i)
	}
	return t
}()
