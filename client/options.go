package client

import (
	"crypto/rand"
	"crypto/tls"
	"io"
	"time"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Defaults, the Go SDK's values (apache/iggy foreign/go/client/tcp).
const (
	DefaultRequestTimeout = 30 * time.Second
	// DefaultTransientRetryInterval is how long the client waits before replaying a
	// request answered 57 TransientNotCommitted or 58 TransientNotAccepted.
	DefaultTransientRetryInterval = 50 * time.Millisecond
	// DefaultNotCommittedRetryWindow bounds the replays of a request answered 57
	// (and of a login answered 57 or 58): the Go SDK's request deadline.
	DefaultNotCommittedRetryWindow = 30 * time.Second
	// DefaultNotAcceptedRetryWindow bounds the replays of a request answered 58
	// on one node: past it the client looks for the leader (or, with
	// WithLeaderRedirection(false), returns the 58).
	DefaultNotAcceptedRetryWindow = 2 * time.Second
	// DefaultSDKName and DefaultSDKVersion are what the login announces in its
	// ClientVersionInfo prefix.
	DefaultSDKName    = "iggy-shard-go"
	DefaultSDKVersion = "0.1.0"
)

// Option configures Dial.
type Option func(*options)

type options struct {
	requestTimeout         time.Duration
	transientRetry         TransientRetry
	random                 io.Reader
	version                wire.ClientVersionInfo
	stampRequestChecksums  bool
	clusterMetadataOnLogin bool
	leaderRedirection      bool
	tls                    *tls.Config
	login                  *credentials
	replyBufferBytes       int
	heartbeatInterval      time.Duration
}

// credentials for the login Dial performs.
type credentials struct {
	username, password string
	token              string
	withToken          bool
}

func defaultOptions() options {
	return options{
		requestTimeout: DefaultRequestTimeout,
		transientRetry: TransientRetry{
			Interval:           DefaultTransientRetryInterval,
			NotCommittedWindow: DefaultNotCommittedRetryWindow,
			NotAcceptedWindow:  DefaultNotAcceptedRetryWindow,
		},
		random: rand.Reader,
		version: wire.ClientVersionInfo{
			ProtocolVersion: wire.ServerProtocolVersion,
			SDKName:         []byte(DefaultSDKName),
			SDKVersion:      []byte(DefaultSDKVersion),
		},
		stampRequestChecksums:  true,
		clusterMetadataOnLogin: true,
		leaderRedirection:      true,
		replyBufferBytes:       64 << 10,
	}
}

// WithRequestTimeout bounds every request, replays included, when the request's
// context has no earlier deadline. Zero or less means only the context bounds it.
func WithRequestTimeout(d time.Duration) Option {
	return func(o *options) { o.requestTimeout = d }
}

// TransientRetry says how a request answered 57 TransientNotCommitted or 58
// TransientNotAccepted is replayed: the identical frame, every Interval, until the
// request's deadline or until the window of its code has passed since the first
// transient answer, whichever comes first; then the code is returned. A login uses
// NotCommittedWindow for both codes, as the Go SDK does.
type TransientRetry struct {
	Interval           time.Duration
	NotCommittedWindow time.Duration
	NotAcceptedWindow  time.Duration
}

// WithTransientRetry replaces the default replay policy (50 ms, 30 s, 2 s). Zero
// windows turn replays off.
func WithTransientRetry(r TransientRetry) Option {
	return func(o *options) { o.transientRetry = r }
}

// WithCredentials makes Dial log in with a username and password.
func WithCredentials(username, password string) Option {
	return func(o *options) { o.login = &credentials{username: username, password: password} }
}

// WithPersonalAccessToken makes Dial log in with a personal access token.
func WithPersonalAccessToken(token string) Option {
	return func(o *options) { o.login = &credentials{token: token, withToken: true} }
}

// WithTLS wraps the connection in TLS with cfg (a nil cfg is the zero tls.Config:
// the system's roots); NewTLSConfig builds one from a CA file, a server name or
// InsecureSkipVerify. The server name defaults to the host part of Dial's address.
func WithTLS(cfg *tls.Config) Option {
	return func(o *options) {
		if cfg == nil {
			cfg = &tls.Config{}
		}
		o.tls = cfg
	}
}

// WithSDKIdentity sets the sdk_name and sdk_version the login announces, e.g.
// ("go-sdk", "0.9.0-edge.4") to look exactly like the official Go SDK.
func WithSDKIdentity(name, version string) Option {
	return func(o *options) {
		o.version.SDKName = []byte(name)
		o.version.SDKVersion = []byte(version)
	}
}

// WithProtocolVersion overrides the protocol version the login announces (0.11.0 by
// default); a server outside its window evicts the login with reason 14.
func WithProtocolVersion(v wire.ProtocolVersion) Option {
	return func(o *options) { o.version.ProtocolVersion = v }
}

// WithRequestChecksums chooses whether metadata writes carry request_checksum
// (XxHash3-64 of the body), as the Rust SDK stamps it; the Go SDK sends zero.
func WithRequestChecksums(stamp bool) Option {
	return func(o *options) { o.stampRequestChecksums = stamp }
}

// WithClusterMetadataOnLogin chooses whether a successful login is followed by
// GetClusterMetadata, as the Go SDK does. Without it the client never looks for a
// leader after a login (WithLeaderRedirection has nothing to go on there).
func WithClusterMetadataOnLogin(enabled bool) Option {
	return func(o *options) { o.clusterMetadataOnLogin = enabled }
}

// WithLeaderRedirection chooses whether the client follows a cluster's leader as
// the Go SDK does (on by default; leader.go says how): after every login, and after
// a write answered 58 TransientNotAccepted for a whole NotAcceptedWindow. Off, the
// metadata fetched after a login is ignored and a write answered 58 fails with it
// once its window has passed.
func WithLeaderRedirection(enabled bool) Option {
	return func(o *options) { o.leaderRedirection = enabled }
}

// WithRandom sets the source of client ids and of the seed for message ids
// (crypto/rand by default). Tests use it for reproducible frames.
func WithRandom(r io.Reader) Option {
	return func(o *options) { o.random = r }
}

// WithHeartbeat starts a goroutine that pings the server every interval (the Go SDK
// pings every 5 s), so that a server's idle timeout and its stale-client eviction of
// consumer-group members leave a quiet client alone. Each ping takes its turn with
// the client's other requests and is bounded by the interval. The goroutine stops at
// Close or once the connection is broken; ping errors are otherwise ignored, as the
// Go SDK ignores them. Off by default.
func WithHeartbeat(interval time.Duration) Option {
	return func(o *options) { o.heartbeatInterval = interval }
}
