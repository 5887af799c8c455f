package httpapi

import (
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/wire"
)

// The JSON decoders take client bytes: whatever arrives, they answer an error or
// a request the binary protocol's own decoder accepts, and never panic. The seeds
// here and in testdata/fuzz run with every go test.

func FuzzDecodeSendMessages(f *testing.F) {
	for _, s := range []string{
		`{"partitioning":{"kind":"partition_id","value":"AAAAAA=="},"messages":[{"id":0,"payload":"aGVsbG8="}]}`,
		`{"partitioning":{"kind":"balanced","value":""},"messages":[{"id":"0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b","payload":"d29ybGQ=","user_headers":[{"key":{"kind":"string","value":"a2V5XzE="},"value":{"kind":"uint32","value":"AQAAAA=="}}]}]}`,
		`{"partitioning":{"kind":"messages_key","value":"a2V5"},"messages":[{"id":"340282366920938463463374607431768211455","payload":"eA==","user_headers":"AgUAAABrZXlfMQIHAAAAdmFsdWUgMQ=="}]}`,
		`{"partitioning":{"kind":"balanced","value":""},"messages":[]}`,
		`{"messages":[{"payload":"eA=="}]}`,
		`[]`, `null`, `{"partitioning":null,"messages":null}`,
	} {
		f.Add([]byte(s))
	}
	stream, topic := wire.NumericIdentifier(1), wire.StringIdentifier([]byte("t"))
	f.Fuzz(func(t *testing.T, body []byte) {
		b, err := decodeSendMessages(body)
		if err != nil {
			return
		}
		out, err := buildSend(stream, topic, b, time.Unix(1733400000, 0))
		if err != nil {
			return
		}
		var req wire.SendMessages
		if err := req.Decode(out); err != nil {
			t.Fatalf("a built send does not decode: %v", err)
		}
		if err := wire.ValidateBatch(req.Batch); err != nil {
			t.Fatalf("a built batch is refused: %v", err)
		}
		if int(req.MessagesCount) != len(*b.Messages) {
			t.Fatalf("%d messages built of %d", req.MessagesCount, len(*b.Messages))
		}
	})
}

// FuzzDecodeBodies runs every JSON body type of the routes through its decoder
// and its conversion to the wire request.
func FuzzDecodeBodies(f *testing.F) {
	for _, s := range []string{
		`{"name":"topic1","partitions_count":1,"compression_algorithm":"none","max_topic_size":0,"message_expiry":0,"options":{"segment_size":"1 GiB"}}`,
		`{"username":"user1","password":"secret","status":"active","permissions":{"global":{"manage_servers":false,"read_servers":true,"manage_users":false,"read_users":false,"manage_streams":false,"read_streams":true,"manage_topics":false,"read_topics":true,"poll_messages":true,"send_messages":true},"streams":{"0":{"manage_stream":false,"read_stream":true,"manage_topics":false,"read_topics":true,"poll_messages":true,"send_messages":true,"topics":{"0":{"manage_topic":false,"read_topic":true,"poll_messages":true,"send_messages":true}}}}}}`,
		`{"consumer_id":"1","partition_id":0,"offset":1}`,
		`{"consumer_id":7,"offset":18446744073709551615}`,
		`{"compression":"Deflated","snapshot_types":["All"]}`,
		`{"name":"dev","expiry":0}`,
		`{"username":"x","status":"inactive","options":{"a":"b"}}`,
		`{"permissions":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var ct createTopicBody
		if unmarshalBody(body, &ct) == nil {
			if block, err := topicOptionsBlock(ct.Options, ct.CompressionAlgorithm, ct.MessageExpiry, ct.MaxTopicSize, true); err == nil {
				req := wire.CreateTopic{StreamID: wire.NumericIdentifier(0), PartitionsCount: *ct.PartitionsCount, Name: []byte(*ct.Name), Options: block}
				if out, err := req.Append(nil); err == nil {
					var back wire.CreateTopic
					if err := back.Decode(out); err != nil {
						t.Fatalf("an encoded CreateTopic does not decode: %v", err)
					}
				}
			}
		}
		var cu createUserBody
		if unmarshalBody(body, &cu) == nil {
			has, block := permissionsBlock(cu.Permissions)
			if has {
				if err := wire.ValidatePermissions(block); err != nil {
					t.Fatalf("converted permissions are refused: %v", err)
				}
			}
		}
		var uu updateUserBody
		if unmarshalBody(body, &uu) == nil {
			_, _ = optionsBlock(uu.Options)
		}
		var so storeOffsetBody
		_ = unmarshalBody(body, &so)
		var sb snapshotBody
		_ = unmarshalBody(body, &sb)
		var pb createPATBody
		_ = unmarshalBody(body, &pb)
	})
}
