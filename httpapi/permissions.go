package httpapi

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/iggy-shard/iggy-shard/wire"
)

// permissionsJSON is the reference's Permissions (apache/iggy
// core/common/src/types/permissions/): every flag required on input; streams and
// topics optional, keyed by decimal ids.
type permissionsJSON struct {
	Global  globalJSON                    `json:"global"`
	Streams map[string]*streamPermissions `json:"streams"`
}

type globalJSON struct {
	ManageServers flag `json:"manage_servers"`
	ReadServers   flag `json:"read_servers"`
	ManageUsers   flag `json:"manage_users"`
	ReadUsers     flag `json:"read_users"`
	ManageStreams flag `json:"manage_streams"`
	ReadStreams   flag `json:"read_streams"`
	ManageTopics  flag `json:"manage_topics"`
	ReadTopics    flag `json:"read_topics"`
	PollMessages  flag `json:"poll_messages"`
	SendMessages  flag `json:"send_messages"`
}

type streamPermissions struct {
	ManageStream flag                         `json:"manage_stream"`
	ReadStream   flag                         `json:"read_stream"`
	ManageTopics flag                         `json:"manage_topics"`
	ReadTopics   flag                         `json:"read_topics"`
	PollMessages flag                         `json:"poll_messages"`
	SendMessages flag                         `json:"send_messages"`
	Topics       map[string]*topicPermissions `json:"topics"`
}

type topicPermissions struct {
	ManageTopic  flag `json:"manage_topic"`
	ReadTopic    flag `json:"read_topic"`
	PollMessages flag `json:"poll_messages"`
	SendMessages flag `json:"send_messages"`
}

// flag is a required boolean: it remembers whether the input had it.
type flag struct {
	v   bool
	set bool
}

func (f flag) MarshalJSON() ([]byte, error) { return strconv.AppendBool(nil, f.v), nil }

func (f *flag) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &f.v); err != nil {
		return err
	}
	f.set = true
	return nil
}

func on(v bool) flag { return flag{v: v, set: true} }

func renderPermissions(p *wire.Permissions) *permissionsJSON {
	g := p.Global
	j := &permissionsJSON{Global: globalJSON{on(g.ManageServers), on(g.ReadServers), on(g.ManageUsers), on(g.ReadUsers),
		on(g.ManageStreams), on(g.ReadStreams), on(g.ManageTopics), on(g.ReadTopics), on(g.PollMessages), on(g.SendMessages)}}
	if len(p.Streams) == 0 {
		return j
	}
	j.Streams = map[string]*streamPermissions{}
	for _, s := range p.Streams {
		sj := &streamPermissions{ManageStream: on(s.ManageStream), ReadStream: on(s.ReadStream), ManageTopics: on(s.ManageTopics),
			ReadTopics: on(s.ReadTopics), PollMessages: on(s.PollMessages), SendMessages: on(s.SendMessages)}
		if len(s.Topics) > 0 {
			sj.Topics = map[string]*topicPermissions{}
			for _, t := range s.Topics {
				sj.Topics[strconv.FormatUint(uint64(t.TopicID), 10)] = &topicPermissions{on(t.ManageTopic), on(t.ReadTopic),
					on(t.PollMessages), on(t.SendMessages)}
			}
		}
		j.Streams[strconv.FormatUint(uint64(s.StreamID), 10)] = sj
	}
	return j
}

// check reports the first missing flag or bad id.
func (j *permissionsJSON) check() error {
	g := &j.Global
	for name, f := range map[string]flag{"manage_servers": g.ManageServers, "read_servers": g.ReadServers,
		"manage_users": g.ManageUsers, "read_users": g.ReadUsers, "manage_streams": g.ManageStreams,
		"read_streams": g.ReadStreams, "manage_topics": g.ManageTopics, "read_topics": g.ReadTopics,
		"poll_messages": g.PollMessages, "send_messages": g.SendMessages} {
		if !f.set {
			return &shapeError{"permissions.global: missing field `" + name + "`"}
		}
	}
	for id, s := range j.Streams {
		if _, err := strconv.ParseUint(id, 10, 32); err != nil || s == nil {
			return &shapeError{fmt.Sprintf("permissions.streams: %q is not a stream id with permissions", id)}
		}
		if !(s.ManageStream.set && s.ReadStream.set && s.ManageTopics.set && s.ReadTopics.set && s.PollMessages.set && s.SendMessages.set) {
			return &shapeError{"permissions.streams." + id + ": a flag is missing"}
		}
		for tid, t := range s.Topics {
			if _, err := strconv.ParseUint(tid, 10, 32); err != nil || t == nil {
				return &shapeError{fmt.Sprintf("permissions.streams.%s.topics: %q is not a topic id with permissions", id, tid)}
			}
			if !(t.ManageTopic.set && t.ReadTopic.set && t.PollMessages.set && t.SendMessages.set) {
				return &shapeError{"permissions.streams." + id + ".topics." + tid + ": a flag is missing"}
			}
		}
	}
	return nil
}

// wire converts checked permissions, streams and topics in id order.
func (j *permissionsJSON) wire() wire.Permissions {
	g := &j.Global
	p := wire.Permissions{Global: wire.GlobalPermissions{ManageServers: g.ManageServers.v, ReadServers: g.ReadServers.v,
		ManageUsers: g.ManageUsers.v, ReadUsers: g.ReadUsers.v, ManageStreams: g.ManageStreams.v, ReadStreams: g.ReadStreams.v,
		ManageTopics: g.ManageTopics.v, ReadTopics: g.ReadTopics.v, PollMessages: g.PollMessages.v, SendMessages: g.SendMessages.v}}
	for _, id := range sortedIDs(j.Streams) {
		s := j.Streams[strconv.FormatUint(uint64(id), 10)]
		if s == nil { // "007" and "7" name the same stream; the check saw the text
			s = findByID(j.Streams, id)
		}
		sp := wire.StreamPermissions{StreamID: id, ManageStream: s.ManageStream.v, ReadStream: s.ReadStream.v,
			ManageTopics: s.ManageTopics.v, ReadTopics: s.ReadTopics.v, PollMessages: s.PollMessages.v, SendMessages: s.SendMessages.v}
		for _, tid := range sortedIDs(s.Topics) {
			t := findByID(s.Topics, tid)
			sp.Topics = append(sp.Topics, wire.TopicPermissions{TopicID: tid, ManageTopic: t.ManageTopic.v, ReadTopic: t.ReadTopic.v,
				PollMessages: t.PollMessages.v, SendMessages: t.SendMessages.v})
		}
		p.Streams = append(p.Streams, sp)
	}
	return p
}

func sortedIDs[T any](m map[string]*T) []uint32 {
	ids := make([]uint32, 0, len(m))
	for k := range m {
		n, _ := strconv.ParseUint(k, 10, 32)
		ids = append(ids, uint32(n))
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

func findByID[T any](m map[string]*T, id uint32) *T {
	for k, v := range m {
		if n, _ := strconv.ParseUint(k, 10, 32); uint32(n) == id {
			return v
		}
	}
	return nil
}
