package partition

import "testing"

// BenchmarkSendSmall: one SendMessages batch of a single 100-byte message per op,
// so that the fixed cost of a send (validation, stamp, the group's prepare, journal
// and commit, the append's write) shows rather than the bytes. Compare with the same
// benchmark on a build without the partition group to see what a prepare costs.
func BenchmarkSendSmall(b *testing.B) {
	batch := makeBatch(b, 0, 1, 100)
	benchmarkSend(b, batch, noSaveConfig())
}

// BenchmarkSendFsync: BenchmarkSend's batch (1000 messages of 1000 bytes) on an
// enforce_fsync topic, each acknowledged once durable before the next is sent: the
// durable partition journal adds its write and fdatasync to the log's.
func BenchmarkSendFsync(b *testing.B) {
	batch := makeBatch(b, 0, 1000, 1000)
	benchmarkSend(b, batch, Config{PartitionsCount: 1, EnforceFsync: true})
}
