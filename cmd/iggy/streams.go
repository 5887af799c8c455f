package main

import (
	"context"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/jsonview"
)

func (a *app) streamCommand() *cobra.Command {
	create := leaf("create [flags] <NAME>", "c", "Create stream with given name", exactArgs(1), a.streamCreate)
	create.Example = "  iggy stream create prod"
	// The reference takes a stream id and ignores it: the server assigns ids.
	create.Flags().Uint32P("stream-id", "s", 0, "Accepted for compatibility and ignored: the server assigns stream ids")
	create.Flags().MarkHidden("stream-id")

	list := leaf("list [flags]", "l", "List all streams", exactArgs(0), nil)
	var mode listMode
	addListMode(list, &mode)
	list.RunE = func(cmd *cobra.Command, _ []string) error { return a.streamList(cmd, mode) }
	list.Example = "  iggy stream list\n  iggy stream list --list-mode list"

	return groupCommand("stream", "s", "stream operations",
		create,
		example(leaf("delete <STREAM_ID>", "d", "Delete stream with given ID", exactArgs(1), a.streamDelete),
			"  iggy stream delete 1\n  iggy stream delete test"),
		example(leaf("update <STREAM_ID> <NAME>", "u", "Update stream name for given stream ID", exactArgs(2), a.streamUpdate),
			"  iggy stream update 1 production\n  iggy stream update test development"),
		example(leaf("get <STREAM_ID>", "g", "Get details of a single stream with given ID", exactArgs(1), a.streamGet),
			"  iggy stream get 1\n  iggy stream get test"),
		list,
		example(leaf("purge <STREAM_ID>", "p", "Purge all topics in given stream ID", exactArgs(1), a.streamPurge),
			"  iggy stream purge 1\n  iggy stream purge test"),
	)
}

// example sets a command's examples.
func example(cmd *cobra.Command, text string) *cobra.Command {
	cmd.Example = text
	return cmd
}

func (a *app) streamCreate(cmd *cobra.Command, args []string) error {
	name := args[0]
	return a.call(cmd, target{name: name}, "create stream with name: "+name+" and ID auto incremented",
		func(ctx context.Context, c *client.Client) error {
			s, err := c.CreateStream(ctx, name)
			if err != nil {
				return err
			}
			return a.result(jsonview.StreamDetailsOf(s), func() {
				a.say("Stream with name: %s and ID: %d created", name, s.ID)
			})
		})
}

func (a *app) streamDelete(cmd *cobra.Command, args []string) error {
	stream, err := parseIdentifier("stream ID", args[0])
	if err != nil {
		return err
	}
	return a.call(cmd, target{stream: args[0]}, "delete stream with ID: "+args[0], func(ctx context.Context, c *client.Client) error {
		if err := c.DeleteStream(ctx, stream); err != nil {
			return err
		}
		a.say("Stream with ID: %s deleted", args[0])
		return nil
	})
}

func (a *app) streamUpdate(cmd *cobra.Command, args []string) error {
	stream, err := parseIdentifier("stream ID", args[0])
	if err != nil {
		return err
	}
	name := args[1]
	return a.call(cmd, target{stream: args[0], name: name}, "update stream with ID: "+args[0]+" and name: "+name,
		func(ctx context.Context, c *client.Client) error {
			if err := c.UpdateStream(ctx, stream, name); err != nil {
				return err
			}
			a.say("Stream with ID: %s updated name: %s", args[0], name)
			return nil
		})
}

func (a *app) streamGet(cmd *cobra.Command, args []string) error {
	stream, err := parseIdentifier("stream ID", args[0])
	if err != nil {
		return err
	}
	return a.call(cmd, target{stream: args[0]}, "get stream with ID: "+args[0], func(ctx context.Context, c *client.Client) error {
		s, err := c.GetStream(ctx, stream)
		if err != nil {
			return err
		}
		return a.result(jsonview.StreamDetailsOf(s), func() {
			a.properties([]property{
				{"Stream ID", strconv.FormatUint(uint64(s.ID), 10)},
				{"Created", utcTime(s.CreatedAtMicros)},
				{"Stream name", string(s.Name)},
				{"Stream size", displaySize(s.SizeBytes)},
				{"Stream message count", strconv.FormatUint(s.MessagesCount, 10)},
				{"Stream topics count", strconv.FormatUint(uint64(s.TopicsCount), 10)},
			})
		})
	})
}

func (a *app) streamList(cmd *cobra.Command, mode listMode) error {
	return a.call(cmd, target{}, "list streams in "+string(mode)+" mode", func(ctx context.Context, c *client.Client) error {
		streams, err := c.GetStreams(ctx)
		if err != nil {
			return err
		}
		views := make([]jsonview.Stream, len(streams))
		rows := make([][]string, len(streams))
		for i := range streams {
			s := &streams[i]
			views[i] = jsonview.StreamOf(s)
			rows[i] = []string{strconv.FormatUint(uint64(s.ID), 10), utcTime(s.CreatedAtMicros), string(s.Name),
				displaySize(s.SizeBytes), strconv.FormatUint(s.MessagesCount, 10), strconv.FormatUint(uint64(s.TopicsCount), 10)}
		}
		return a.result(views, func() {
			if len(rows) == 0 {
				a.say("No streams found!")
				return
			}
			a.table(mode, []string{"ID", "Created", "Name", "Size", "Messages", "Topics"}, rows)
		})
	})
}

func (a *app) streamPurge(cmd *cobra.Command, args []string) error {
	stream, err := parseIdentifier("stream ID", args[0])
	if err != nil {
		return err
	}
	return a.call(cmd, target{stream: args[0]}, "purge stream with ID: "+args[0], func(ctx context.Context, c *client.Client) error {
		if err := c.PurgeStream(ctx, stream); err != nil {
			return err
		}
		a.say("Stream with ID: %s purged", args[0])
		return nil
	})
}
