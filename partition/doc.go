// Package partition is one shard's partition plane: everything the shard does for
// the partitions it owns, with no knowledge of connections, sessions or users.
//
// A Store holds the shard's partitions by (stream, topic, partition) id. Each has a
// segment.Log (its segments, indexes and consumer offsets), its topic's Config, and a
// directory (iggy.apache.org/docs/server/storage-engine, "Directory layout"):
//
//	local_data/streams/{s}/topics/{t}/partitions/{p}/
//	    00000000000000000000.log     batches, exactly as stamped
//	    00000000000000000000.index   24-byte entries [offset][timestamp][position]
//	    offsets/consumers/{id}       [offset u64][XxHash3-64 of it]
//	    offsets/groups/{id}
//
// The glue (shard/) decodes requests, resolves stream and topic ids, picks the
// partition (ResolvePartition: explicit id, Balanced with a RoundRobin, or
// MessagesKey with PartitionForKey), checks permissions, and calls:
//
//	Send                  SendMessages: validate, stamp, append; SendCompletion.SendDone
//	                      fires once stored per the topic's policy -> AppendSendReply
//	Poll                  PollMessages, every strategy, auto-commit; PollCompletion.PollDone
//	                      -> AppendPollBuffers (vectored) or AppendPollReply
//	ConsumerOffset,       GetConsumerOffset (20 bytes or empty body),
//	StoreConsumerOffset,  StoreConsumerOffset, DeleteConsumerOffset
//	DeleteConsumerOffset
//	Create, Open, Delete*, Purge*, Reconfigure, DeleteSegments, ApplyRetention,
//	Info, Totals, Err, Recover
//	PollIO                every loop turn: runs storage completions, which fire the above
//
// Purge restarts a partition at offset 0 with no consumer offsets, as the reference
// server does. Each partition gets its own segment.Storage from a StorageProvider
// (OSStorages, or the shard's ring-backed provider), rooted at its directory.
//
// Every error a client sees is a wire.ErrorCode chosen as the reference server
// (apache/iggy core/server/src/dispatch.rs) answers the command (sends and offset
// writes on an unknown partition: 20; polls and offset reads: 3007).
//
// A send's life. The batch stays in the request buffer from decode to disk:
//
//	request buffer --ValidateBatch--> --StampBatch (in place)--> Log.Append (one write)
//	   Hooks.Written (enforce_fsync off) or Hooks.Durable (on) --> SendDone(token, confirmation)
//	   Hooks.Failed: batches cut from the log --> SendDone(token, _, 4006)
//
// Pending sends wait in a per-partition ring in offset order, with the caller's
// completion interface and token, so admitting a batch allocates nothing.
//
// A poll's life: Log.ReadAsync reads the batches into the caller's PollResult,
// verifies every checksum, and slices the batches at either end of the range
// (wire.SliceBatch); the reply is the 16-byte prefix followed by each record's
// header and frames, sent as they lie in the read buffer.
package partition
