package fdpass

import "github.com/iggy-shard/iggy-shard/ring"

// user_data layout: see the package doc.
const (
	magic      uint64 = 0x46 // 'F'
	magicShift        = 56
	magicMask  uint64 = 0x7f << magicShift
	kindShift         = 53
	kindMask   uint64 = 0x7 << kindShift
	midShift          = 32
	midBits           = 21
	midMask    uint64 = (1<<midBits - 1) << midShift
	lowMask    uint64 = 1<<32 - 1
)

type kind uint64

const (
	kindIncoming kind = 1 // on the target ring: a file arrived
	kindSend     kind = 2 // on the sender ring: the msg_ring completed
	kindClose    kind = 3 // on the sender ring: the sender's slot was closed
)

// slotMax is the largest explicit target slot user_data can carry (2^21 - 2); the
// kernel's registered-file tables are at most 2^20 slots.
const slotMax = 1<<midBits - 2

func packUserData(k kind, mid uint32, low uint32) uint64 {
	return ring.UserDataUntracked | magic<<magicShift | uint64(k)<<kindShift |
		(uint64(mid)<<midShift)&midMask | uint64(low)
}

func unpackUserData(userData uint64) (k kind, mid uint32, low uint32, ok bool) {
	if userData&ring.UserDataUntracked == 0 || userData&magicMask != magic<<magicShift {
		return 0, 0, 0, false
	}
	return kind((userData & kindMask) >> kindShift), uint32((userData & midMask) >> midShift), uint32(userData & lowMask), true
}

// Owns reports whether a CQE's user_data was caused by this package: route such CQEs
// to Sender.Complete on the sending shard and to Incoming on the receiving shard.
// Other untracked user_data values must not have bits 56..62 equal to 0x46.
func Owns(userData uint64) bool {
	_, _, _, ok := unpackUserData(userData)
	return ok
}
