package wire_test

import (
	"fmt"

	"github.com/iggy-shard/iggy-shard/wire"
)

// A producer builds a batch, the server admits and stamps it, and a consumer's poll
// reply serves part of it back.
func ExampleBatchBuilder() {
	// Producer: two messages; the second is the earlier, so it sets origin_timestamp.
	var bb wire.BatchBuilder
	bb.Reset(nil)
	_ = bb.Append(wire.Uint128{Lo: 1}, 1_700_000_000_000_250, []byte("first"), nil)
	_ = bb.Append(wire.Uint128{Lo: 2}, 1_700_000_000_000_000, []byte("second"), nil)
	batch, err := bb.Finish()
	if err != nil {
		panic(err)
	}

	// Server: admission, then the partition's stamp (partition 0, offsets from 41).
	if err := wire.ValidateBatch(batch); err != nil {
		panic(err) // the server answers with err as the reply status instead
	}
	wire.StampBatch(batch, 0, 41, 1_700_000_000_900_000)

	// Server: a poll from offset 42 gets a slice: a fresh header and the stored frames.
	var hdr [wire.BatchHeaderSize]byte
	frames, count, _ := wire.SliceBatch(&hdr, batch, 42, 10)
	reply := wire.PolledMessages{PartitionID: 0, CurrentOffset: 42, MessagesCount: count}
	body := reply.AppendPrefix(nil)
	body = append(append(body, hdr[:]...), frames...)

	// Consumer.
	var polled wire.PolledMessages
	if err := polled.Decode(body); err != nil {
		panic(err)
	}
	for it := polled.Messages(); it.Next(); {
		m := it.Message()
		fmt.Printf("offset %d id %d %q produced at %d\n", m.Offset, m.ID().Lo, m.Payload(), m.OriginTimestamp)
	}
	// Output:
	// offset 42 id 2 "second" produced at 1700000000000000
}
