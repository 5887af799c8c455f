// Package segment is the partition log on disk: segments of message batches stored
// exactly in their wire layout, their indexes, the partition's consumer offsets,
// durability per topic, retention, and recovery that never serves a corrupt batch and
// never loses an acknowledged one.
//
// # Files
//
// A partition directory holds (iggy.apache.org/docs/server/storage-engine):
//
//	00000000000000000000.log    batches back to back, no padding, each exactly as
//	00000000000000000000.index  stamped by wire.StampBatch and sent by the producer:
//	00000000000000004096.log      [batch header 256][frame 48 + payload + headers]*
//	00000000000000004096.index  one 24-byte index entry per batch:
//	offsets/consumers/{id}        [offset u64][timestamp u64][position u64]
//	offsets/groups/{id}         16 bytes: [offset u64][XxHash3-64 of those 8 bytes]
//
// A segment is named by the offset of its first message (20 digits). Appends go to
// the last segment; once it holds segment_size bytes or more (the crossing batch goes
// in whole) it is sealed: its .log is fdatasynced, its whole .index written and
// fdatasynced, and the next append opens the segment named by the next offset. Sealed
// segments never change. All integers are little-endian.
//
// # I/O
//
// The log does no I/O of its own. It asks a Storage for writes, reads, fdatasyncs,
// truncations and removals, which complete later (Storage documents the contract):
// the shard's io_uring ring in the server, OSStorage (blocking system calls) for
// benchmarks and tools, SimDisk (faults and crashes) in tests. An append is one write
// of the caller's bytes, linked to an fdatasync when enforce_fsync is set; otherwise
// an fdatasync follows whenever messages_required_to_save messages or
// size_of_messages_required_to_save bytes have been written since the last, one at
// a time (a save that comes due while one is in flight follows it: see Log.save).
//
// The owner learns through Hooks how far appends are written (Written), how far they
// are durable (Durable: acknowledge producers up to here) and which failed (Failed: a
// write or fdatasync error, or a full disk, is reported for every batch it affects;
// the log then cuts its tail back to the last batch known good and goes on).
//
// A FileCache bounds the files open at once under many logs' storages: a log
// holds a handle to each of its files, and the cache keeps the least recently
// used closed until a request needs them again (filecache.go).
//
// # Recovery
//
// Open walks the last segment batch by batch (lengths, every checksum, the offset
// chain), cuts a torn or corrupt tail, rebuilds a short or missing index, and trusts
// a sealed segment on its index; recover's decision table says why that is safe.
// A read verifies a batch the first time it returns it after it was written or
// recovered, and each segment remembers the byte ranges verified, which later reads
// trust (verified.go); the scrubber re-verifies sealed segments at its caller's pace
// (scrub.go). A batch found corrupt, by a read or the scrubber, is reported with its
// segment and position (CorruptBatchError) and never served.
//
// # Plans
//
// A read of whole batches, all verified and durable, can be answered without
// its bytes: PlanRead gives the runs of the segment files that hold them, with
// descriptors of the plan's own, for the server to splice to the socket; it
// declines every other read, which ReadAsync copies (plan.go says why each).
// Nothing of the log waits for a plan.
//
// # Memory
//
// The open segment and the IndexCacheSegments most recently read sealed segments
// keep their index in memory (24 bytes per batch); other sealed segments keep only
// their bounds. A read that needs a cold index reads it back with a blocking read
// before the read is planned, checks it against the log, and rebuilds it from the
// log if it fails.
//
// # Using it
//
//	st, _ := segment.NewOSStorage(dir)        // or a shard.Disk storage, or a SimDisk
//	log, report, err := segment.Open(st, cfg, segment.Hooks{Durable: ack, Failed: nack})
//	wire.StampBatch(batch, partitionID, log.NextOffset(), nowMicros)
//	err = log.Append(batch)                   // then the owner's loop calls st.Poll
//	err = log.Read(segment.Query{Kind: segment.PollOffset, Value: 42, Count: 100}, &polled)
//	for _, r := range polled.Records { send(r.Header, r.Frames) }
//	log.StoreConsumerOffset(segment.Consumer, id, offset)
//	removed, err := log.ApplyRetention(nowMicros)
//	err = log.Close()
package segment
