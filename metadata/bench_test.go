package metadata

import (
	"strconv"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// BenchmarkApplyCreateTopic measures a committed CreateTopic with 8 partitions and
// default options, reply encoding included. Baseline: the same body's decode and
// option resolution alone (the work any implementation must do), in the same run.
func BenchmarkApplyCreateTopic(b *testing.B) {
	const topicsPerStream = TopicIDLimit - 1
	req := wire.CreateTopic{StreamID: num(0), PartitionsCount: 8}
	name := make([]byte, 0, 16)
	buf := make([]byte, 0, 256)

	b.Run("apply", func(b *testing.B) {
		b.ReportAllocs()
		var s *State
		var out Output
		h := Header{Operation: wire.OperationCreateTopic, UserID: root, TimestampMicros: tsStart}
		for i := range b.N {
			if i%topicsPerStream == 0 {
				b.StopTimer()
				s = NewState("iggy", testRootHash, tsStart)
				s.Apply(Header{Operation: wire.OperationCreateStream}, createStream("s"), &out)
				b.StartTimer()
			}
			req.Name = strconv.AppendInt(name[:0], int64(i), 10)
			buf, _ = req.Append(buf[:0])
			h.TimestampMicros++
			s.Apply(h, buf, &out)
			if out.Result != 0 {
				b.Fatal(out.Result)
			}
		}
	})
	b.Run("baseline=decode+resolve", func(b *testing.B) {
		b.ReportAllocs()
		var r wire.CreateTopic
		for i := range b.N {
			req.Name = strconv.AppendInt(name[:0], int64(i), 10)
			buf, _ = req.Append(buf[:0])
			if err := r.Decode(buf); err != nil {
				b.Fatal(err)
			}
			if _, err := wire.ResolveCreateTopicOptions(r.Options, r.PartitionsCount); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkGetTopics measures GetTopics over a stream of 1000 topics of 4
// partitions with partition stats. Baseline: encoding the same 1000 headers from a
// prepared []wire.TopicHeader with wire.AppendTopicsReply, in the same run, which
// is the encoding floor the state walk adds to.
func BenchmarkGetTopics(b *testing.B) {
	const topics = 1000
	s := NewState("iggy", testRootHash, tsStart)
	var out Output
	s.Apply(Header{Operation: wire.OperationCreateStream}, createStream("s"), &out)
	for i := range topics {
		s.Apply(Header{Operation: wire.OperationCreateTopic}, createTopic(num(0), 4, "topic-"+strconv.Itoa(i), nil), &out)
		if out.Result != 0 {
			b.Fatal(out.Result)
		}
	}
	reply, _ := s.AppendTopics(nil, root, num(0), stats)
	headers, err := wire.AppendTopics(nil, reply)
	if err != nil || len(headers) != topics {
		b.Fatal(len(headers), err)
	}
	buf := make([]byte, 0, 2*len(reply))

	b.Run("state", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(reply)))
		for range b.N {
			buf, _ = s.AppendTopics(buf[:0], root, num(0), stats)
		}
	})
	b.Run("baseline=encode", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(reply)))
		for range b.N {
			buf = wire.AppendTopicsReply(buf[:0], headers)
		}
	})
}
