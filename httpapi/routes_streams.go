package httpapi

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/iggy-shard/iggy-shard/jsonview"
	"github.com/iggy-shard/iggy-shard/wire"
)

// The streams, topics, partitions, segments and consumer groups routes (apache/iggy
// core/server/src/http/streams.rs, topics.rs, partitions.rs, segments.rs,
// consumer_groups.rs).

func getStreams(rc *reqCtx) error {
	reply, err := rc.doEmpty(wire.CodeGetStreams)
	if err != nil {
		return err
	}
	streams, err := wire.AppendStreams(nil, reply)
	if err != nil {
		return err
	}
	out := make([]jsonview.Stream, len(streams))
	for i := range streams {
		out[i] = jsonview.StreamOf(&streams[i])
	}
	return rc.json(out)
}

func (rc *reqCtx) streamDetails(reply []byte) error {
	if len(reply) == 0 {
		return errNotFound
	}
	var s wire.StreamDetails
	if err := s.Decode(reply); err != nil {
		return err
	}
	return rc.json(jsonview.StreamDetailsOf(&s))
}

type nameBody struct {
	Name *string `json:"name"`
}

func (b *nameBody) check() error {
	if b.Name == nil {
		return &shapeError{"missing field `name`"}
	}
	return nil
}

func createStream(rc *reqCtx) error {
	var b nameBody
	if err := rc.decodeJSON(&b); err != nil {
		return err
	}
	if n := len(*b.Name); n < 1 || n > 255 {
		return wire.ErrInvalidStreamName
	}
	reply, err := rc.do(wire.CodeCreateStream, &wire.CreateStream{Name: []byte(*b.Name)})
	if err != nil {
		return err
	}
	return rc.streamDetails(reply)
}

func getStream(rc *reqCtx) error {
	id, err := rc.identifier("stream_id")
	if err != nil {
		return err
	}
	reply, err := rc.do(wire.CodeGetStream, &wire.GetStream{StreamID: id})
	if err != nil {
		return err
	}
	return rc.streamDetails(reply)
}

type updateStreamBody struct {
	Name    *string           `json:"name"`
	Options map[string]string `json:"options"`
}

func (b *updateStreamBody) check() error {
	if b.Name == nil {
		return &shapeError{"missing field `name`"}
	}
	return nil
}

func updateStream(rc *reqCtx) error {
	id, err := rc.identifier("stream_id")
	if err != nil {
		return err
	}
	var b updateStreamBody
	if err := rc.decodeJSON(&b); err != nil {
		return err
	}
	if n := len(*b.Name); n < 1 || n > 255 {
		return wire.ErrInvalidStreamName
	}
	req := wire.UpdateStream{StreamID: id, Name: []byte(*b.Name)}
	if req.Options, err = optionsBlock(b.Options); err != nil {
		return err
	}
	if _, err := rc.do(wire.CodeUpdateStream, &req); err != nil {
		return err
	}
	return rc.noContent()
}

func deleteStream(rc *reqCtx) error {
	id, err := rc.identifier("stream_id")
	if err != nil {
		return err
	}
	if _, err := rc.do(wire.CodeDeleteStream, &wire.DeleteStream{StreamID: id}); err != nil {
		return err
	}
	return rc.noContent()
}

func purgeStream(rc *reqCtx) error {
	id, err := rc.identifier("stream_id")
	if err != nil {
		return err
	}
	if _, err := rc.do(wire.CodePurgeStream, &wire.PurgeStream{StreamID: id}); err != nil {
		return err
	}
	return rc.noContent()
}

// getTopics answers [] for a stream that does not exist (apache/iggy
// core/server/src/http/topics.rs).
func getTopics(rc *reqCtx) error {
	id, err := rc.identifier("stream_id")
	if err != nil {
		return err
	}
	reply, err := rc.do(wire.CodeGetTopics, &wire.GetTopics{StreamID: id})
	if errors.Is(err, wire.ErrStreamIdNotFound) || err == nil && len(reply) == 0 {
		return rc.json([]jsonview.Topic{})
	}
	if err != nil {
		return err
	}
	topics, err := wire.AppendTopics(nil, reply)
	if err != nil {
		return err
	}
	out := make([]jsonview.Topic, len(topics))
	for i := range topics {
		out[i] = jsonview.TopicOf(&topics[i])
	}
	return rc.json(out)
}

func (rc *reqCtx) topicDetails(reply []byte) error {
	if len(reply) == 0 {
		return errNotFound
	}
	var t wire.TopicDetails
	if err := t.Decode(reply); err != nil {
		return err
	}
	return rc.json(jsonview.TopicDetailsOf(&t))
}

// compression is compression_algorithm in a body: "none" or "gzip", any case.
type compression string

func (c *compression) UnmarshalJSON(b []byte) error {
	var v string
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch strings.ToLower(v) {
	case "none", "gzip":
		*c = compression(strings.ToLower(v))
		return nil
	}
	return &shapeError{"compression_algorithm: unknown variant `" + v + "`, expected `none` or `gzip`"}
}

type createTopicBody struct {
	Name                 *string           `json:"name"`
	PartitionsCount      *uint32           `json:"partitions_count"`
	CompressionAlgorithm *compression      `json:"compression_algorithm"`
	MessageExpiry        *uint64           `json:"message_expiry"`
	MaxTopicSize         *uint64           `json:"max_topic_size"`
	Options              map[string]string `json:"options"`
}

func (b *createTopicBody) check() error {
	for _, f := range []struct {
		name    string
		present bool
	}{{"name", b.Name != nil}, {"partitions_count", b.PartitionsCount != nil},
		{"compression_algorithm", b.CompressionAlgorithm != nil}, {"message_expiry", b.MessageExpiry != nil},
		{"max_topic_size", b.MaxTopicSize != nil}} {
		if !f.present {
			return &shapeError{"missing field `" + f.name + "`"}
		}
	}
	return nil
}

// topicOptionsBlock is the options block of a topic write: the options object's
// entries as strings, then each typed field the object does not name, in its
// catalog kind. The sentinels (0: the server's default) travel as they came: the
// command's admission reads them, as it reads the binary protocol's. At create,
// compression "none" is the default and stays implicit (the reference marks a
// typed field explicit when it differs from the default); an update carries it.
func topicOptionsBlock(options map[string]string, c *compression, expiry, maxSize *uint64, create bool) ([]byte, error) {
	b, err := optionsBlock(options)
	if err != nil {
		return nil, err
	}
	add := func(key string, kind wire.HeaderKind, v []byte) {
		if _, named := options[key]; !named && err == nil {
			b, err = wire.AppendOption(b, key, kind, v)
		}
	}
	if c != nil && !(create && *c == "none") {
		add(wire.TopicOptionCompressionAlgorithm.String(), wire.HeaderString, []byte(*c))
	}
	if expiry != nil {
		add(wire.TopicOptionMessageExpiry.String(), wire.HeaderUint64, binary.LittleEndian.AppendUint64(nil, *expiry))
	}
	if maxSize != nil {
		add(wire.TopicOptionMaxTopicSize.String(), wire.HeaderUint64, binary.LittleEndian.AppendUint64(nil, *maxSize))
	}
	if err != nil {
		return nil, wire.ErrInvalidOptionValue
	}
	return b, nil
}

func createTopic(rc *reqCtx) error {
	stream, err := rc.identifier("stream_id")
	if err != nil {
		return err
	}
	var b createTopicBody
	if err := rc.decodeJSON(&b); err != nil {
		return err
	}
	if n := len(*b.Name); n < 1 || n > 255 {
		return wire.ErrInvalidTopicName
	}
	req := wire.CreateTopic{StreamID: stream, PartitionsCount: *b.PartitionsCount, Name: []byte(*b.Name)}
	if req.Options, err = topicOptionsBlock(b.Options, b.CompressionAlgorithm, b.MessageExpiry, b.MaxTopicSize, true); err != nil {
		return err
	}
	reply, err := rc.do(wire.CodeCreateTopic, &req)
	if err != nil {
		return err
	}
	return rc.topicDetails(reply)
}

func getTopic(rc *reqCtx) error {
	stream, topic, err := rc.streamTopic()
	if err != nil {
		return err
	}
	reply, err := rc.do(wire.CodeGetTopic, &wire.GetTopic{StreamID: stream, TopicID: topic})
	if errors.Is(err, wire.ErrStreamIdNotFound) || errors.Is(err, wire.ErrTopicIdNotFound) {
		return errNotFound
	}
	if err != nil {
		return err
	}
	return rc.topicDetails(reply)
}

type updateTopicBody struct {
	Name                 *string           `json:"name"`
	CompressionAlgorithm *compression      `json:"compression_algorithm"`
	MessageExpiry        *uint64           `json:"message_expiry"`
	MaxTopicSize         *uint64           `json:"max_topic_size"`
	Options              map[string]string `json:"options"`
}

func (b *updateTopicBody) check() error {
	if b.Name == nil {
		return &shapeError{"missing field `name`"}
	}
	return nil
}

func updateTopic(rc *reqCtx) error {
	stream, topic, err := rc.streamTopic()
	if err != nil {
		return err
	}
	var b updateTopicBody
	if err := rc.decodeJSON(&b); err != nil {
		return err
	}
	if n := len(*b.Name); n < 1 || n > 255 {
		return wire.ErrInvalidTopicName
	}
	req := wire.UpdateTopic{StreamID: stream, TopicID: topic, Name: []byte(*b.Name)}
	if req.Options, err = topicOptionsBlock(b.Options, b.CompressionAlgorithm, b.MessageExpiry, b.MaxTopicSize, false); err != nil {
		return err
	}
	if _, err := rc.do(wire.CodeUpdateTopic, &req); err != nil {
		return err
	}
	return rc.noContent()
}

func deleteTopic(rc *reqCtx) error {
	stream, topic, err := rc.streamTopic()
	if err != nil {
		return err
	}
	if _, err := rc.do(wire.CodeDeleteTopic, &wire.DeleteTopic{StreamID: stream, TopicID: topic}); err != nil {
		return err
	}
	return rc.noContent()
}

func purgeTopic(rc *reqCtx) error {
	stream, topic, err := rc.streamTopic()
	if err != nil {
		return err
	}
	if _, err := rc.do(wire.CodePurgeTopic, &wire.PurgeTopic{StreamID: stream, TopicID: topic}); err != nil {
		return err
	}
	return rc.noContent()
}

type partitionsBody struct {
	PartitionsCount *uint32 `json:"partitions_count"`
}

func (b *partitionsBody) check() error {
	if b.PartitionsCount == nil {
		return &shapeError{"missing field `partitions_count`"}
	}
	return nil
}

// createPartitions answers 200 with an empty body, as the reference does.
func createPartitions(rc *reqCtx) error {
	stream, topic, err := rc.streamTopic()
	if err != nil {
		return err
	}
	var b partitionsBody
	if err := rc.decodeJSON(&b); err != nil {
		return err
	}
	req := wire.CreatePartitions{StreamID: stream, TopicID: topic, PartitionsCount: *b.PartitionsCount}
	if _, err := rc.do(wire.CodeCreatePartitions, &req); err != nil {
		return err
	}
	rc.w.WriteHeader(200)
	return nil
}

// queryU32 reads a required u32 query parameter.
func (rc *reqCtx) queryU32(name string) (uint32, error) {
	q := rc.r.URL.Query()
	if !q.Has(name) {
		return 0, rejectQuery("missing field `" + name + "`")
	}
	n, err := strconv.ParseUint(q.Get(name), 10, 32)
	if err != nil {
		return 0, rejectQuery(name + ": invalid digit found in string")
	}
	return uint32(n), nil
}

func deletePartitions(rc *reqCtx) error {
	stream, topic, err := rc.streamTopic()
	if err != nil {
		return err
	}
	count, err := rc.queryU32("partitions_count")
	if err != nil {
		return err
	}
	req := wire.DeletePartitions{StreamID: stream, TopicID: topic, PartitionsCount: count}
	if _, err := rc.do(wire.CodeDeletePartitions, &req); err != nil {
		return err
	}
	return rc.noContent()
}

func deleteSegments(rc *reqCtx) error {
	stream, topic, err := rc.streamTopic()
	if err != nil {
		return err
	}
	partition, err := rc.u32Path("partition_id")
	if err != nil {
		return err
	}
	count, err := rc.queryU32("segments_count")
	if err != nil {
		return err
	}
	req := wire.DeleteSegments{StreamID: stream, TopicID: topic, PartitionID: partition, SegmentsCount: count}
	if _, err := rc.do(wire.CodeDeleteSegments, &req); err != nil {
		return err
	}
	return rc.noContent()
}

func getGroups(rc *reqCtx) error {
	stream, topic, err := rc.streamTopic()
	if err != nil {
		return err
	}
	reply, err := rc.do(wire.CodeGetConsumerGroups, &wire.GetConsumerGroups{StreamID: stream, TopicID: topic})
	if err != nil {
		return err
	}
	out := []jsonview.Group{}
	it := wire.IterConsumerGroups(reply)
	for it.Next() {
		out = append(out, jsonview.GroupOf(it.Value()))
	}
	if err := it.Err(); err != nil {
		return err
	}
	return rc.json(out)
}

func (rc *reqCtx) groupDetails(reply []byte) error {
	if len(reply) == 0 {
		return errNotFound
	}
	var g wire.ConsumerGroupDetails
	if err := g.Decode(reply); err != nil {
		return err
	}
	return rc.json(jsonview.GroupDetailsOf(&g))
}

func (rc *reqCtx) groupTarget() (wire.GroupTarget, error) {
	stream, topic, err := rc.streamTopic()
	if err != nil {
		return wire.GroupTarget{}, err
	}
	group, err := rc.identifier("group_id")
	return wire.GroupTarget{StreamID: stream, TopicID: topic, GroupID: group}, err
}

func createGroup(rc *reqCtx) error {
	stream, topic, err := rc.streamTopic()
	if err != nil {
		return err
	}
	var b nameBody
	if err := rc.decodeJSON(&b); err != nil {
		return err
	}
	if n := len(*b.Name); n < 1 || n > 255 {
		return wire.ErrInvalidConsumerGroupName
	}
	reply, err := rc.do(wire.CodeCreateConsumerGroup, &wire.CreateConsumerGroup{StreamID: stream, TopicID: topic, Name: []byte(*b.Name)})
	if err != nil {
		return err
	}
	return rc.groupDetails(reply)
}

func getGroup(rc *reqCtx) error {
	target, err := rc.groupTarget()
	if err != nil {
		return err
	}
	reply, err := rc.do(wire.CodeGetConsumerGroup, &wire.GetConsumerGroup{GroupTarget: target})
	if err != nil {
		return err
	}
	return rc.groupDetails(reply)
}

func deleteGroup(rc *reqCtx) error {
	target, err := rc.groupTarget()
	if err != nil {
		return err
	}
	if _, err := rc.do(wire.CodeDeleteConsumerGroup, &wire.DeleteConsumerGroup{GroupTarget: target}); err != nil {
		return err
	}
	return rc.noContent()
}
