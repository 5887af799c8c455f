package jsonview

import (
	"strconv"

	"github.com/iggy-shard/iggy-shard/wire"
)

// User is UserInfo (the list's entries: no permissions), UserDetails
// UserInfoDetails (permissions always present, null for none).
type User struct {
	ID        uint32            `json:"id"`
	CreatedAt uint64            `json:"created_at"`
	Status    string            `json:"status"`
	Username  string            `json:"username"`
	Options   map[string]Option `json:"options"`
}

type UserDetails struct {
	ID          uint32            `json:"id"`
	CreatedAt   uint64            `json:"created_at"`
	Status      string            `json:"status"`
	Username    string            `json:"username"`
	Permissions *Permissions      `json:"permissions"`
	Options     map[string]Option `json:"options"`
}

func UserOf(u *wire.UserHeader) User {
	return User{ID: u.ID, CreatedAt: u.CreatedAtMicros, Status: UserStatusName(u.Status), Username: string(u.Username),
		Options: PlainOptions(u.Options)}
}

func UserDetailsOf(u *wire.UserDetails) UserDetails {
	h := UserOf(&u.UserHeader)
	v := UserDetails{ID: h.ID, CreatedAt: h.CreatedAt, Status: h.Status, Username: h.Username, Options: h.Options}
	if u.HasPermissions {
		p := PermissionsOf(&u.Permissions)
		v.Permissions = &p
	}
	return v
}

// UserStatusName is a user's status as JSON names it; a code the protocol does not
// define is shown with its number.
func UserStatusName(s uint8) string {
	switch wire.UserStatus(s) {
	case wire.UserActive:
		return "active"
	case wire.UserInactive:
		return "inactive"
	}
	return "unknown(" + strconv.Itoa(int(s)) + ")"
}

// Permissions is the reference's Permissions (apache/iggy
// core/common/src/types/permissions/): streams and topics keyed by decimal ids,
// null when there are none.
type Permissions struct {
	Global  GlobalPermissions            `json:"global"`
	Streams map[string]StreamPermissions `json:"streams"`
}

type GlobalPermissions struct {
	ManageServers bool `json:"manage_servers"`
	ReadServers   bool `json:"read_servers"`
	ManageUsers   bool `json:"manage_users"`
	ReadUsers     bool `json:"read_users"`
	ManageStreams bool `json:"manage_streams"`
	ReadStreams   bool `json:"read_streams"`
	ManageTopics  bool `json:"manage_topics"`
	ReadTopics    bool `json:"read_topics"`
	PollMessages  bool `json:"poll_messages"`
	SendMessages  bool `json:"send_messages"`
}

type StreamPermissions struct {
	ManageStream bool                        `json:"manage_stream"`
	ReadStream   bool                        `json:"read_stream"`
	ManageTopics bool                        `json:"manage_topics"`
	ReadTopics   bool                        `json:"read_topics"`
	PollMessages bool                        `json:"poll_messages"`
	SendMessages bool                        `json:"send_messages"`
	Topics       map[string]TopicPermissions `json:"topics"`
}

type TopicPermissions struct {
	ManageTopic  bool `json:"manage_topic"`
	ReadTopic    bool `json:"read_topic"`
	PollMessages bool `json:"poll_messages"`
	SendMessages bool `json:"send_messages"`
}

func PermissionsOf(p *wire.Permissions) Permissions {
	g := p.Global
	v := Permissions{Global: GlobalPermissions{g.ManageServers, g.ReadServers, g.ManageUsers, g.ReadUsers,
		g.ManageStreams, g.ReadStreams, g.ManageTopics, g.ReadTopics, g.PollMessages, g.SendMessages}}
	if len(p.Streams) == 0 {
		return v
	}
	v.Streams = map[string]StreamPermissions{}
	for _, s := range p.Streams {
		sv := StreamPermissions{s.ManageStream, s.ReadStream, s.ManageTopics, s.ReadTopics, s.PollMessages, s.SendMessages, nil}
		if len(s.Topics) > 0 {
			sv.Topics = map[string]TopicPermissions{}
			for _, t := range s.Topics {
				sv.Topics[strconv.FormatUint(uint64(t.TopicID), 10)] = TopicPermissions{t.ManageTopic, t.ReadTopic, t.PollMessages, t.SendMessages}
			}
		}
		v.Streams[strconv.FormatUint(uint64(s.StreamID), 10)] = sv
	}
	return v
}

// PersonalAccessToken is a token of the caller's list: its expiry in microseconds,
// null for one that never expires.
type PersonalAccessToken struct {
	Name     string  `json:"name"`
	ExpiryAt *uint64 `json:"expiry_at"`
}

func PersonalAccessTokenOf(t *wire.PatEntry) PersonalAccessToken {
	v := PersonalAccessToken{Name: string(t.Name)}
	if t.ExpiryAtMicros != 0 {
		at := t.ExpiryAtMicros
		v.ExpiryAt = &at
	}
	return v
}
