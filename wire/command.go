package wire

import (
	"math/bits"
	"strconv"
)

// This file holds the discriminants every header carries and the tables that tie them
// together: which command code rides which operation on which plane, and how a reply
// is framed. The numbers are part of the wire format: never renumber.

// Command is the header byte at offset 60 that names the frame's shape. Client
// connections see only Request, Reply and Eviction; everything else is replica-plane
// traffic. Values above CommandMax are refused on both planes.
type Command uint8

const (
	CommandReserved              Command = 0 // invalid sentinel
	CommandPing                  Command = 1 // reserved, no traffic
	CommandPong                  Command = 2 // reserved, no traffic
	CommandPingClient            Command = 3 // reserved, no traffic
	CommandPongClient            Command = 4 // reserved, no traffic
	CommandRequest               Command = 5
	CommandPrepare               Command = 6
	CommandPrepareOk             Command = 7
	CommandReply                 Command = 8
	CommandCommit                Command = 9
	CommandStartViewChange       Command = 10
	CommandDoViewChange          Command = 11
	CommandStartView             Command = 12
	CommandEviction              Command = 13
	CommandReplicaHello          Command = 14
	CommandReplicaChallenge      Command = 15
	CommandReplicaFinish         Command = 16
	CommandRequestStartView      Command = 17
	CommandRequestPrepares       Command = 18
	CommandRepairPrepare         Command = 19
	CommandRepairDone            Command = 20
	CommandRangeEvicted          Command = 21
	CommandRequestStateTransfer  Command = 22
	CommandStateTransferTarget   Command = 23
	CommandRequestStateChunk     Command = 24
	CommandStateChunk            Command = 25
	CommandForwardRegister       Command = 26
	CommandForwardRegisterResult Command = 27
	CommandForwardLogout         Command = 28
	CommandForwardLogoutResult   Command = 29

	// CommandMax is the highest command a 0.11.0 peer may send.
	CommandMax = CommandForwardLogoutResult
)

var commandNames = [...]string{
	"Reserved", "Ping", "Pong", "PingClient", "PongClient", "Request", "Prepare",
	"PrepareOk", "Reply", "Commit", "StartViewChange", "DoViewChange", "StartView",
	"Eviction", "ReplicaHello", "ReplicaChallenge", "ReplicaFinish", "RequestStartView",
	"RequestPrepares", "RepairPrepare", "RepairDone", "RangeEvicted",
	"RequestStateTransfer", "StateTransferTarget", "RequestStateChunk", "StateChunk",
	"ForwardRegister", "ForwardRegisterResult", "ForwardLogout", "ForwardLogoutResult",
}

var _ [len(commandNames) - int(CommandMax) - 1]struct{} // one name per command

func (c Command) String() string {
	if c <= CommandMax {
		return commandNames[c]
	}
	return "Command(" + strconv.Itoa(int(c)) + ")"
}

// Known reports whether c is a command of binary protocol 0.11.0.
func (c Command) Known() bool { return c <= CommandMax }

// FrameSealed reports whether a replica frame of this command carries the frame seal
// (XxHash3 of header bytes 16..256) in its checksum field. Prepare and RepairPrepare
// spend the field on their identity instead, the handshake frames are authenticated
// by their MAC, and the client-plane frames are sealed on neither side.
func (c Command) FrameSealed() bool {
	switch c {
	case CommandPrepareOk, CommandCommit, CommandStartViewChange, CommandDoViewChange,
		CommandStartView, CommandRequestStartView, CommandRequestPrepares,
		CommandRepairDone, CommandRangeEvicted, CommandRequestStateTransfer,
		CommandStateTransferTarget, CommandRequestStateChunk, CommandStateChunk,
		CommandForwardRegister, CommandForwardRegisterResult, CommandForwardLogout,
		CommandForwardLogoutResult:
		return true
	}
	return false
}

// ReplicaPlane reports whether a frame of this command may arrive on the replica
// listener. Ping..PongClient carry no traffic, and Request, Reply and Eviction belong
// to client connections.
func (c Command) ReplicaPlane() bool {
	switch {
	case c == CommandPrepare, c == CommandPrepareOk:
		return true
	case c >= CommandCommit && c <= CommandStartView:
		return true
	case c >= CommandReplicaHello && c <= CommandMax:
		return true
	}
	return false
}

// Operation is the state-machine operation a request, prepare or reply carries (header
// byte 176 of a request, 208 of a prepare and a reply). Replicated operations are
// named by this byte alone; reads all use OperationNonReplicated and carry their
// command code in request header bytes 196..200.
type Operation uint8

const (
	OperationReserved      Operation = 0 // never valid from a client
	OperationRegister      Operation = 1 // login-register, codes 40 and 45
	OperationNonReplicated Operation = 2 // reads and ping; code in bytes 196..200
	OperationLogout        Operation = 3 // code 39

	// Server-internal operations (64..127 is refused from clients). A committed
	// CreateTopic, CreatePartitions or DeleteSegments replies with these.
	OperationCreateTopicWithAssignments      Operation = 64
	OperationCreatePartitionsWithAssignments Operation = 65
	OperationRemoveConsumerGroupMember       Operation = 66
	OperationCompleteConsumerGroupRevocation Operation = 67
	OperationTruncatePartition               Operation = 68
	// OperationEndSessions is ours: the sessions whose connections closed, which
	// the node holding them proposes (a backup forwards them to the primary): they
	// leave the client table and their consumer groups on every replica alike.
	OperationEndSessions Operation = 69
	// OperationRevokeTokens is ours too: access tokens (JWT ids) logged out over
	// HTTP, each with the instant it stops being accepted, which every node then
	// refuses until that instant (the reference keeps no revocations). Its reply,
	// a result section, answers the node that proposed it, never a client.
	OperationRevokeTokens Operation = 70

	OperationCreateStream              Operation = 128
	OperationUpdateStream              Operation = 129
	OperationDeleteStream              Operation = 130
	OperationPurgeStream               Operation = 131
	OperationCreateTopic               Operation = 132
	OperationUpdateTopic               Operation = 133
	OperationDeleteTopic               Operation = 134
	OperationPurgeTopic                Operation = 135
	OperationCreatePartitions          Operation = 136
	OperationDeletePartitions          Operation = 137
	OperationDeleteSegments            Operation = 138
	OperationCreateConsumerGroup       Operation = 139
	OperationDeleteConsumerGroup       Operation = 140
	OperationCreateUser                Operation = 141
	OperationUpdateUser                Operation = 142
	OperationDeleteUser                Operation = 143
	OperationChangePassword            Operation = 144
	OperationUpdatePermissions         Operation = 145
	OperationCreatePersonalAccessToken Operation = 146
	OperationDeletePersonalAccessToken Operation = 147
	OperationJoinConsumerGroup         Operation = 148
	OperationLeaveConsumerGroup        Operation = 149

	OperationSendMessages         Operation = 160
	OperationStoreConsumerOffset  Operation = 161
	OperationDeleteConsumerOffset Operation = 162
)

// operationInfo describes one operation byte; a zero entry is an unassigned value.
type operationInfo struct {
	name  string
	plane Plane
	// client reports whether a client may send the operation.
	client bool
	// code is the command code of a replicated operation with exactly one code.
	code CommandCode
}

var operationTable = [256]operationInfo{
	OperationReserved:      {name: "Reserved"},
	OperationRegister:      {name: "Register", plane: PlaneSession, client: true},
	OperationNonReplicated: {name: "NonReplicated", plane: PlaneNonReplicated, client: true},
	OperationLogout:        {name: "Logout", plane: PlaneSession, client: true, code: CodeLogoutUser},

	OperationCreateTopicWithAssignments:      {name: "CreateTopicWithAssignments", plane: PlaneMetadata},
	OperationCreatePartitionsWithAssignments: {name: "CreatePartitionsWithAssignments", plane: PlaneMetadata},
	OperationRemoveConsumerGroupMember:       {name: "RemoveConsumerGroupMember", plane: PlaneMetadata},
	OperationCompleteConsumerGroupRevocation: {name: "CompleteConsumerGroupRevocation", plane: PlaneMetadata},
	OperationTruncatePartition:               {name: "TruncatePartition", plane: PlaneMetadata},
	OperationEndSessions:                     {name: "EndSessions", plane: PlaneMetadata},
	OperationRevokeTokens:                    {name: "RevokeTokens", plane: PlaneMetadata},

	OperationCreateStream:              {name: "CreateStream", plane: PlaneMetadata, client: true, code: CodeCreateStream},
	OperationUpdateStream:              {name: "UpdateStream", plane: PlaneMetadata, client: true, code: CodeUpdateStream},
	OperationDeleteStream:              {name: "DeleteStream", plane: PlaneMetadata, client: true, code: CodeDeleteStream},
	OperationPurgeStream:               {name: "PurgeStream", plane: PlaneMetadata, client: true, code: CodePurgeStream},
	OperationCreateTopic:               {name: "CreateTopic", plane: PlaneMetadata, client: true, code: CodeCreateTopic},
	OperationUpdateTopic:               {name: "UpdateTopic", plane: PlaneMetadata, client: true, code: CodeUpdateTopic},
	OperationDeleteTopic:               {name: "DeleteTopic", plane: PlaneMetadata, client: true, code: CodeDeleteTopic},
	OperationPurgeTopic:                {name: "PurgeTopic", plane: PlaneMetadata, client: true, code: CodePurgeTopic},
	OperationCreatePartitions:          {name: "CreatePartitions", plane: PlaneMetadata, client: true, code: CodeCreatePartitions},
	OperationDeletePartitions:          {name: "DeletePartitions", plane: PlaneMetadata, client: true, code: CodeDeletePartitions},
	OperationDeleteSegments:            {name: "DeleteSegments", plane: PlaneMetadata, client: true, code: CodeDeleteSegments},
	OperationCreateConsumerGroup:       {name: "CreateConsumerGroup", plane: PlaneMetadata, client: true, code: CodeCreateConsumerGroup},
	OperationDeleteConsumerGroup:       {name: "DeleteConsumerGroup", plane: PlaneMetadata, client: true, code: CodeDeleteConsumerGroup},
	OperationCreateUser:                {name: "CreateUser", plane: PlaneMetadata, client: true, code: CodeCreateUser},
	OperationUpdateUser:                {name: "UpdateUser", plane: PlaneMetadata, client: true, code: CodeUpdateUser},
	OperationDeleteUser:                {name: "DeleteUser", plane: PlaneMetadata, client: true, code: CodeDeleteUser},
	OperationChangePassword:            {name: "ChangePassword", plane: PlaneMetadata, client: true, code: CodeChangePassword},
	OperationUpdatePermissions:         {name: "UpdatePermissions", plane: PlaneMetadata, client: true, code: CodeUpdatePermissions},
	OperationCreatePersonalAccessToken: {name: "CreatePersonalAccessToken", plane: PlaneMetadata, client: true, code: CodeCreatePersonalAccessToken},
	OperationDeletePersonalAccessToken: {name: "DeletePersonalAccessToken", plane: PlaneMetadata, client: true, code: CodeDeletePersonalAccessToken},
	OperationJoinConsumerGroup:         {name: "JoinConsumerGroup", plane: PlaneMetadata, client: true, code: CodeJoinConsumerGroup},
	OperationLeaveConsumerGroup:        {name: "LeaveConsumerGroup", plane: PlaneMetadata, client: true, code: CodeLeaveConsumerGroup},

	OperationSendMessages:         {name: "SendMessages", plane: PlanePartition, client: true, code: CodeSendMessages},
	OperationStoreConsumerOffset:  {name: "StoreConsumerOffset", plane: PlanePartition, client: true, code: CodeStoreConsumerOffset},
	OperationDeleteConsumerOffset: {name: "DeleteConsumerOffset", plane: PlanePartition, client: true, code: CodeDeleteConsumerOffset},
}

func (o Operation) String() string {
	if name := operationTable[o].name; name != "" {
		return name
	}
	return "Operation(" + strconv.Itoa(int(o)) + ")"
}

// Known reports whether o is an operation of binary protocol 0.11.0, Reserved
// included: exactly the set the Go SDK accepts on a reply.
func (o Operation) Known() bool { return operationTable[o].name != "" }

// ClientAllowed reports whether a client may send o: not Reserved, not server-internal
// (64..127), not unassigned.
func (o Operation) ClientAllowed() bool { return operationTable[o].client }

// Internal reports whether o is in the server-internal range 64..127.
func (o Operation) Internal() bool { return o >= 64 && o <= 127 }

// Replicated reports whether o goes through consensus: every known operation but
// Reserved and NonReplicated (Register and Logout replicate on the metadata group).
func (o Operation) Replicated() bool {
	return o.Known() && o != OperationReserved && o != OperationNonReplicated
}

// Plane reports the plane o is routed to; PlaneNone for Reserved and unknown values.
// DeleteSegments is admitted on the metadata plane (which resolves it to an internal
// TruncatePartition), as the framing reference lists it.
func (o Operation) Plane() Plane { return operationTable[o].plane }

// CommandCode returns the single command code of a replicated operation. Register
// (codes 40 and 45), NonReplicated, Reserved and the internal operations have none.
func (o Operation) CommandCode() (CommandCode, bool) {
	code := operationTable[o].code
	return code, code != 0
}

// Plane is where an operation is served and what delivery it gets.
type Plane uint8

const (
	PlaneNone          Plane = 0
	PlaneMetadata      Plane = 1 // metadata consensus group: exactly-once, result-framed replies
	PlanePartition     Plane = 2 // the partition's consensus group: at-least-once
	PlaneNonReplicated Plane = 3 // reads: no consensus, no deduplication
	PlaneSession       Plane = 4 // Register and Logout: the client table, on the metadata group
)

var planeNames = [...]string{"None", "Metadata", "Partition", "NonReplicated", "Session"}

func (p Plane) String() string {
	if int(p) < len(planeNames) {
		return planeNames[p]
	}
	return "Plane(" + strconv.Itoa(int(p)) + ")"
}

// CommandCode is the u32 command registry of binary protocol 0.11.0. A non-replicated
// request carries its code in header bytes 196..200; replicated ones are named by
// their Operation and have a code only in this registry.
type CommandCode uint32

const (
	CodePing                         CommandCode = 1
	CodeGetStats                     CommandCode = 10
	CodeGetSnapshot                  CommandCode = 11
	CodeGetClusterMetadata           CommandCode = 12
	CodeDescribeOptions              CommandCode = 13
	CodeGetMe                        CommandCode = 20
	CodeGetClient                    CommandCode = 21
	CodeGetClients                   CommandCode = 22
	CodeGetUser                      CommandCode = 31
	CodeGetUsers                     CommandCode = 32
	CodeCreateUser                   CommandCode = 33
	CodeDeleteUser                   CommandCode = 34
	CodeUpdateUser                   CommandCode = 35
	CodeUpdatePermissions            CommandCode = 36
	CodeChangePassword               CommandCode = 37
	CodeLoginUser                    CommandCode = 38 // legacy: MalformedLogin eviction
	CodeLogoutUser                   CommandCode = 39
	CodeLoginRegister                CommandCode = 40
	CodeGetPersonalAccessTokens      CommandCode = 41
	CodeCreatePersonalAccessToken    CommandCode = 42
	CodeDeletePersonalAccessToken    CommandCode = 43
	CodeLoginWithPersonalAccessToken CommandCode = 44 // legacy: MalformedLogin eviction
	CodeLoginRegisterWithPAT         CommandCode = 45
	CodePollMessages                 CommandCode = 100
	CodeSendMessages                 CommandCode = 101
	CodeFlushUnsavedBuffer           CommandCode = 102 // decodes, always FeatureUnavailable
	CodeGetConsumerOffset            CommandCode = 120
	CodeStoreConsumerOffset          CommandCode = 121
	CodeDeleteConsumerOffset         CommandCode = 122
	CodeGetStream                    CommandCode = 200
	CodeGetStreams                   CommandCode = 201
	CodeCreateStream                 CommandCode = 202
	CodeDeleteStream                 CommandCode = 203
	CodeUpdateStream                 CommandCode = 204
	CodePurgeStream                  CommandCode = 205
	CodeGetTopic                     CommandCode = 300
	CodeGetTopics                    CommandCode = 301
	CodeCreateTopic                  CommandCode = 302
	CodeDeleteTopic                  CommandCode = 303
	CodeUpdateTopic                  CommandCode = 304
	CodePurgeTopic                   CommandCode = 305
	CodeCreatePartitions             CommandCode = 402
	CodeDeletePartitions             CommandCode = 403
	CodeDeleteSegments               CommandCode = 503
	CodeGetConsumerGroup             CommandCode = 600
	CodeGetConsumerGroups            CommandCode = 601
	CodeCreateConsumerGroup          CommandCode = 602
	CodeDeleteConsumerGroup          CommandCode = 603
	CodeJoinConsumerGroup            CommandCode = 604
	CodeLeaveConsumerGroup           CommandCode = 605
	CodeSyncConsumerGroup            CommandCode = 606
)

// CommandInfo is one row of the command registry.
type CommandInfo struct {
	Code CommandCode
	Name string
	// Operation is what a request for this code carries in its operation byte:
	// OperationNonReplicated for reads, the replicated operation otherwise, and
	// OperationReserved for the legacy login codes no operation may carry.
	Operation Operation
	Plane     Plane
}

// commandRegistry is the registry, in code order. Legacy login codes have no operation: a
// client sending them is evicted with MalformedLogin.
var commandRegistry = [...]CommandInfo{
	{CodePing, "Ping", OperationNonReplicated, PlaneNonReplicated},
	{CodeGetStats, "GetStats", OperationNonReplicated, PlaneNonReplicated},
	{CodeGetSnapshot, "GetSnapshot", OperationNonReplicated, PlaneNonReplicated},
	{CodeGetClusterMetadata, "GetClusterMetadata", OperationNonReplicated, PlaneNonReplicated},
	{CodeDescribeOptions, "DescribeOptions", OperationNonReplicated, PlaneNonReplicated},
	{CodeGetMe, "GetMe", OperationNonReplicated, PlaneNonReplicated},
	{CodeGetClient, "GetClient", OperationNonReplicated, PlaneNonReplicated},
	{CodeGetClients, "GetClients", OperationNonReplicated, PlaneNonReplicated},
	{CodeGetUser, "GetUser", OperationNonReplicated, PlaneNonReplicated},
	{CodeGetUsers, "GetUsers", OperationNonReplicated, PlaneNonReplicated},
	{CodeCreateUser, "CreateUser", OperationCreateUser, PlaneMetadata},
	{CodeDeleteUser, "DeleteUser", OperationDeleteUser, PlaneMetadata},
	{CodeUpdateUser, "UpdateUser", OperationUpdateUser, PlaneMetadata},
	{CodeUpdatePermissions, "UpdatePermissions", OperationUpdatePermissions, PlaneMetadata},
	{CodeChangePassword, "ChangePassword", OperationChangePassword, PlaneMetadata},
	{CodeLoginUser, "LoginUser", OperationReserved, PlaneNone},
	{CodeLogoutUser, "LogoutUser", OperationLogout, PlaneSession},
	{CodeLoginRegister, "LoginRegister", OperationRegister, PlaneSession},
	{CodeGetPersonalAccessTokens, "GetPersonalAccessTokens", OperationNonReplicated, PlaneNonReplicated},
	{CodeCreatePersonalAccessToken, "CreatePersonalAccessToken", OperationCreatePersonalAccessToken, PlaneMetadata},
	{CodeDeletePersonalAccessToken, "DeletePersonalAccessToken", OperationDeletePersonalAccessToken, PlaneMetadata},
	{CodeLoginWithPersonalAccessToken, "LoginWithPersonalAccessToken", OperationReserved, PlaneNone},
	{CodeLoginRegisterWithPAT, "LoginRegisterWithPersonalAccessToken", OperationRegister, PlaneSession},
	{CodePollMessages, "PollMessages", OperationNonReplicated, PlaneNonReplicated},
	{CodeSendMessages, "SendMessages", OperationSendMessages, PlanePartition},
	{CodeFlushUnsavedBuffer, "FlushUnsavedBuffer", OperationNonReplicated, PlaneNonReplicated},
	{CodeGetConsumerOffset, "GetConsumerOffset", OperationNonReplicated, PlaneNonReplicated},
	{CodeStoreConsumerOffset, "StoreConsumerOffset", OperationStoreConsumerOffset, PlanePartition},
	{CodeDeleteConsumerOffset, "DeleteConsumerOffset", OperationDeleteConsumerOffset, PlanePartition},
	{CodeGetStream, "GetStream", OperationNonReplicated, PlaneNonReplicated},
	{CodeGetStreams, "GetStreams", OperationNonReplicated, PlaneNonReplicated},
	{CodeCreateStream, "CreateStream", OperationCreateStream, PlaneMetadata},
	{CodeDeleteStream, "DeleteStream", OperationDeleteStream, PlaneMetadata},
	{CodeUpdateStream, "UpdateStream", OperationUpdateStream, PlaneMetadata},
	{CodePurgeStream, "PurgeStream", OperationPurgeStream, PlaneMetadata},
	{CodeGetTopic, "GetTopic", OperationNonReplicated, PlaneNonReplicated},
	{CodeGetTopics, "GetTopics", OperationNonReplicated, PlaneNonReplicated},
	{CodeCreateTopic, "CreateTopic", OperationCreateTopic, PlaneMetadata},
	{CodeDeleteTopic, "DeleteTopic", OperationDeleteTopic, PlaneMetadata},
	{CodeUpdateTopic, "UpdateTopic", OperationUpdateTopic, PlaneMetadata},
	{CodePurgeTopic, "PurgeTopic", OperationPurgeTopic, PlaneMetadata},
	{CodeCreatePartitions, "CreatePartitions", OperationCreatePartitions, PlaneMetadata},
	{CodeDeletePartitions, "DeletePartitions", OperationDeletePartitions, PlaneMetadata},
	{CodeDeleteSegments, "DeleteSegments", OperationDeleteSegments, PlaneMetadata},
	{CodeGetConsumerGroup, "GetConsumerGroup", OperationNonReplicated, PlaneNonReplicated},
	{CodeGetConsumerGroups, "GetConsumerGroups", OperationNonReplicated, PlaneNonReplicated},
	{CodeCreateConsumerGroup, "CreateConsumerGroup", OperationCreateConsumerGroup, PlaneMetadata},
	{CodeDeleteConsumerGroup, "DeleteConsumerGroup", OperationDeleteConsumerGroup, PlaneMetadata},
	{CodeJoinConsumerGroup, "JoinConsumerGroup", OperationJoinConsumerGroup, PlaneMetadata},
	{CodeLeaveConsumerGroup, "LeaveConsumerGroup", OperationLeaveConsumerGroup, PlaneMetadata},
	{CodeSyncConsumerGroup, "SyncConsumerGroup", OperationNonReplicated, PlaneNonReplicated},
}

// Commands returns the whole registry in code order. The slice is shared: do not
// modify it.
func Commands() []CommandInfo { return commandRegistry[:] }

// LookupCommand returns the registry row of code. The registry is small and sorted,
// so a binary search beats a map and allocates nothing.
func LookupCommand(code CommandCode) (CommandInfo, bool) {
	lo, hi := 0, len(commandRegistry)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if commandRegistry[mid].Code < code {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < len(commandRegistry) && commandRegistry[lo].Code == code {
		return commandRegistry[lo], true
	}
	return CommandInfo{}, false
}

func (c CommandCode) String() string {
	if info, ok := LookupCommand(c); ok {
		return info.Name
	}
	return "CommandCode(" + strconv.FormatUint(uint64(c), 10) + ")"
}

// Known reports whether c is in the 0.11.0 registry.
func (c CommandCode) Known() bool {
	_, ok := LookupCommand(c)
	return ok
}

// Operation returns the operation byte a request for c carries, and false for codes
// outside the registry. The legacy login codes 38 and 44 return OperationReserved.
func (c CommandCode) Operation() (Operation, bool) {
	info, ok := LookupCommand(c)
	return info.Operation, ok
}

// NonReplicatedCodeCheck decides a code carried by an operation-2 request, the way
// the reference server does: nil for a read the server serves; MalformedLogin for the
// legacy login codes (an eviction); FeatureUnavailable (status 5) for a replicated
// command sent as a read; InvalidCommand (status 3) for a code outside the registry.
func NonReplicatedCodeCheck(code CommandCode) HeaderFault {
	info, ok := LookupCommand(code)
	switch {
	case !ok:
		return FaultUnknownCommandCode
	case info.Operation == OperationNonReplicated:
		return FaultNone
	case info.Operation == OperationReserved:
		return FaultLegacyLoginCode
	default:
		return FaultReplicatedCodeAsRead
	}
}

// ReplyOperation returns the operation byte a server puts on the reply to a request
// carrying op (apache/iggy core/consensus/src/plane_helpers.rs; the internal operations
// 64..68 of iggy.apache.org/docs/binary-protocol/framing). A committed CreateTopic,
// CreatePartitions and DeleteSegments answer with the internal operation the primary
// actually prepared (64, 65 and 68); every other reply, and every pre-commit denial,
// echoes op.
func ReplyOperation(op Operation, committed bool) Operation {
	if !committed {
		return op
	}
	switch op {
	case OperationCreateTopic:
		return OperationCreateTopicWithAssignments
	case OperationCreatePartitions:
		return OperationCreatePartitionsWithAssignments
	case OperationDeleteSegments:
		return OperationTruncatePartition
	}
	return op
}

// ReplyResultFramed reports whether a status-0 reply with operation byte op and a body
// of bodySizeBytes starts with a result section, exactly as both SDKs decide it (the Go
// SDK in apache/iggy foreign/go/internal/vsr; "Result section" in
// iggy.apache.org/docs/binary-protocol/framing): Register only when its body is
// non-empty; the internal operations, the metadata operations but DeleteSegments, and
// the two consumer-offset writes always; nothing else.
func ReplyResultFramed(op Operation, bodySizeBytes int) bool {
	switch {
	case op == OperationRegister:
		return bodySizeBytes > 0
	case op >= OperationCreateTopicWithAssignments && op <= OperationTruncatePartition:
		return true
	case op == OperationDeleteSegments:
		return false
	case op >= OperationCreateStream && op <= OperationLeaveConsumerGroup:
		return true
	case op == OperationStoreConsumerOffset, op == OperationDeleteConsumerOffset:
		return true
	}
	return false
}

// EvictionReason is the byte at offset 255 of an Eviction frame: why the session is
// dead. Zero is reserved and never sent.
type EvictionReason uint8

const (
	EvictionReserved                EvictionReason = 0
	EvictionNoSession               EvictionReason = 1
	EvictionClientReleaseTooLow     EvictionReason = 2
	EvictionClientReleaseTooHigh    EvictionReason = 3
	EvictionInvalidRequestOperation EvictionReason = 4
	EvictionInvalidRequestBody      EvictionReason = 5
	EvictionInvalidRequestBodySize  EvictionReason = 6
	EvictionSessionTooLow           EvictionReason = 7
	EvictionSessionReleaseMismatch  EvictionReason = 8
	EvictionInvalidCredentials      EvictionReason = 9
	EvictionInvalidToken            EvictionReason = 10
	EvictionUserInactive            EvictionReason = 11
	EvictionSessionError            EvictionReason = 12
	EvictionStaleClient             EvictionReason = 13
	EvictionIncompatibleProtocol    EvictionReason = 14
	EvictionMalformedLogin          EvictionReason = 15

	EvictionReasonMax = EvictionMalformedLogin
)

var evictionNames = [...]string{
	"Reserved", "NoSession", "ClientReleaseTooLow", "ClientReleaseTooHigh",
	"InvalidRequestOperation", "InvalidRequestBody", "InvalidRequestBodySize",
	"SessionTooLow", "SessionReleaseMismatch", "InvalidCredentials", "InvalidToken",
	"UserInactive", "SessionError", "StaleClient", "IncompatibleProtocol", "MalformedLogin",
}

var _ [len(evictionNames) - int(EvictionReasonMax) - 1]struct{}

func (r EvictionReason) String() string {
	if r <= EvictionReasonMax {
		return evictionNames[r]
	}
	return "EvictionReason(" + strconv.Itoa(int(r)) + ")"
}

// ErrorCode is the error both SDKs surface for an eviction with this reason
// (apache/iggy core/common/src/error/eviction.rs). IncompatibleProtocol needs the
// window the frame carries: use EvictionHeader.ErrorCode for the full rule.
func (r EvictionReason) ErrorCode() ErrorCode {
	switch r {
	case EvictionInvalidCredentials:
		return ErrInvalidCredentials
	case EvictionInvalidToken:
		return ErrInvalidPersonalAccessToken
	case EvictionNoSession, EvictionSessionTooLow, EvictionSessionReleaseMismatch,
		EvictionUserInactive, EvictionSessionError:
		return ErrUnauthenticated
	case EvictionStaleClient:
		return ErrStaleClient
	case EvictionIncompatibleProtocol:
		return ErrIncompatibleProtocolVersion
	case EvictionMalformedLogin:
		return ErrInvalidFormat
	}
	return ErrInvalidCommand
}

// ForwardRegisterOutcome is the verdict byte (offset 255) of a ForwardRegisterResult.
// Every value but Ok and ClientIDOwnedByAnotherUser is transient.
type ForwardRegisterOutcome uint8

const (
	ForwardRegisterOk                         ForwardRegisterOutcome = 0
	ForwardRegisterNotPrimary                 ForwardRegisterOutcome = 1
	ForwardRegisterNotCaughtUp                ForwardRegisterOutcome = 2 // reserved: never produced
	ForwardRegisterPipelineFull               ForwardRegisterOutcome = 3
	ForwardRegisterInProgress                 ForwardRegisterOutcome = 4
	ForwardRegisterCanceled                   ForwardRegisterOutcome = 5
	ForwardRegisterClientIDOwnedByAnotherUser ForwardRegisterOutcome = 6

	ForwardRegisterOutcomeMax = ForwardRegisterClientIDOwnedByAnotherUser
)

var forwardRegisterNames = [...]string{
	"Ok", "NotPrimary", "NotCaughtUp", "PipelineFull", "InProgress", "Canceled",
	"ClientIdOwnedByAnotherUser",
}

func (o ForwardRegisterOutcome) String() string {
	if o <= ForwardRegisterOutcomeMax {
		return forwardRegisterNames[o]
	}
	return "ForwardRegisterOutcome(" + strconv.Itoa(int(o)) + ")"
}

// Transient reports whether a retry, here or on another replica, could succeed.
func (o ForwardRegisterOutcome) Transient() bool {
	return o != ForwardRegisterOk && o != ForwardRegisterClientIDOwnedByAnotherUser &&
		o <= ForwardRegisterOutcomeMax
}

// ForwardLogoutOutcome is the verdict byte (offset 255) of a ForwardLogoutResult.
type ForwardLogoutOutcome uint8

const (
	ForwardLogoutOk           ForwardLogoutOutcome = 0
	ForwardLogoutNotPrimary   ForwardLogoutOutcome = 1
	ForwardLogoutPipelineFull ForwardLogoutOutcome = 2
	ForwardLogoutInProgress   ForwardLogoutOutcome = 3
	ForwardLogoutCanceled     ForwardLogoutOutcome = 4

	ForwardLogoutOutcomeMax = ForwardLogoutCanceled
)

var forwardLogoutNames = [...]string{"Ok", "NotPrimary", "PipelineFull", "InProgress", "Canceled"}

func (o ForwardLogoutOutcome) String() string {
	if o <= ForwardLogoutOutcomeMax {
		return forwardLogoutNames[o]
	}
	return "ForwardLogoutOutcome(" + strconv.Itoa(int(o)) + ")"
}

// AckLevel is the trailing ack byte of StoreConsumerOffset and DeleteConsumerOffset.
type AckLevel uint8

const (
	AckNoAck  AckLevel = 0 // primary-local write, answered at once
	AckQuorum AckLevel = 1 // replicated and persisted at commit
)

func (a AckLevel) String() string {
	switch a {
	case AckNoAck:
		return "NoAck"
	case AckQuorum:
		return "Quorum"
	}
	return "AckLevel(" + strconv.Itoa(int(a)) + ")"
}

// Known reports whether a is 0 or 1; any other byte fails the payload decode.
func (a AckLevel) Known() bool { return a <= AckQuorum }

// Consensus group ids (IggyNamespace in apache/iggy
// core/server_common/src/sharding/mod.rs). Every consensus header carries a u64 group:
// the metadata sentinel, or a packed partition key tagged with the partition's
// incarnation
//
//	bit 63 62         52 51         32 31     20 19          0
//	+---+-------------+-------------+---------+-------------+
//	| 0 | incarnation |  stream id  | topic id | partition  |
//	+---+-------------+-------------+---------+-------------+
//
// Iggy's replica-plane docs (Binary protocol, cluster: consensus planes) say only
// that a partition group's value is "a packed stream/topic/partition key"; the bits
// between the key and the sentinel are this implementation's. A deletion frees a
// partition's ids for the next create, and every node applies the deletion and the
// create at its own pace: a node behind still runs the old partition's group while
// the others run the new one's under the same ids. The incarnation tag (IncarnationTag
// of the partition's created_at) keeps their frames apart: a partition's group is
// IncarnationGroup of its key, and a partition takes frames of its own tag only.
// Tag 0 is an untagged id, of binaries before the tag (and of nodes that still send
// those: cluster.partition_incarnation_tags = false, for a rolling upgrade): a
// partition takes it as its own, and consensus compares ids without the tag
// (SameGroup).
const (
	// MetadataGroup routes to the metadata plane.
	MetadataGroup uint64 = 1 << 63

	PartitionsPerTopicMax = 1_000_000 // partition ids are < this
	TopicsPerStreamMax    = 4096      // topic ids are < this
	StreamsMax            = 1 << 20   // stream ids are < this

	groupPartitionBits     = 20
	groupTopicBits         = 12
	groupStreamShift       = groupPartitionBits + groupTopicBits
	groupIncarnationShift  = 52
	groupIncarnationBits   = 11
	groupIncarnationMask   = uint64(1<<groupIncarnationBits-1) << groupIncarnationShift
	incarnationTagMultiple = 0x9E3779B97F4A7C15 // 2^64 / golden ratio: Fibonacci hashing
)

// PartitionGroup packs a partition's key, untagged (incarnation tag 0); false when
// an id is out of range (such creates are rejected before commit, so a caller holding
// one has a bug or untrusted input). A partition's consensus group is
// IncarnationGroup of it.
func PartitionGroup(stream, topic, partition uint32) (uint64, bool) {
	if stream >= StreamsMax || topic >= TopicsPerStreamMax || partition >= PartitionsPerTopicMax {
		return 0, false
	}
	return uint64(stream)<<groupStreamShift | uint64(topic)<<groupPartitionBits | uint64(partition), true
}

// IncarnationTag is the 11-bit tag of a partition incarnation created at
// createdAtMicros (its created_at, the revision of the op that created it): 1 to
// 2047, never 0, which is an untagged id's (GroupUntagged). Two incarnations of the
// same ids get different tags unless their created_at hash alike (1 in 2047):
// created_at is a prepare timestamp in µs, whose low bits the Fibonacci hash
// spreads over 64 bits, and the high half of its product by 2047 maps those onto
// 0..2046 evenly.
func IncarnationTag(createdAtMicros uint64) uint16 {
	tag, _ := bits.Mul64(createdAtMicros*incarnationTagMultiple, incarnationTagsCount)
	return uint16(tag) + 1
}

// incarnationTagsCount is the number of incarnation tags: 1..2047.
const incarnationTagsCount = 1<<groupIncarnationBits - 1

// GroupUntagged reports whether partition group id group carries no incarnation
// tag: it was sent by a binary before incarnation tags, or by a node running with
// cluster.partition_incarnation_tags = false, and is taken as of whatever
// incarnation the receiver runs, as those binaries took every frame.
func GroupUntagged(group uint64) bool { return GroupIncarnationTag(group) == 0 }

// GroupKey is group without its incarnation tag: the partition key it packs, or
// the metadata group unchanged.
func GroupKey(group uint64) uint64 {
	if group&MetadataGroup != 0 {
		return group
	}
	return group &^ groupIncarnationMask
}

// SameGroup reports whether a and b name the same consensus group, whatever
// incarnation tags they carry: nodes tag their ids or not
// (cluster.partition_incarnation_tags), so consensus compares keys, and the tag is
// checked once, where a frame meets its partition (partition.Store.Step).
func SameGroup(a, b uint64) bool { return GroupKey(a) == GroupKey(b) }

// IncarnationGroup is partition group group of the incarnation created at
// createdAtMicros: its key with that incarnation's tag.
func IncarnationGroup(group, createdAtMicros uint64) uint64 {
	return TaggedGroup(group, IncarnationTag(createdAtMicros))
}

// PurgedIncarnationTag is the tag of an incarnation's life after purgeGeneration
// purges, tag being its IncarnationTag: a purge empties every replica of the
// partition and starts its group anew under the same ids, and, as with a deletion,
// a replica that has not applied the purge yet must never take the new life's
// frames, nor one that has take the old life's (partition/incarnation.go). Each
// purge moves the tag on by one, so lives fewer than 2047 purges apart never share
// a tag; a life never purged keeps its incarnation's tag, as binaries before this
// one computed it.
func PurgedIncarnationTag(tag uint16, purgeGeneration uint64) uint16 {
	return uint16((uint64(tag-1)+purgeGeneration%incarnationTagsCount)%incarnationTagsCount) + 1
}

// TaggedGroup is partition group group with incarnation tag tag.
func TaggedGroup(group uint64, tag uint16) uint64 {
	return group&^groupIncarnationMask | uint64(tag)<<groupIncarnationShift
}

// GroupIncarnationTag is the incarnation tag a partition group id carries.
func GroupIncarnationTag(group uint64) uint16 {
	return uint16(group & groupIncarnationMask >> groupIncarnationShift)
}

// SplitPartitionGroup unpacks a partition group id, whatever its incarnation tag;
// false for the metadata group and for fields out of range.
func SplitPartitionGroup(group uint64) (stream, topic, partition uint32, ok bool) {
	if group&MetadataGroup != 0 {
		return 0, 0, 0, false
	}
	partition = uint32(group & (1<<groupPartitionBits - 1))
	topic = uint32(group >> groupPartitionBits & (1<<groupTopicBits - 1))
	stream = uint32(group >> groupStreamShift & (1<<(groupIncarnationShift-groupStreamShift) - 1))
	if partition >= PartitionsPerTopicMax {
		return 0, 0, 0, false
	}
	return stream, topic, partition, true
}

// GroupPlane tells which plane a consensus header's group routes to.
func GroupPlane(group uint64) Plane {
	if group == MetadataGroup {
		return PlaneMetadata
	}
	if _, _, _, ok := SplitPartitionGroup(group); ok {
		return PlanePartition
	}
	return PlaneNone
}
