package client

import (
	"context"

	"github.com/iggy-shard/iggy-shard/wire"
)

// The commands of iggy.apache.org/docs/binary-protocol/commands, one method each.
// Results are owned by the caller (their byte fields alias a copy of the reply made for
// them). Replies whose empty body means "not found" return the code the Go SDK reports
// for it: wire.ErrStreamIdNotFound, wire.ErrTopicIdNotFound, wire.ErrResourceNotFound
// (users), wire.ErrConsumerGroupIdNotFound, wire.ErrConsumerGroupMemberNotFound (sync),
// wire.ErrClientNotFound.

// System.

// Ping (1) is the only command a server serves before login.
func (c *Client) Ping(ctx context.Context) error {
	_, err := c.call(ctx, wire.CodePing, nil)
	return err
}

// GetStats (10).
func (c *Client) GetStats(ctx context.Context) (*wire.Stats, error) {
	return decodeInto[wire.Stats](c.call(ctx, wire.CodeGetStats, nil))
}

// GetSnapshot (11) returns the server's diagnostic ZIP archive with the requested
// sections (wire.SnapshotAll alone for all of them).
func (c *Client) GetSnapshot(ctx context.Context, compression wire.SnapshotCompression, types ...wire.SnapshotType) ([]byte, error) {
	req := wire.GetSnapshot{Compression: compression, Types: make([]byte, len(types))}
	for i, t := range types {
		req.Types[i] = byte(t)
	}
	s, err := decodeInto[wire.Snapshot](c.call(ctx, wire.CodeGetSnapshot, &req))
	if err != nil {
		return nil, err
	}
	return s.Archive, nil
}

// GetClusterMetadata (12): the cluster's name and nodes.
func (c *Client) GetClusterMetadata(ctx context.Context) (*wire.ClusterMetadata, error) {
	return decodeInto[wire.ClusterMetadata](c.call(ctx, wire.CodeGetClusterMetadata, nil))
}

// DescribeOptions (13): the option catalog of a scope.
func (c *Client) DescribeOptions(ctx context.Context, scope wire.OptionsScope) ([]wire.OptionDescriptor, error) {
	payload, err := c.call(ctx, wire.CodeDescribeOptions, &wire.DescribeOptions{Scope: scope})
	if err != nil {
		return nil, err
	}
	return wire.AppendOptionDescriptors(nil, payload)
}

// GetMe (20): this connection as the server sees it.
func (c *Client) GetMe(ctx context.Context) (*wire.ClientDetails, error) {
	return decodeInto[wire.ClientDetails](c.call(ctx, wire.CodeGetMe, nil))
}

// GetClient (21): one connection by the server's client id; wire.ErrClientNotFound
// when there is none.
func (c *Client) GetClient(ctx context.Context, clientID uint32) (*wire.ClientDetails, error) {
	return decodeInto[wire.ClientDetails](c.call(ctx, wire.CodeGetClient, &wire.GetClient{ClientID: clientID}))
}

// GetClients (22): every connection.
func (c *Client) GetClients(ctx context.Context) ([]wire.ClientHeader, error) {
	payload, err := c.call(ctx, wire.CodeGetClients, nil)
	if err != nil {
		return nil, err
	}
	return wire.AppendClients(nil, payload)
}

// Users.

// GetUser (31); wire.ErrResourceNotFound for an unknown user.
func (c *Client) GetUser(ctx context.Context, user wire.Identifier) (*wire.UserDetails, error) {
	return decodeInto[wire.UserDetails](c.call(ctx, wire.CodeGetUser, &wire.GetUser{UserID: user}))
}

// GetUsers (32).
func (c *Client) GetUsers(ctx context.Context) ([]wire.UserHeader, error) {
	payload, err := c.call(ctx, wire.CodeGetUsers, nil)
	if err != nil {
		return nil, err
	}
	return wire.AppendUsers(nil, payload)
}

// CreateUser (33) with a status (wire.UserActive or wire.UserInactive) and optional
// permissions (nil for none).
func (c *Client) CreateUser(ctx context.Context, username, password string, status wire.UserStatus, permissions *wire.Permissions) (*wire.UserDetails, error) {
	req := wire.CreateUser{Username: []byte(username), Password: []byte(password), Status: status}
	if permissions != nil {
		req.HasPermissions = true
		req.Permissions = permissions.Append(nil)
	}
	return decodeInto[wire.UserDetails](c.call(ctx, wire.CodeCreateUser, &req))
}

// DeleteUser (34).
func (c *Client) DeleteUser(ctx context.Context, user wire.Identifier) error {
	_, err := c.call(ctx, wire.CodeDeleteUser, &wire.DeleteUser{UserID: user})
	return err
}

// UserUpdate is a patch of a user: an empty Username and a zero Status leave those
// fields unchanged, as in the Go SDK.
type UserUpdate struct {
	Username string
	Status   wire.UserStatus
}

// UpdateUser (35).
func (c *Client) UpdateUser(ctx context.Context, user wire.Identifier, update UserUpdate) error {
	req := wire.UpdateUser{UserID: user}
	if update.Username != "" {
		req.HasUsername, req.Username = true, []byte(update.Username)
	}
	if update.Status != 0 {
		req.HasStatus, req.Status = true, update.Status
	}
	_, err := c.call(ctx, wire.CodeUpdateUser, &req)
	return err
}

// UpdatePermissions (36) replaces a user's permissions; nil clears them.
func (c *Client) UpdatePermissions(ctx context.Context, user wire.Identifier, permissions *wire.Permissions) error {
	req := wire.UpdatePermissions{UserID: user}
	if permissions != nil {
		req.HasPermissions = true
		req.Permissions = permissions.Append(nil)
	}
	_, err := c.call(ctx, wire.CodeUpdatePermissions, &req)
	return err
}

// ChangePassword (37).
func (c *Client) ChangePassword(ctx context.Context, user wire.Identifier, currentPassword, newPassword string) error {
	req := wire.ChangePassword{UserID: user, CurrentPassword: []byte(currentPassword), NewPassword: []byte(newPassword)}
	_, err := c.call(ctx, wire.CodeChangePassword, &req)
	return err
}

// Personal access tokens.

// GetPersonalAccessTokens (41): the caller's tokens (names and expiry, never the
// secrets). An empty list is not an error.
func (c *Client) GetPersonalAccessTokens(ctx context.Context) ([]wire.PatEntry, error) {
	payload, err := c.call(ctx, wire.CodeGetPersonalAccessTokens, nil)
	if err != nil {
		return nil, err
	}
	return wire.AppendPersonalAccessTokens(nil, payload)
}

// CreatePersonalAccessToken (42) returns the token, which the server shows only
// once. expiryMicros is a lifetime in microseconds: 0 is the server default (no
// expiry) and wire.TokenExpiryNever never expires.
func (c *Client) CreatePersonalAccessToken(ctx context.Context, name string, expiryMicros uint64) (string, error) {
	req := wire.CreatePersonalAccessToken{Name: []byte(name), ExpiryUs: expiryMicros}
	t, err := decodeInto[wire.CreatedToken](c.call(ctx, wire.CodeCreatePersonalAccessToken, &req))
	if err != nil {
		return "", err
	}
	return string(t.Token), nil
}

// DeletePersonalAccessToken (43).
func (c *Client) DeletePersonalAccessToken(ctx context.Context, name string) error {
	_, err := c.call(ctx, wire.CodeDeletePersonalAccessToken, &wire.DeletePersonalAccessToken{Name: []byte(name)})
	return err
}

// Streams.

// GetStream (200); wire.ErrStreamIdNotFound for an unknown stream.
func (c *Client) GetStream(ctx context.Context, stream wire.Identifier) (*wire.StreamDetails, error) {
	return decodeInto[wire.StreamDetails](c.call(ctx, wire.CodeGetStream, &wire.GetStream{StreamID: stream}))
}

// GetStreams (201).
func (c *Client) GetStreams(ctx context.Context) ([]wire.StreamHeader, error) {
	payload, err := c.call(ctx, wire.CodeGetStreams, nil)
	if err != nil {
		return nil, err
	}
	return wire.AppendStreams(nil, payload)
}

// CreateStream (202); wire.ErrStreamNameAlreadyExists for a taken name.
func (c *Client) CreateStream(ctx context.Context, name string) (*wire.StreamDetails, error) {
	return decodeInto[wire.StreamDetails](c.call(ctx, wire.CodeCreateStream, &wire.CreateStream{Name: []byte(name)}))
}

// DeleteStream (203).
func (c *Client) DeleteStream(ctx context.Context, stream wire.Identifier) error {
	_, err := c.call(ctx, wire.CodeDeleteStream, &wire.DeleteStream{StreamID: stream})
	return err
}

// UpdateStream (204) renames a stream.
func (c *Client) UpdateStream(ctx context.Context, stream wire.Identifier, name string) error {
	_, err := c.call(ctx, wire.CodeUpdateStream, &wire.UpdateStream{StreamID: stream, Name: []byte(name)})
	return err
}

// PurgeStream (205) deletes every message of every topic of a stream.
func (c *Client) PurgeStream(ctx context.Context, stream wire.Identifier) error {
	_, err := c.call(ctx, wire.CodePurgeStream, &wire.PurgeStream{StreamID: stream})
	return err
}

// Topics.

// GetTopic (300); wire.ErrTopicIdNotFound when the stream or topic is unknown.
func (c *Client) GetTopic(ctx context.Context, stream, topic wire.Identifier) (*wire.TopicDetails, error) {
	return decodeInto[wire.TopicDetails](c.call(ctx, wire.CodeGetTopic, &wire.GetTopic{StreamID: stream, TopicID: topic}))
}

// GetTopics (301).
func (c *Client) GetTopics(ctx context.Context, stream wire.Identifier) ([]wire.TopicHeader, error) {
	payload, err := c.call(ctx, wire.CodeGetTopics, &wire.GetTopics{StreamID: stream})
	if err != nil {
		return nil, err
	}
	return wire.AppendTopics(nil, payload)
}

// CreateTopic (302) with partitionsCount partitions and an options block (nil for
// the defaults; build one with TopicOptions or wire.AppendOption).
func (c *Client) CreateTopic(ctx context.Context, stream wire.Identifier, name string, partitionsCount uint32, options []byte) (*wire.TopicDetails, error) {
	req := wire.CreateTopic{StreamID: stream, PartitionsCount: partitionsCount, Name: []byte(name), Options: options}
	return decodeInto[wire.TopicDetails](c.call(ctx, wire.CodeCreateTopic, &req))
}

// UpdateTopic (304) renames a topic and patches its updatable options
// (compression_algorithm, message_expiry, max_topic_size).
func (c *Client) UpdateTopic(ctx context.Context, stream, topic wire.Identifier, name string, options []byte) error {
	req := wire.UpdateTopic{StreamID: stream, TopicID: topic, Name: []byte(name), Options: options}
	_, err := c.call(ctx, wire.CodeUpdateTopic, &req)
	return err
}

// DeleteTopic (303).
func (c *Client) DeleteTopic(ctx context.Context, stream, topic wire.Identifier) error {
	_, err := c.call(ctx, wire.CodeDeleteTopic, &wire.DeleteTopic{StreamID: stream, TopicID: topic})
	return err
}

// PurgeTopic (305) deletes every message of a topic.
func (c *Client) PurgeTopic(ctx context.Context, stream, topic wire.Identifier) error {
	_, err := c.call(ctx, wire.CodePurgeTopic, &wire.PurgeTopic{StreamID: stream, TopicID: topic})
	return err
}

// Partitions and segments.

// CreatePartitions (402) adds count partitions to a topic.
func (c *Client) CreatePartitions(ctx context.Context, stream, topic wire.Identifier, count uint32) error {
	_, err := c.call(ctx, wire.CodeCreatePartitions, &wire.CreatePartitions{StreamID: stream, TopicID: topic, PartitionsCount: count})
	return err
}

// DeletePartitions (403) removes the count partitions with the highest ids.
func (c *Client) DeletePartitions(ctx context.Context, stream, topic wire.Identifier, count uint32) error {
	_, err := c.call(ctx, wire.CodeDeletePartitions, &wire.DeletePartitions{StreamID: stream, TopicID: topic, PartitionsCount: count})
	return err
}

// DeleteSegments (503) deletes the count oldest sealed segments of a partition.
func (c *Client) DeleteSegments(ctx context.Context, stream, topic wire.Identifier, partitionID, count uint32) error {
	req := wire.DeleteSegments{StreamID: stream, TopicID: topic, PartitionID: partitionID, SegmentsCount: count}
	_, err := c.call(ctx, wire.CodeDeleteSegments, &req)
	return err
}

// Consumer groups.

// GetConsumerGroup (600); wire.ErrConsumerGroupIdNotFound for an unknown group.
func (c *Client) GetConsumerGroup(ctx context.Context, stream, topic, group wire.Identifier) (*wire.ConsumerGroupDetails, error) {
	req := wire.GetConsumerGroup{GroupTarget: wire.GroupTarget{StreamID: stream, TopicID: topic, GroupID: group}}
	return decodeInto[wire.ConsumerGroupDetails](c.call(ctx, wire.CodeGetConsumerGroup, &req))
}

// GetConsumerGroups (601).
func (c *Client) GetConsumerGroups(ctx context.Context, stream, topic wire.Identifier) ([]wire.ConsumerGroupHeader, error) {
	payload, err := c.call(ctx, wire.CodeGetConsumerGroups, &wire.GetConsumerGroups{StreamID: stream, TopicID: topic})
	if err != nil {
		return nil, err
	}
	return wire.AppendConsumerGroups(nil, payload)
}

// CreateConsumerGroup (602).
func (c *Client) CreateConsumerGroup(ctx context.Context, stream, topic wire.Identifier, name string) (*wire.ConsumerGroupDetails, error) {
	req := wire.CreateConsumerGroup{StreamID: stream, TopicID: topic, Name: []byte(name)}
	return decodeInto[wire.ConsumerGroupDetails](c.call(ctx, wire.CodeCreateConsumerGroup, &req))
}

// DeleteConsumerGroup (603).
func (c *Client) DeleteConsumerGroup(ctx context.Context, stream, topic, group wire.Identifier) error {
	req := wire.DeleteConsumerGroup{GroupTarget: wire.GroupTarget{StreamID: stream, TopicID: topic, GroupID: group}}
	_, err := c.call(ctx, wire.CodeDeleteConsumerGroup, &req)
	return err
}

// JoinConsumerGroup (604). Membership belongs to the client id, which a new login
// changes: join again after logging in again.
func (c *Client) JoinConsumerGroup(ctx context.Context, stream, topic, group wire.Identifier) error {
	req := wire.JoinConsumerGroup{GroupTarget: wire.GroupTarget{StreamID: stream, TopicID: topic, GroupID: group}}
	_, err := c.call(ctx, wire.CodeJoinConsumerGroup, &req)
	return err
}

// LeaveConsumerGroup (605).
func (c *Client) LeaveConsumerGroup(ctx context.Context, stream, topic, group wire.Identifier) error {
	req := wire.LeaveConsumerGroup{GroupTarget: wire.GroupTarget{StreamID: stream, TopicID: topic, GroupID: group}}
	_, err := c.call(ctx, wire.CodeLeaveConsumerGroup, &req)
	return err
}

// SyncConsumerGroup (606): this member's partitions and the group generation;
// wire.ErrConsumerGroupMemberNotFound when this client is not a member.
func (c *Client) SyncConsumerGroup(ctx context.Context, stream, topic, group wire.Identifier) (*wire.Assignment, error) {
	req := wire.SyncConsumerGroup{GroupTarget: wire.GroupTarget{StreamID: stream, TopicID: topic, GroupID: group}}
	return decodeInto[wire.Assignment](c.call(ctx, wire.CodeSyncConsumerGroup, &req))
}

// Messages and offsets (the hot paths live in messages.go).

// FlushUnsavedBuffer (102). Servers of protocol 0.11.0 answer it with
// wire.ErrFeatureUnavailable: durability is the topic's enforce_fsync option.
func (c *Client) FlushUnsavedBuffer(ctx context.Context, stream, topic wire.Identifier, partitionID uint32, fsync bool) error {
	req := wire.FlushUnsavedBuffer{StreamID: stream, TopicID: topic, PartitionID: partitionID, Fsync: fsync}
	_, err := c.call(ctx, wire.CodeFlushUnsavedBuffer, &req)
	return err
}

// GetConsumerOffset (120) returns the stored offset, and false when nothing is
// stored (or the group or stream is unknown: the server cannot tell them apart).
func (c *Client) GetConsumerOffset(ctx context.Context, req *wire.GetConsumerOffset) (wire.ConsumerOffset, bool, error) {
	payload, err := c.call(ctx, wire.CodeGetConsumerOffset, req)
	if err != nil {
		return wire.ConsumerOffset{}, false, err
	}
	if len(payload) == 0 {
		return wire.ConsumerOffset{}, false, nil
	}
	var o wire.ConsumerOffset
	if err := o.Decode(payload); err != nil {
		return wire.ConsumerOffset{}, false, err
	}
	return o, true, nil
}

// StoreConsumerOffset (121) at req.Ack: wire.AckQuorum (replicated before the
// reply) or wire.AckNoAck (answered at once).
func (c *Client) StoreConsumerOffset(ctx context.Context, req *wire.StoreConsumerOffset) error {
	_, err := c.call(ctx, wire.CodeStoreConsumerOffset, req)
	return err
}

// DeleteConsumerOffset (122); wire.ErrConsumerOffsetNotFound when nothing is stored.
func (c *Client) DeleteConsumerOffset(ctx context.Context, req *wire.DeleteConsumerOffset) error {
	_, err := c.call(ctx, wire.CodeDeleteConsumerOffset, req)
	return err
}

// decoder is a wire reply type decoding a whole body.
type decoder[T any] interface {
	*T
	Decode(body []byte) error
}

// decodeInto decodes an owned payload into a fresh T.
func decodeInto[T any, P decoder[T]](payload []byte, err error) (*T, error) {
	if err != nil {
		return nil, err
	}
	v := new(T)
	if err := P(v).Decode(payload); err != nil {
		return nil, err
	}
	return v, nil
}
