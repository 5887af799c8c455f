package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/iggy-shard/iggy-shard/jsonview"
)

func TestStreamCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := name("orders")

	r := e.ok("stream", "create", s)
	has(t, r, "Executing create stream with name: "+s+" and ID auto incremented", "Stream with name: "+s+" and ID: ")
	fails(t, e.root("stream", "create", s), exitFailed, "a stream named '"+s+"' already exists (1012)")

	var created jsonview.Stream
	e.json(&created, "stream", "create", s+"-json")
	if created.Name != s+"-json" || created.Size != "0 B" || created.Topics == nil || len(*created.Topics) != 0 || created.Options == nil {
		t.Fatalf("created stream: %+v", created)
	}
	id := strconv.FormatUint(uint64(created.ID), 10)

	has(t, e.ok("stream", "get", s), "Stream name           "+s, "Stream topics count   0")
	var got jsonview.Stream
	e.json(&got, "stream", "get", id)
	if got.ID != created.ID || got.Name != created.Name || got.CreatedAt != created.CreatedAt {
		t.Fatalf("stream get %s: %+v, created %+v", id, got, created)
	}

	has(t, e.ok("stream", "list"), "ID  Created", s+"-json")
	has(t, e.ok("stream", "list", "-l", "list"), "|"+s+"|0 B|0|0\n")
	var list []jsonview.Stream
	e.json(&list, "stream", "list")
	found := false
	for _, x := range list {
		found = found || x.Name == s && x.Topics == nil
	}
	if !found {
		t.Fatalf("stream list has no %s without topics: %+v", s, list)
	}

	has(t, e.ok("stream", "update", s, s+"-renamed"), "Stream with ID: "+s+" updated name: "+s+"-renamed")
	fails(t, e.root("stream", "get", s), exitFailed, "stream '"+s+"' not found (1009)")
	has(t, e.ok("stream", "purge", s+"-renamed"), "Stream with ID: "+s+"-renamed purged")
	has(t, e.ok("stream", "delete", s+"-renamed"), "Stream with ID: "+s+"-renamed deleted")
	fails(t, e.root("stream", "delete", s+"-renamed"), exitFailed, "stream '"+s+"-renamed' not found (1009)")
	fails(t, e.root("stream", "purge", "nowhere"), exitFailed, "stream 'nowhere' not found (1009)")
	e.ok("stream", "delete", id)

	// Aliases and --quiet.
	r = e.root("-q", "s", "c", s+"-quiet")
	if r.code != exitOK || r.stdout != "" || r.stderr != "" {
		t.Fatalf("-q s c:\n%s", r)
	}
	r = e.root("s", "d", s+"-quiet", "--quiet")
	if r.code != exitOK || r.stdout != "" {
		t.Fatalf("s d --quiet:\n%s", r)
	}
}

func TestTopicCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := name("sensors")
	e.ok("stream", "create", s)

	r := e.ok("topic", "create", s, "temps", "2", "gzip", "1day", "1hour", "-m", "2GiB", "--set", "segment_size=128MiB")
	has(t, r, "Executing create topic with name: temps, message expiry: 1day 1h, compression algorithm: gzip, max topic size: 2.15 GB in stream with ID: "+s,
		"Topic with name: temps, partitions count: 2, compression algorithm: gzip, message expiry: 1day 1h, max topic size: 2.15 GB created in stream with ID: "+s)

	var topic jsonview.Topic
	e.json(&topic, "topic", "get", s, "temps")
	if topic.Name != "temps" || topic.PartitionsCount != 2 || topic.CompressionAlgorithm != "gzip" ||
		topic.MessageExpiry != 25*3600*1e6 || topic.MaxTopicSize != 2<<30 || topic.Partitions == nil || len(*topic.Partitions) != 2 {
		t.Fatalf("topic get: %+v", topic)
	}
	if o := topic.Options["segment_size"]; o.Value != "134217728" || !o.Explicit {
		t.Fatalf("segment_size option: %+v", topic.Options)
	}
	if o := topic.Options["enforce_fsync"]; o.Value != "false" || o.Explicit {
		t.Fatalf("enforce_fsync option: %+v", topic.Options)
	}

	var plain jsonview.Topic
	e.json(&plain, "topic", "create", s, "plain", "1", "none")
	if plain.MessageExpiry != expiryNever || plain.MaxTopicSize != topicSizeUnlimited || plain.Partitions == nil {
		t.Fatalf("topic create with defaults: %+v", plain)
	}
	fails(t, e.root("topic", "create", s, "plain", "1", "none"), exitFailed, "a topic named 'plain' already exists in stream '"+s+"' (2013)")
	fails(t, e.root("topic", "create", "nowhere", "x", "1", "none"), exitFailed, "stream 'nowhere' not found (1009)")
	fails(t, e.root("topic", "create", s, "x", "1", "none", "--set", "colour=blue"), exitFailed, "(4041)")
	fails(t, e.root("topic", "create", s, "x", "1", "none", "--set", "segment_size=12"), exitFailed, "an option value is invalid", "(4042)")

	r = e.ok("topic", "get", s, "temps")
	has(t, r, "Topic name           temps", "Message expiry       1day 1h", "Max topic size       2.15 GB", "Partitions count     2")
	r = e.ok("topic", "list", s)
	has(t, r, "ID  Name   Partitions  Messages  Size  Max Size   Expiry     Compression\n", "temps  2", "plain  1")
	for _, line := range strings.Split(r.stdout, "\n") {
		if len(line) > 80 {
			t.Errorf("topic list is wider than 80 columns: %q", line)
		}
	}
	has(t, e.ok("topic", "list", s, "-l", "list"), "|temps|2|0|0 B|2.15 GB|1day 1h|gzip\n")
	var topics []jsonview.Topic
	e.json(&topics, "topic", "list", s)
	if len(topics) != 2 || topics[0].Partitions != nil {
		t.Fatalf("topic list: %+v", topics)
	}

	has(t, e.ok("topic", "update", s, "temps", "temperatures", "none", "unlimited", "-m", "unlimited"),
		"Topic with ID: temps updated name: temperatures, updated message expiry: unlimited, updated compression algorithm: none, updated max topic size: unlimited in stream with ID: "+s)
	e.json(&topic, "topic", "get", s, "temperatures")
	if topic.CompressionAlgorithm != "none" || topic.MessageExpiry != expiryNever || topic.MaxTopicSize != topicSizeUnlimited {
		t.Fatalf("topic after update: %+v", topic)
	}
	// server_default on update leaves a value as it is.
	e.ok("topic", "update", s, "temperatures", "temperatures", "none", "2h")
	e.ok("topic", "update", s, "temperatures", "temperatures", "gzip")
	e.json(&topic, "topic", "get", s, "temperatures")
	if topic.CompressionAlgorithm != "gzip" || topic.MessageExpiry != 2*3600*1e6 {
		t.Fatalf("topic after update with the default expiry: %+v", topic)
	}
	fails(t, e.root("topic", "update", s, "nothere", "x", "none"), exitFailed, "topic 'nothere' not found in stream '"+s+"' (2010)")

	has(t, e.ok("topic", "purge", s, "temperatures"), "Topic with ID: temperatures in stream with ID: "+s+" purged")
	has(t, e.ok("topic", "delete", s, "temperatures"), "Topic with ID: temperatures in stream with ID: "+s+" deleted")
	fails(t, e.root("topic", "get", s, "temperatures"), exitFailed, "topic 'temperatures' not found in stream '"+s+"' (2010)")
	fails(t, e.root("topic", "delete", s, "temperatures"), exitFailed, "(2010)")
}

func TestPartitionAndSegmentCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := name("parts")
	e.ok("stream", "create", s)
	e.ok("topic", "create", s, "t", "1", "none")

	has(t, e.ok("partition", "create", s, "t", "3"), "Executing create 3 partitions for topic with ID: t and stream with ID: "+s,
		"Created 3 partitions for topic with ID: t and stream with ID: "+s)
	has(t, e.ok("p", "d", s, "t", "1"), "Deleted 1 partition for topic with ID: t and stream with ID: "+s)
	var topic jsonview.Topic
	e.json(&topic, "topic", "get", s, "t")
	if topic.PartitionsCount != 3 {
		t.Fatalf("partitions after +3 -1: %d", topic.PartitionsCount)
	}
	fails(t, e.root("partition", "delete", s, "t", "10"), exitFailed, "does not have that many partitions (2019)")
	fails(t, e.root("partition", "create", s, "t", "5000"), exitFailed, "1 to 1000 partitions at a time (2015)")
	fails(t, e.root("partition", "create", s, "nothere", "1"), exitFailed, "topic 'nothere' not found in stream '"+s+"' (2010)")

	has(t, e.ok("segment", "delete", s, "t", "0", "1"),
		"Deleted 1 segment for topic with ID: t, stream with ID: "+s+" and partition with ID: 0")
	fails(t, e.root("seg", "d", s, "t", "7", "1"), exitFailed, "partition 7 not found in topic 't' of stream '"+s+"' (3007)")
}

func TestConsumerGroupCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := name("groups")
	e.ok("stream", "create", s)
	e.ok("topic", "create", s, "t", "2", "none")

	has(t, e.ok("consumer-group", "create", s, "t", "readers"), "Consumer group: ID: 0, name: readers created for topic with ID: t and stream with ID: "+s)
	fails(t, e.root("consumer-group", "create", s, "t", "readers"), exitFailed, "a consumer group named 'readers' already exists in topic 't' of stream '"+s+"' (5004)")
	var g jsonview.Group
	e.json(&g, "consumer-group", "get", s, "t", "readers")
	if g.Name != "readers" || g.PartitionsCount != 2 || g.MembersCount != 0 || g.Members == nil {
		t.Fatalf("group get: %+v", g)
	}
	has(t, e.ok("g", "g", s, "t", "0"), "Consumer group name  readers", "Partitions count     2")
	has(t, e.ok("consumer-group", "list", s, "t"), "ID  Name     Partitions Count  Members Count\n0   readers  2                 0\n")
	has(t, e.ok("consumer-group", "list", s, "t", "-l", "list"), "0|readers|2|0\n")
	var groups []jsonview.Group
	e.json(&groups, "consumer-group", "list", s, "t")
	if len(groups) != 1 || groups[0].Members != nil {
		t.Fatalf("group list: %+v", groups)
	}
	has(t, e.ok("consumer-group", "delete", s, "t", "readers"), "Consumer group with ID: readers deleted for topic with ID: t and stream with ID: "+s)
	fails(t, e.root("consumer-group", "get", s, "t", "readers"), exitFailed, "consumer group 'readers' not found in topic 't' of stream '"+s+"' (5000)")
	fails(t, e.root("consumer-group", "delete", s, "t", "readers"), exitFailed, "(5000)")
	fails(t, e.root("consumer-group", "list", "nowhere", "t"), exitFailed, "(1009)")
}

func TestConsumerOffsetCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := name("offsets")
	e.ok("stream", "create", s)
	e.ok("topic", "create", s, "t", "1", "none")
	e.ok("message", "send", s, "t", "a", "b", "c")

	fails(t, e.root("consumer-offset", "get", "4", s, "t", "0"), exitFailed, "no consumer offset stored for consumer with ID: 4")
	has(t, e.ok("consumer-offset", "set", "4", s, "t", "0", "1"),
		"Consumer offset for consumer with ID: 4 for stream with ID: "+s+" and topic with ID: t and partition with ID: 0 set to 1")
	var o jsonview.ConsumerOffset
	e.json(&o, "consumer-offset", "get", "4", s, "t", "0")
	if o != (jsonview.ConsumerOffset{PartitionID: 0, CurrentOffset: 2, StoredOffset: 1}) {
		t.Fatalf("offset: %+v", o)
	}
	has(t, e.ok("o", "g", "4", s, "t", "0"), "Current offset  2", "Stored offset   1")
	fails(t, e.root("consumer-offset", "set", "4", s, "t", "0", "9"), exitFailed, "offset beyond the last message of partition 0 of topic 't' of stream '"+s+"' (4100)")
	fails(t, e.root("consumer-offset", "set", "4", s, "t", "5", "0"), exitFailed, "(20)")
	// A named consumer's offsets are kept under the hash of its name, as the
	// reference keeps them, and found again by the same name.
	e.ok("consumer-offset", "set", "named", s, "t", "0", "2")
	e.json(&o, "consumer-offset", "get", "named", s, "t", "0")
	if o != (jsonview.ConsumerOffset{PartitionID: 0, CurrentOffset: 2, StoredOffset: 2}) {
		t.Fatalf("named consumer's offset: %+v", o)
	}
}
