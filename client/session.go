package client

import (
	"context"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Login logs in with a username and password (LOGIN_REGISTER, code 40). A refusal
// is an *EvictionError (errors.Is(err, wire.ErrInvalidCredentials) for a wrong
// password) and closes the connection. A client already logged in logs out first.
func (c *Client) Login(ctx context.Context, username, password string) (Identity, error) {
	body := wire.LoginRegister{Username: []byte(username), Password: []byte(password)}
	return c.register(ctx, func(b []byte, v wire.ClientVersionInfo) ([]byte, error) {
		body.Version = v
		return body.Append(b)
	})
}

// loginBody appends a login's body, announcing v, to b.
type loginBody func(b []byte, v wire.ClientVersionInfo) ([]byte, error)

// LoginWithPersonalAccessToken logs in with a token (LOGIN_REGISTER_WITH_PAT, code
// 45). A refused token is an *EvictionError matching wire.ErrInvalidPersonalAccessToken.
func (c *Client) LoginWithPersonalAccessToken(ctx context.Context, token string) (Identity, error) {
	body := wire.LoginRegisterWithPAT{Token: []byte(token)}
	return c.register(ctx, func(b []byte, v wire.ClientVersionInfo) ([]byte, error) {
		body.Version = v
		return body.Append(b)
	})
}

// register runs the login sequence of the Go SDK: logout of a bound session, a
// fresh client id, Register (request 0, session 0), bind the session, then
// GetClusterMetadata and, in a cluster, the move to its leader (leader.go).
func (c *Client) register(ctx context.Context, appendBody loginBody) (Identity, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.registerLocked(ctx, appendBody)
}

func (c *Client) registerLocked(ctx context.Context, appendBody loginBody) (Identity, error) {
	// Each pass that does not return moves to a leader, and leaderRedirects
	// caps those moves: at most MaxLeaderRedirects+1 passes.
	for {
		if err := c.loginHereLocked(ctx, appendBody); err != nil {
			return Identity{}, err
		}
		if !c.opts.clusterMetadataOnLogin {
			return c.identity, nil
		}
		if !c.opts.leaderRedirection {
			// Any error but a dead connection leaves the client on this node,
			// as it leaves the Go SDK.
			if _, err := c.do(ctx, c.frame(), wire.OperationNonReplicated, wire.CodeGetClusterMetadata); err != nil && c.broken != nil {
				return Identity{}, err
			}
			return c.identity, nil
		}
		leader, err := c.leaderToFollowLocked(ctx)
		if err != nil {
			return Identity{}, err
		}
		if leader == "" || !c.moveLocked(ctx, leader) {
			return c.identity, nil
		}
	}
}

// loginHereLocked logs in on the current connection.
func (c *Client) loginHereLocked(ctx context.Context, appendBody loginBody) error {
	if err := c.usable(); err != nil {
		return err
	}
	if c.session != 0 {
		if err := c.logoutLocked(ctx); err != nil {
			return err
		}
	}
	if err := c.mintClientID(); err != nil {
		return err
	}
	frame, err := appendBody(c.frame(), c.opts.version)
	if err != nil {
		return err
	}
	payload, err := c.do(ctx, frame, wire.OperationRegister, wire.CodeLoginRegister)
	if err != nil {
		return err
	}
	var reply wire.LoginRegisterReply
	if err := reply.Decode(payload); err != nil {
		// A login reply we cannot read (or a zero session) leaves the connection
		// in no known state: the Go SDK drops it.
		return c.breakProtocol(err)
	}
	c.session = reply.Session
	c.identity = Identity{
		UserID:                reply.UserID,
		Session:               reply.Session,
		ServerProtocolVersion: reply.ServerProtocolVersion,
		ServerVersion:         string(reply.ServerVersion),
	}
	c.relogin = appendBody
	return nil
}

// Logout ends the session (LOGOUT_USER, code 39, operation 3). The connection stays
// open; the next login mints a new client id.
func (c *Client) Logout(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.logoutLocked(ctx)
}

func (c *Client) logoutLocked(ctx context.Context) error {
	// The reply body is ignored, as the Go SDK ignores it.
	if _, err := c.do(ctx, c.frame(), wire.OperationLogout, wire.CodeLogoutUser); err != nil {
		return err
	}
	c.session = 0
	c.identity = Identity{}
	return c.mintClientID()
}
