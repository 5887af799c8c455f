package wire

import (
	"math/rand/v2"
	"testing"
)

func randTopicHeader(r *rand.Rand) TopicHeader {
	return TopicHeader{
		ID: r.Uint32(), CreatedAtMicros: r.Uint64(), PartitionsCount: r.Uint32(),
		MessageExpiryMicros: r.Uint64(), CompressionAlgorithm: uint8(r.Uint32()),
		MaxTopicSizeBytes: r.Uint64(), SizeBytes: r.Uint64(), MessagesCount: r.Uint64(),
		Name: randName(r), ExplicitOptions: randBytes(r, 30), DerivedOptions: randBytes(r, 30),
	}
}

func randPartitionInfo(r *rand.Rand) PartitionInfo {
	return PartitionInfo{
		ID: r.Uint32(), CreatedAtMicros: r.Uint64(), SegmentsCount: r.Uint32(),
		CurrentOffset: r.Uint64(), SizeBytes: r.Uint64(), MessagesCount: r.Uint64(),
	}
}

func TestTopicRepliesRoundTrip(t *testing.T) {
	t.Run("TopicHeader", func(t *testing.T) {
		checkRoundTrip(t, 3, func(r *rand.Rand) *TopicHeader {
			h := randTopicHeader(r)
			return &h
		})
	})
	t.Run("PartitionInfo", func(t *testing.T) {
		checkRoundTrip(t, 4, func(r *rand.Rand) *PartitionInfo {
			p := randPartitionInfo(r)
			return &p
		})
	})
	t.Run("TopicDetails", func(t *testing.T) {
		checkRoundTrip(t, 5, func(r *rand.Rand) *TopicDetails {
			d := TopicDetails{TopicHeader: randTopicHeader(r)}
			for range r.IntN(5) {
				d.Partitions = append(d.Partitions, randPartitionInfo(r))
			}
			d.PartitionsCount = uint32(len(d.Partitions))
			return &d
		})
	})
	t.Run("GetTopics", func(t *testing.T) {
		r := rand.New(rand.NewPCG(6, 6))
		for range 200 {
			var want topicsBody
			for range r.IntN(5) {
				want = append(want, randTopicHeader(r))
			}
			got, err := AppendTopics(nil, want.Append(nil))
			if err != nil || !sameReply(topicsBody(got), want) {
				t.Fatalf("round trip: %v\n got %+v\nwant %+v", err, got, want)
			}
		}
	})
}

// A GetTopics count larger than what follows is malformed; so is a smaller one
// (bytes left over).
func TestGetTopicsCountMustMatch(t *testing.T) {
	body := AppendTopicsReply(nil, []TopicHeader{defaultTopicHeader("a"), defaultTopicHeader("b")})
	for _, count := range []byte{1, 3} {
		b := append([]byte(nil), body...)
		b[0] = count
		if _, err := AppendTopics(nil, b); err == nil {
			t.Fatalf("count %d over 2 topics was accepted", count)
		}
	}
}

// topicsReply100 is a GetTopics body of 100 topics, each with a full derived block,
// as a real server sends it.
func topicsReply100(tb testing.TB) ([]TopicHeader, []byte) {
	created, err := ResolveCreateTopicOptions(nil, 1)
	if err != nil {
		tb.Fatal(err)
	}
	derived := created.AppendDerivedBlock(nil)
	topics := make([]TopicHeader, 100)
	for i := range topics {
		topics[i] = defaultTopicHeader("topic-name-" + string(rune('a'+i%26)) + string(rune('a'+i/26)))
		topics[i].ID = uint32(i)
		topics[i].DerivedOptions = derived
	}
	return topics, AppendTopicsReply(nil, topics)
}

func BenchmarkGetTopics100Encode(b *testing.B) {
	topics, body := topicsReply100(b)
	buf := make([]byte, 0, len(body))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendTopicsReply(buf[:0], topics)
	}
}

func BenchmarkGetTopics100DecodeIter(b *testing.B) {
	_, body := topicsReply100(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		it := IterTopics(body)
		n := 0
		for it.Next() {
			n++
		}
		if it.Err() != nil || n != 100 {
			b.Fatal(n, it.Err())
		}
	}
}

func BenchmarkGetTopics100DecodeIntoSlice(b *testing.B) {
	_, body := topicsReply100(b)
	topics := make([]TopicHeader, 0, 100)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if topics, err = AppendTopics(topics[:0], body); err != nil || len(topics) != 100 {
			b.Fatal(err)
		}
	}
}

// The baseline for the decoders above: the same 100 topics decoded the way the Go
// SDK does it, into a fresh slice of structs with string names.
func BenchmarkGetTopics100DecodeFreshStrings(b *testing.B) {
	_, body := topicsReply100(b)
	type sdkTopic struct {
		ID   uint32
		Name string
		TopicHeader
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var out []sdkTopic
		it := IterTopics(body)
		for it.Next() {
			h := it.Value()
			out = append(out, sdkTopic{ID: h.ID, Name: string(h.Name), TopicHeader: *h})
		}
		if len(out) != 100 {
			b.Fatal(it.Err())
		}
	}
}

// Baseline for BenchmarkGetTopics100Encode: the same reply appended to a fresh
// buffer every time, as a caller that does not keep its buffer would.
func BenchmarkGetTopics100EncodeFreshBuffer(b *testing.B) {
	topics, body := topicsReply100(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if out := AppendTopicsReply(nil, topics); len(out) != len(body) {
			b.Fatal(len(out))
		}
	}
}
