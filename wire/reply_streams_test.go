package wire

import (
	"math/rand/v2"
	"testing"
)

func randStreamHeader(r *rand.Rand) StreamHeader {
	return StreamHeader{
		ID: r.Uint32(), CreatedAtMicros: r.Uint64(), TopicsCount: r.Uint32(), SizeBytes: r.Uint64(),
		MessagesCount: r.Uint64(), Name: randName(r), Options: randBytes(r, 20),
	}
}

func TestStreamRepliesRoundTrip(t *testing.T) {
	t.Run("StreamHeader", func(t *testing.T) {
		checkRoundTrip(t, 1, func(r *rand.Rand) *StreamHeader {
			h := randStreamHeader(r)
			return &h
		})
	})
	t.Run("StreamDetails", func(t *testing.T) {
		checkRoundTrip(t, 2, func(r *rand.Rand) *StreamDetails {
			s := StreamDetails{StreamHeader: randStreamHeader(r)}
			for range r.IntN(4) {
				s.Topics = append(s.Topics, randTopicHeader(r))
			}
			s.TopicsCount = uint32(len(s.Topics))
			return &s
		})
	})
}

// A StreamDetails whose count promises more topics than follow is malformed, and so
// is one with a topic left over.
func TestStreamDetailsCountDrivesDecode(t *testing.T) {
	s := StreamDetails{StreamHeader: StreamHeader{Name: []byte("s"), TopicsCount: 1}, Topics: []TopicHeader{defaultTopicHeader("t")}}
	body := s.Append(nil)
	body[12] = 2 // topics_count
	var got StreamDetails
	if err := got.Decode(body); err == nil {
		t.Fatal("a missing topic was accepted")
	}
	body[12] = 0
	if err := got.Decode(body); err == nil {
		t.Fatal("an uncounted topic was accepted")
	}
}

// Decoding again into the same StreamDetails reuses its Topics.
func TestStreamDetailsDecodeReusesTopics(t *testing.T) {
	body := readGolden(t, "replies/stream_details.hex")
	var s StreamDetails
	if err := s.Decode(body); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if err := s.Decode(body); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per Decode", allocs)
	}
}
