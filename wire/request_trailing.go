package wire

// What a request decoder does with bytes after the body's last field, command by
// command, as the reference server does it. The reference decodes request bodies with
// WireDecode::decode_from (core/binary_protocol/src/codec.rs: "decode from the entire
// buffer, ignoring trailing bytes"), in the places the table names; the Node.js SDK
// depends on it (it sends DeleteTopic with a u32 partitions count after the topic).
// A body whose last field runs to its end (an options block, a message batch) has no
// "after": bytes appended to it are read as part of that field and refused when they
// do not parse as it.
//
// The legacy logins 38 and 44 are not in the table: their body is never read (a
// MalformedLogin eviction answers them).

// TrailingBytes is what a decoder does with bytes after a body's last field.
type TrailingBytes uint8

const (
	// TrailingIgnored: the fields are read and what follows them is dropped.
	TrailingIgnored TrailingBytes = 1
	// TrailingRefused: the last field runs to the end of the body, so extra bytes
	// are part of it and a body they break is refused.
	TrailingRefused TrailingBytes = 2
)

func (t TrailingBytes) String() string {
	switch t {
	case TrailingIgnored:
		return "ignored"
	case TrailingRefused:
		return "refused"
	}
	return "TrailingBytes(?)"
}

// RequestBodyRule is one row of the table.
type RequestBodyRule struct {
	Code     CommandCode
	Trailing TrailingBytes
	// Reference is the apache/iggy file that decodes this body in the reference
	// server (the call to decode_from, or the options-block or batch rule).
	Reference string
}

// Where the reference decodes the bodies.
const (
	refNonReplicatedReads = "core/server/src/responses.rs (build_non_replicated_response: decode_from)"
	refDispatch           = "core/server/src/dispatch.rs (decode_from)"
	refBodyIgnored        = "core/server/src/dispatch.rs, responses.rs (the handler never reads the body)"
	refPartitionRequests  = "core/server/src/responses.rs (resolve_partition_request_namespace: decode_from)"
	refMetadataApply      = "core/metadata/src/stm (the applied operation is decoded with decode_from)"
	refLoginRegister      = "core/binary_protocol/src/requests/users/login_register.rs (both shapes probed)"
	refOptionsBlock       = "core/binary_protocol/src/codec.rs with the options block, which runs to the end of the body (iggy.apache.org/docs/binary-protocol/encodings)"
	refSendBatch          = "core/server/src/responses.rs (the metadata is decode_from'd; the batch is the rest of the body)"
	refConsumerGroups     = "core/server/src/consumer_group.rs (maybe_rewrite_consumer_group_request: decode_from)"
	refTokens             = "core/server/src/pat.rs (maybe_rewrite_pat_request: decode_from)"
)

var requestBodyRules = [...]RequestBodyRule{
	{CodePing, TrailingIgnored, refBodyIgnored},
	{CodeGetStats, TrailingIgnored, refBodyIgnored},
	{CodeGetSnapshot, TrailingIgnored, refDispatch},
	{CodeGetClusterMetadata, TrailingIgnored, refBodyIgnored},
	{CodeDescribeOptions, TrailingIgnored, refNonReplicatedReads},
	{CodeGetMe, TrailingIgnored, refBodyIgnored},
	{CodeGetClient, TrailingIgnored, refDispatch},
	{CodeGetClients, TrailingIgnored, refBodyIgnored},
	{CodeGetUser, TrailingIgnored, refNonReplicatedReads},
	{CodeGetUsers, TrailingIgnored, refBodyIgnored},
	{CodeCreateUser, TrailingRefused, refOptionsBlock},
	{CodeDeleteUser, TrailingIgnored, refMetadataApply},
	{CodeUpdateUser, TrailingRefused, refOptionsBlock},
	{CodeUpdatePermissions, TrailingIgnored, refMetadataApply},
	{CodeChangePassword, TrailingIgnored, refMetadataApply},
	{CodeLogoutUser, TrailingIgnored, refBodyIgnored},
	{CodeLoginRegister, TrailingIgnored, refLoginRegister},
	{CodeGetPersonalAccessTokens, TrailingIgnored, refNonReplicatedReads},
	{CodeCreatePersonalAccessToken, TrailingIgnored, refTokens},
	{CodeDeletePersonalAccessToken, TrailingIgnored, refTokens},
	{CodeLoginRegisterWithPAT, TrailingIgnored, refLoginRegister},
	{CodePollMessages, TrailingIgnored, refDispatch},
	{CodeSendMessages, TrailingRefused, refSendBatch},
	{CodeFlushUnsavedBuffer, TrailingIgnored, refBodyIgnored},
	{CodeGetConsumerOffset, TrailingIgnored, refDispatch},
	{CodeStoreConsumerOffset, TrailingIgnored, refPartitionRequests},
	{CodeDeleteConsumerOffset, TrailingIgnored, refPartitionRequests},
	{CodeGetStream, TrailingIgnored, refNonReplicatedReads},
	{CodeGetStreams, TrailingIgnored, refNonReplicatedReads},
	{CodeCreateStream, TrailingRefused, refOptionsBlock},
	{CodeDeleteStream, TrailingIgnored, refMetadataApply},
	{CodeUpdateStream, TrailingRefused, refOptionsBlock},
	{CodePurgeStream, TrailingIgnored, refMetadataApply},
	{CodeGetTopic, TrailingIgnored, refNonReplicatedReads},
	{CodeGetTopics, TrailingIgnored, refNonReplicatedReads},
	{CodeCreateTopic, TrailingRefused, refOptionsBlock},
	{CodeDeleteTopic, TrailingIgnored, refMetadataApply},
	{CodeUpdateTopic, TrailingRefused, refOptionsBlock},
	{CodePurgeTopic, TrailingIgnored, refMetadataApply},
	{CodeCreatePartitions, TrailingIgnored, refDispatch},
	{CodeDeletePartitions, TrailingIgnored, refDispatch},
	{CodeDeleteSegments, TrailingIgnored, refDispatch},
	{CodeGetConsumerGroup, TrailingIgnored, refNonReplicatedReads},
	{CodeGetConsumerGroups, TrailingIgnored, refNonReplicatedReads},
	{CodeCreateConsumerGroup, TrailingIgnored, refMetadataApply},
	{CodeDeleteConsumerGroup, TrailingIgnored, refMetadataApply},
	{CodeJoinConsumerGroup, TrailingIgnored, refConsumerGroups},
	{CodeLeaveConsumerGroup, TrailingIgnored, refConsumerGroups},
	{CodeSyncConsumerGroup, TrailingIgnored, refDispatch},
}

// RequestBodyRules returns the table in code order. The slice is shared: do not
// modify it.
func RequestBodyRules() []RequestBodyRule { return requestBodyRules[:] }
