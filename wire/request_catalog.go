package wire

// Request bodies, both directions: the server decodes with Decode, our client encodes
// with Append, from the same struct. Decode reads the body in place (byte and string
// fields alias it, nothing is allocated) and treats bytes after the last field as
// the reference does (RequestBodyRules: ignored, or refused where the last field
// runs to the end of the body); on error the struct's contents are unspecified. Append refuses a value the server would
// refuse to decode, with the code the server would answer, and then returns b at its
// original length.
//
// Bodies that are empty on the wire (Ping 1, GetStats 10, GetClusterMetadata 12,
// GetMe 20, GetClients 22, GetUsers 32, LogoutUser 39, GetPersonalAccessTokens 41,
// GetStreams 201) have no struct: DecodeEmptyBody stands for their decoder.

// CheckRequestBody decodes body as the request body of code and discards the result,
// returning the error the decoder would. handled is false for the codes whose bodies
// this catalog does not decode: codes outside the registry, the legacy logins 38 and
// 44 (refused with a MalformedLogin eviction whatever their body) and SendMessages
// 101 (send.go). It allocates nothing, so a server may call it on every request
// before routing, and the fuzz target drives every decoder through it.
//
// For the register codes 40 and 45 this is the check of one shape. A server deciding
// a login uses DecodeRegisterBody instead: a register header carries no code, and
// the reference probes both shapes.
func CheckRequestBody(code CommandCode, body []byte) (handled bool, err error) {
	switch code {
	case CodePing, CodeGetStats, CodeGetClusterMetadata, CodeGetMe, CodeGetClients,
		CodeGetUsers, CodeLogoutUser, CodeGetPersonalAccessTokens, CodeGetStreams:
		return true, DecodeEmptyBody(body)
	case CodeGetSnapshot:
		var r GetSnapshot
		return true, r.Decode(body)
	case CodeDescribeOptions:
		var r DescribeOptions
		return true, r.Decode(body)
	case CodeGetClient:
		var r GetClient
		return true, r.Decode(body)
	case CodeGetUser:
		var r GetUser
		return true, r.Decode(body)
	case CodeCreateUser:
		var r CreateUser
		return true, r.Decode(body)
	case CodeDeleteUser:
		var r DeleteUser
		return true, r.Decode(body)
	case CodeUpdateUser:
		var r UpdateUser
		return true, r.Decode(body)
	case CodeUpdatePermissions:
		var r UpdatePermissions
		return true, r.Decode(body)
	case CodeChangePassword:
		var r ChangePassword
		return true, r.Decode(body)
	case CodeLoginRegister:
		var r LoginRegister
		return true, r.Decode(body)
	case CodeLoginRegisterWithPAT:
		var r LoginRegisterWithPAT
		return true, r.Decode(body)
	case CodeCreatePersonalAccessToken:
		var r CreatePersonalAccessToken
		return true, r.Decode(body)
	case CodeDeletePersonalAccessToken:
		var r DeletePersonalAccessToken
		return true, r.Decode(body)
	case CodePollMessages:
		var r PollMessages
		return true, r.Decode(body)
	case CodeFlushUnsavedBuffer:
		var r FlushUnsavedBuffer
		return true, r.Decode(body)
	case CodeGetConsumerOffset:
		var r GetConsumerOffset
		return true, r.Decode(body)
	case CodeStoreConsumerOffset:
		var r StoreConsumerOffset
		return true, r.Decode(body)
	case CodeDeleteConsumerOffset:
		var r DeleteConsumerOffset
		return true, r.Decode(body)
	case CodeGetStream:
		var r GetStream
		return true, r.Decode(body)
	case CodeCreateStream:
		var r CreateStream
		return true, r.Decode(body)
	case CodeDeleteStream:
		var r DeleteStream
		return true, r.Decode(body)
	case CodeUpdateStream:
		var r UpdateStream
		return true, r.Decode(body)
	case CodePurgeStream:
		var r PurgeStream
		return true, r.Decode(body)
	case CodeGetTopic:
		var r GetTopic
		return true, r.Decode(body)
	case CodeGetTopics:
		var r GetTopics
		return true, r.Decode(body)
	case CodeCreateTopic:
		var r CreateTopic
		return true, r.Decode(body)
	case CodeDeleteTopic:
		var r DeleteTopic
		return true, r.Decode(body)
	case CodeUpdateTopic:
		var r UpdateTopic
		return true, r.Decode(body)
	case CodePurgeTopic:
		var r PurgeTopic
		return true, r.Decode(body)
	case CodeCreatePartitions:
		var r CreatePartitions
		return true, r.Decode(body)
	case CodeDeletePartitions:
		var r DeletePartitions
		return true, r.Decode(body)
	case CodeDeleteSegments:
		var r DeleteSegments
		return true, r.Decode(body)
	case CodeGetConsumerGroup:
		var r GetConsumerGroup
		return true, r.Decode(body)
	case CodeGetConsumerGroups:
		var r GetConsumerGroups
		return true, r.Decode(body)
	case CodeCreateConsumerGroup:
		var r CreateConsumerGroup
		return true, r.Decode(body)
	case CodeDeleteConsumerGroup:
		var r DeleteConsumerGroup
		return true, r.Decode(body)
	case CodeJoinConsumerGroup:
		var r JoinConsumerGroup
		return true, r.Decode(body)
	case CodeLeaveConsumerGroup:
		var r LeaveConsumerGroup
		return true, r.Decode(body)
	case CodeSyncConsumerGroup:
		var r SyncConsumerGroup
		return true, r.Decode(body)
	}
	return false, nil
}
