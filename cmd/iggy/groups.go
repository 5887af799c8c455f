package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/jsonview"
	"github.com/iggy-shard/iggy-shard/wire"
)

func (a *app) consumerGroupCommand() *cobra.Command {
	create := leaf("create [flags] <STREAM_ID> <TOPIC_ID> <NAME>", "c",
		"Create consumer group with given ID for given stream ID and topic ID", exactArgs(3), a.groupCreate)
	create.Example = "  iggy consumer-group create 1 1 prod\n  iggy consumer-group create stream 2 test\n  iggy consumer-group create 2 topic receiver"
	create.Flags().Uint32P("group-id", "g", 0, "Accepted for compatibility and ignored: the server assigns group ids")
	create.Flags().MarkHidden("group-id")

	list := leaf("list [flags] <STREAM_ID> <TOPIC_ID>", "l", "List all consumer groups for given stream ID and topic ID", exactArgs(2), nil)
	var mode listMode
	addListMode(list, &mode)
	list.RunE = func(cmd *cobra.Command, args []string) error { return a.groupList(cmd, args, mode) }
	list.Example = "  iggy consumer-group list 1 1\n  iggy consumer-group list production sensor -l list"

	return groupCommand("consumer-group", "g", "consumer group operations",
		create,
		example(leaf("delete <STREAM_ID> <TOPIC_ID> <GROUP_ID>", "d",
			"Delete consumer group with given ID for given stream ID and topic ID", exactArgs(3), a.groupDelete),
			"  iggy consumer-group delete 1 2 3\n  iggy consumer-group delete stream topic group"),
		example(leaf("get <STREAM_ID> <TOPIC_ID> <GROUP_ID>", "g",
			"Get details of a single consumer group with given ID for given stream ID and topic ID", exactArgs(3), a.groupGet),
			"  iggy consumer-group get 1 2 3\n  iggy consumer-group get stream topic group"),
		list,
	)
}

// groupTarget parses STREAM_ID TOPIC_ID GROUP_ID.
func groupTarget(args []string) (stream, topic, group wire.Identifier, t target, err error) {
	if stream, topic, t, err = streamAndTopic(args); err != nil {
		return
	}
	group, err = parseIdentifier("group ID", args[2])
	t.group = args[2]
	return
}

func (a *app) groupCreate(cmd *cobra.Command, args []string) error {
	stream, topic, t, err := streamAndTopic(args)
	if err != nil {
		return err
	}
	name := args[2]
	t.name = name
	where := "topic with ID: " + args[1] + " and stream with ID: " + args[0]
	return a.call(cmd, t, "create consumer group: ID auto incremented, name: "+name+" for "+where,
		func(ctx context.Context, c *client.Client) error {
			g, err := c.CreateConsumerGroup(ctx, stream, topic, name)
			if err != nil {
				return err
			}
			return a.result(jsonview.GroupDetailsOf(g), func() {
				a.say("Consumer group: ID: %d, name: %s created for %s", g.ID, name, where)
			})
		})
}

func (a *app) groupDelete(cmd *cobra.Command, args []string) error {
	stream, topic, group, t, err := groupTarget(args)
	if err != nil {
		return err
	}
	where := "topic with ID: " + args[1] + " and stream with ID: " + args[0]
	return a.call(cmd, t, "delete consumer group with ID: "+args[2]+" for "+where, func(ctx context.Context, c *client.Client) error {
		if err := c.DeleteConsumerGroup(ctx, stream, topic, group); err != nil {
			return err
		}
		a.say("Consumer group with ID: %s deleted for %s", args[2], where)
		return nil
	})
}

func (a *app) groupGet(cmd *cobra.Command, args []string) error {
	stream, topic, group, t, err := groupTarget(args)
	if err != nil {
		return err
	}
	where := "topic with ID: " + args[1] + " and stream with ID: " + args[0]
	return a.call(cmd, t, "get consumer group with ID: "+args[2]+" for "+where, func(ctx context.Context, c *client.Client) error {
		g, err := c.GetConsumerGroup(ctx, stream, topic, group)
		if err != nil {
			return err
		}
		return a.result(jsonview.GroupDetailsOf(g), func() {
			props := []property{
				{"Consumer group id", strconv.FormatUint(uint64(g.ID), 10)},
				{"Consumer group name", string(g.Name)},
				{"Partitions count", strconv.FormatUint(uint64(g.PartitionsCount), 10)},
				{"Members count", strconv.FormatUint(uint64(g.MembersCount), 10)},
			}
			if len(g.Members) > 0 {
				var lines []string
				for _, m := range g.Members {
					lines = append(lines, fmt.Sprintf("member %d: %d partition%s %s", m.ID, len(m.PartitionIDs),
						plural(uint32(len(m.PartitionIDs))), joinUint32(m.PartitionIDs)))
				}
				props = append(props, property{"Members", strings.Join(lines, "\n")})
			}
			a.properties(props)
		})
	})
}

func joinUint32(ids []uint32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatUint(uint64(id), 10)
	}
	return strings.Join(s, ", ")
}

func (a *app) groupList(cmd *cobra.Command, args []string, mode listMode) error {
	stream, topic, t, err := streamAndTopic(args)
	if err != nil {
		return err
	}
	explain := "list consumer groups for stream with ID: " + args[0] + " and topic with ID: " + args[1] + " in " + string(mode) + " mode"
	return a.call(cmd, t, explain, func(ctx context.Context, c *client.Client) error {
		groups, err := c.GetConsumerGroups(ctx, stream, topic)
		if err != nil {
			return err
		}
		views := make([]jsonview.Group, len(groups))
		rows := make([][]string, len(groups))
		for i := range groups {
			g := &groups[i]
			views[i] = jsonview.GroupOf(g)
			rows[i] = []string{strconv.FormatUint(uint64(g.ID), 10), string(g.Name),
				strconv.FormatUint(uint64(g.PartitionsCount), 10), strconv.FormatUint(uint64(g.MembersCount), 10)}
		}
		return a.result(views, func() {
			a.table(mode, []string{"ID", "Name", "Partitions Count", "Members Count"}, rows)
		})
	})
}

// consumerKind is the -k/--kind of consumer-offset commands.
type consumerKind wire.ConsumerKind

func (k *consumerKind) String() string {
	if wire.ConsumerKind(*k) == wire.ConsumerGroup {
		return "consumer-group"
	}
	return "consumer"
}
func (k *consumerKind) Type() string { return "consumer|consumer-group" }
func (k *consumerKind) Set(s string) error {
	switch s {
	case "consumer", "c":
		*k = consumerKind(wire.ConsumerSingle)
	case "consumer-group", "cg":
		*k = consumerKind(wire.ConsumerGroup)
	default:
		return fmt.Errorf("%q is not consumer (c) or consumer-group (cg)", s)
	}
	return nil
}

func (a *app) consumerOffsetCommand() *cobra.Command {
	kinds := func(cmd *cobra.Command) *consumerKind {
		k := consumerKind(wire.ConsumerSingle)
		cmd.Flags().VarP(&k, "kind", "k", "Whose offset: consumer (c) or consumer-group (cg)")
		return &k
	}
	get := leaf("get [flags] <CONSUMER_ID> <STREAM_ID> <TOPIC_ID> <PARTITION_ID>", "g",
		"Retrieve the offset of a consumer for a given partition from the server", exactArgs(4), nil)
	get.Example = "  iggy consumer-offset get 1 3 5 1\n  iggy consumer-offset get 1 stream 5 1"
	getKind := kinds(get)
	get.RunE = func(cmd *cobra.Command, args []string) error { return a.offsetGet(cmd, args, *getKind) }

	set := leaf("set [flags] <CONSUMER_ID> <STREAM_ID> <TOPIC_ID> <PARTITION_ID> <OFFSET>", "s",
		"Set the offset of a consumer for a given partition on the server", exactArgs(5), nil)
	set.Example = "  iggy consumer-offset set 1 3 5 1 100\n  iggy consumer-offset set 1 stream topic 1 100"
	setKind := kinds(set)
	set.RunE = func(cmd *cobra.Command, args []string) error { return a.offsetSet(cmd, args, *setKind) }

	return groupCommand("consumer-offset", "o", "consumer offset operations", get, set)
}

// offsetTarget parses CONSUMER_ID STREAM_ID TOPIC_ID PARTITION_ID.
type offsetTarget struct {
	consumer      wire.Consumer
	stream, topic wire.Identifier
	partition     uint32
	t             target
	// explain is the reference's "for consumer with ID: ... and partition with ID: ..." text.
	explain string
}

func parseOffsetTarget(args []string, kind consumerKind) (offsetTarget, error) {
	var o offsetTarget
	id, err := parseIdentifier("consumer ID", args[0])
	if err != nil {
		return o, err
	}
	o.consumer = wire.Consumer{Kind: wire.ConsumerKind(kind), ID: id}
	if o.stream, o.topic, o.t, err = streamAndTopic(args[1:]); err != nil {
		return o, err
	}
	if o.partition, err = parseUint32("partition ID", args[3]); err != nil {
		return o, err
	}
	o.t.partition = args[3]
	who := "consumer"
	if o.consumer.Kind == wire.ConsumerGroup {
		who = "consumer group"
		o.t.group = args[0]
	} else {
		o.t.consumer = args[0]
	}
	o.explain = fmt.Sprintf("%s with ID: %s for stream with ID: %s and topic with ID: %s and partition with ID: %s",
		who, args[0], args[1], args[2], args[3])
	return o, nil
}

func (a *app) offsetGet(cmd *cobra.Command, args []string, kind consumerKind) error {
	o, err := parseOffsetTarget(args, kind)
	if err != nil {
		return err
	}
	return a.call(cmd, o.t, "get consumer offset for "+o.explain, func(ctx context.Context, c *client.Client) error {
		off, found, err := c.GetConsumerOffset(ctx, &wire.GetConsumerOffset{Consumer: o.consumer, StreamID: o.stream,
			TopicID: o.topic, Partition: wire.SomePartition(o.partition)})
		if err != nil {
			return err
		}
		if !found {
			return errors.New("no consumer offset stored for " + o.explain)
		}
		view := jsonview.ConsumerOffset{PartitionID: off.PartitionID, CurrentOffset: off.CurrentOffset, StoredOffset: off.StoredOffset}
		return a.result(view, func() {
			a.properties([]property{
				{"Consumer ID", args[0]},
				{"Stream ID", args[1]},
				{"Topic ID", args[2]},
				{"Partition ID", strconv.FormatUint(uint64(off.PartitionID), 10)},
				{"Current offset", strconv.FormatUint(off.CurrentOffset, 10)},
				{"Stored offset", strconv.FormatUint(off.StoredOffset, 10)},
			})
		})
	})
}

func (a *app) offsetSet(cmd *cobra.Command, args []string, kind consumerKind) error {
	o, err := parseOffsetTarget(args, kind)
	if err != nil {
		return err
	}
	offset, err := strconv.ParseUint(args[4], 10, 64)
	if err != nil {
		return usageErrorf("invalid offset %q: expected a whole number", args[4])
	}
	return a.call(cmd, o.t, "set consumer offset for "+o.explain+" to "+args[4], func(ctx context.Context, c *client.Client) error {
		err := c.StoreConsumerOffset(ctx, &wire.StoreConsumerOffset{Consumer: o.consumer, StreamID: o.stream,
			TopicID: o.topic, Partition: wire.SomePartition(o.partition), Offset: offset, Ack: wire.AckQuorum})
		if err != nil {
			return err
		}
		a.say("Consumer offset for %s set to %d", o.explain, offset)
		return nil
	})
}
