package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/iggy-shard/iggy-shard/client"
)

// countMax bounds the PARTITIONS_COUNT and SEGMENTS_COUNT arguments, as the
// reference's argument parser does (the server takes at most 1000 partitions at a
// time and says so).
const countMax = 100_000

func (a *app) partitionCommand() *cobra.Command {
	return groupCommand("partition", "p", "partition operations",
		example(leaf("create <STREAM_ID> <TOPIC_ID> <PARTITIONS_COUNT>", "c",
			"Create partitions for the specified topic ID and stream ID based on the given count", exactArgs(3),
			func(cmd *cobra.Command, args []string) error { return a.partitions(cmd, args, true) }),
			"  iggy partition create 1 1 10\n  iggy partition create prod 2 2\n  iggy partition create test sensor 2\n  iggy partition create 1 sensor 16"),
		example(leaf("delete <STREAM_ID> <TOPIC_ID> <PARTITIONS_COUNT>", "d",
			"Delete partitions for the specified topic ID and stream ID based on the given count", exactArgs(3),
			func(cmd *cobra.Command, args []string) error { return a.partitions(cmd, args, false) }),
			"  iggy partition delete 1 1 10\n  iggy partition delete prod 2 2\n  iggy partition delete test sensor 2\n  iggy partition delete 1 sensor 16"),
	)
}

func (a *app) partitions(cmd *cobra.Command, args []string, create bool) error {
	stream, topic, t, err := streamAndTopic(args)
	if err != nil {
		return err
	}
	count, err := parseCount("partitions count", args[2], countMax)
	if err != nil {
		return err
	}
	verb, done := "delete", "Deleted"
	if create {
		verb, done = "create", "Created"
	}
	what := fmt.Sprintf("%d partition%s for topic with ID: %s and stream with ID: %s", count, plural(count), args[1], args[0])
	return a.call(cmd, t, verb+" "+what, func(ctx context.Context, c *client.Client) error {
		if create {
			err = c.CreatePartitions(ctx, stream, topic, count)
		} else {
			err = c.DeletePartitions(ctx, stream, topic, count)
		}
		if err != nil {
			return err
		}
		a.say("%s %s", done, what)
		return nil
	})
}

func (a *app) segmentCommand() *cobra.Command {
	return groupCommand("segment", "seg", "segments operations",
		example(leaf("delete <STREAM_ID> <TOPIC_ID> <PARTITION_ID> <SEGMENTS_COUNT>", "d",
			"Delete the oldest segments of the specified partition, topic and stream", exactArgs(4), a.segmentDelete),
			"  iggy segment delete 1 1 1 10\n  iggy segment delete prod 2 2 2\n  iggy segment delete test sensor 2 2\n  iggy segment delete 1 sensor 2 16"),
	)
}

func (a *app) segmentDelete(cmd *cobra.Command, args []string) error {
	stream, topic, t, err := streamAndTopic(args)
	if err != nil {
		return err
	}
	partition, err := parseUint32("partition ID", args[2])
	if err != nil {
		return err
	}
	t.partition = args[2]
	count, err := parseCount("segments count", args[3], countMax)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("%d segment%s for topic with ID: %s, stream with ID: %s and partition with ID: %d",
		count, plural(count), args[1], args[0], partition)
	return a.call(cmd, t, "delete "+what, func(ctx context.Context, c *client.Client) error {
		if err := c.DeleteSegments(ctx, stream, topic, partition, count); err != nil {
			return err
		}
		a.say("Deleted %s", what)
		return nil
	})
}
