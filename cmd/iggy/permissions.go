package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Permission arguments, in the reference's notation
// (apache/iggy core/cli/src/args/permissions/):
//
//	-g, --global-permissions  m_srv,r_srv,...        comma-separated global grants
//	-s, --stream-permissions  STREAM_ID[:PERMS][#TOPIC_ID[:PERMS]]...
//
// Every name has a long and a short form; what is not named is not granted.

type permissionName struct{ long, short string }

var globalPermissionNames = [...]permissionName{
	{"manage_servers", "m_srv"}, {"read_servers", "r_srv"}, {"manage_users", "m_usr"}, {"read_users", "r_usr"},
	{"manage_streams", "m_str"}, {"read_streams", "r_str"}, {"manage_topics", "m_top"}, {"read_topics", "r_top"},
	{"poll_messages", "p_msg"}, {"send_messages", "s_msg"},
}

var streamPermissionNames = [...]permissionName{
	{"manage_stream", "m_str"}, {"read_stream", "r_str"}, {"manage_topics", "m_top"}, {"read_topics", "r_top"},
	{"poll_messages", "p_msg"}, {"send_messages", "s_msg"},
}

var topicPermissionNames = [...]permissionName{
	{"manage_topic", "m_top"}, {"read_topic", "r_top"}, {"poll_messages", "p_msg"}, {"send_messages", "s_msg"},
}

// parseGrants sets flags[i] for every name of list; it returns the unknown names.
func parseGrants(list string, names []permissionName, flags []*bool) []string {
	var unknown []string
	for _, item := range strings.Split(list, ",") {
		i := slices.IndexFunc(names, func(n permissionName) bool { return n.long == item || n.short == item })
		if i < 0 {
			if item == "" {
				item = "[empty]"
			}
			unknown = append(unknown, strconv.Quote(item))
			continue
		}
		*flags[i] = true
	}
	return unknown
}

func parseGlobalPermissions(list string) (wire.GlobalPermissions, error) {
	var g wire.GlobalPermissions
	flags := []*bool{&g.ManageServers, &g.ReadServers, &g.ManageUsers, &g.ReadUsers, &g.ManageStreams,
		&g.ReadStreams, &g.ManageTopics, &g.ReadTopics, &g.PollMessages, &g.SendMessages}
	if unknown := parseGrants(list, globalPermissionNames[:], flags); len(unknown) > 0 {
		return g, usageErrorf("Unknown global permission(s) %s (known: %s)", strings.Join(unknown, ", "), longNames(globalPermissionNames[:]))
	}
	return g, nil
}

func longNames(names []permissionName) string {
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = n.long + "/" + n.short
	}
	return strings.Join(s, ", ")
}

// parseStreamPermissions reads one -s value.
func parseStreamPermissions(spec string) (wire.StreamPermissions, error) {
	parts := strings.Split(spec, "#")
	var s wire.StreamPermissions
	id, perms, hasPerms := strings.Cut(parts[0], ":")
	n, err := strconv.ParseUint(id, 10, 32)
	if err != nil {
		return s, usageErrorf("Invalid stream ID - %q is not a numeric stream id", id)
	}
	s.StreamID = uint32(n)
	if hasPerms {
		flags := []*bool{&s.ManageStream, &s.ReadStream, &s.ManageTopics, &s.ReadTopics, &s.PollMessages, &s.SendMessages}
		if unknown := parseGrants(perms, streamPermissionNames[:], flags); len(unknown) > 0 {
			return s, usageErrorf("Unknown permission(s) %s for stream ID: %d (known: %s)", strings.Join(unknown, ", "), s.StreamID, longNames(streamPermissionNames[:]))
		}
	}
	for _, topicSpec := range parts[1:] {
		var t wire.TopicPermissions
		id, perms, hasPerms := strings.Cut(topicSpec, ":")
		n, err := strconv.ParseUint(id, 10, 32)
		if err != nil {
			return s, usageErrorf("Invalid topic ID - %q is not a numeric topic id", id)
		}
		t.TopicID = uint32(n)
		if hasPerms {
			flags := []*bool{&t.ManageTopic, &t.ReadTopic, &t.PollMessages, &t.SendMessages}
			if unknown := parseGrants(perms, topicPermissionNames[:], flags); len(unknown) > 0 {
				return s, usageErrorf("Unknown permission(s) %s for topic ID: %d (known: %s)", strings.Join(unknown, ", "), t.TopicID, longNames(topicPermissionNames[:]))
			}
		}
		s.Topics = append(s.Topics, t)
	}
	return s, nil
}

// parsePermissions builds the permissions of -g and -s: nil when neither is given
// (no permissions), all global grants off when only -s is.
func parsePermissions(global string, globalGiven bool, streams []string) (*wire.Permissions, error) {
	if !globalGiven && len(streams) == 0 {
		return nil, nil
	}
	p := &wire.Permissions{}
	if globalGiven {
		g, err := parseGlobalPermissions(global)
		if err != nil {
			return nil, err
		}
		p.Global = g
	}
	seen := map[uint32]bool{}
	for _, spec := range streams {
		s, err := parseStreamPermissions(spec)
		if err != nil {
			return nil, err
		}
		if seen[s.StreamID] {
			return nil, usageErrorf("stream %d is given twice in --stream-permissions", s.StreamID)
		}
		seen[s.StreamID] = true
		p.Streams = append(p.Streams, s)
	}
	return p, nil
}

// permissionsText shows permissions as the grants they hold, one line per scope.
func permissionsText(p *wire.Permissions) string {
	granted := func(names []permissionName, flags ...bool) string {
		var s []string
		for i, on := range flags {
			if on {
				s = append(s, names[i].long)
			}
		}
		if len(s) == 0 {
			return "none"
		}
		return strings.Join(s, ", ")
	}
	g := p.Global
	lines := []string{"global: " + granted(globalPermissionNames[:], g.ManageServers, g.ReadServers, g.ManageUsers,
		g.ReadUsers, g.ManageStreams, g.ReadStreams, g.ManageTopics, g.ReadTopics, g.PollMessages, g.SendMessages)}
	for _, s := range p.Streams {
		lines = append(lines, fmt.Sprintf("stream %d: %s", s.StreamID, granted(streamPermissionNames[:], s.ManageStream,
			s.ReadStream, s.ManageTopics, s.ReadTopics, s.PollMessages, s.SendMessages)))
		for _, t := range s.Topics {
			lines = append(lines, fmt.Sprintf("  topic %d: %s", t.TopicID, granted(topicPermissionNames[:], t.ManageTopic,
				t.ReadTopic, t.PollMessages, t.SendMessages)))
		}
	}
	return strings.Join(lines, "\n")
}
