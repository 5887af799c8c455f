package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// connection says where and how to connect: the flags over the active context over
// the defaults.
type connection struct {
	address    string
	tlsEnabled bool
	tlsDomain  string
	tlsCAFile  string
	timeout    time.Duration
}

// resolveConnection merges the connection flags with the active context.
func (a *app) resolveConnection() (connection, error) {
	ctx, err := a.contexts.active()
	if err != nil {
		return connection{}, err
	}
	g := &a.flags
	transport := pick(g.set["transport"], g.transport, ctx.str("transport"), defaultTransport)
	if transport != "tcp" {
		return connection{}, usageErrorf("transport %q is not built yet: this iggy speaks tcp only", transport)
	}
	c := connection{
		address:    pick(g.set["tcp-server-address"], g.tcpServerAddress, ctx.str("tcp_server_address"), defaultTCPServerAddress),
		tlsEnabled: g.tlsEnabled,
		tlsDomain:  pick(g.set["tcp-tls-domain"], g.tlsDomain, ctx.str("tcp_tls_domain"), defaultTLSDomain),
		tlsCAFile:  pick(g.set["tcp-tls-ca-file"], g.tlsCAFile, ctx.str("tcp_tls_ca_file"), ""),
		timeout:    g.connectTimeout,
	}
	if enabled, ok := ctx.boolean("tcp_tls_enabled"); ok && !g.set["tcp-tls-enabled"] {
		c.tlsEnabled = enabled
	}
	if _, _, err := net.SplitHostPort(c.address); err != nil {
		return connection{}, usageErrorf("invalid server address %q: expected host:port", c.address)
	}
	return c, nil
}

// pick is the value of a flag given on the command line, else the context's, else
// the default.
func pick(given bool, flag, fromContext, fallback string) string {
	switch {
	case given:
		return flag
	case fromContext != "":
		return fromContext
	}
	return fallback
}

// credential is how a command logs in.
type credential struct {
	// kind says where it came from, for diagnostics: "password", "token",
	// "stored token", "session".
	kind               string
	username, password string
	token              string
	// session is the stored login the token came from, nil otherwise.
	session *storedLogin
}

// needLogin says how a command uses the connection.
type needLogin int

const (
	loginRequired needLogin = iota
	// loginFirstExplicit is the login command: explicit credentials win over a
	// stored session, which it checks.
	loginFirstExplicit
)

// resolveCredential picks the login: credentials given on the command line, then
// a stored session for the server, then the active context's credentials, then
// IGGY_USERNAME and IGGY_PASSWORD.
func (a *app) resolveCredential(mode needLogin) (credential, error) {
	g := &a.flags
	ctx, err := a.contexts.active()
	if err != nil {
		return credential{}, err
	}
	explicit := func(username, password, token, tokenName string) (credential, bool, error) {
		switch {
		case tokenName != "":
			stored, err := loadStoredToken(a.home, a.conn.address, tokenName)
			if err != nil {
				return credential{}, false, err
			}
			return credential{kind: "stored token " + tokenName, token: stored}, true, nil
		case token != "":
			return credential{kind: "token", token: token}, true, nil
		case username != "":
			if password == "" {
				p, err := a.readSecret("Password: ")
				if err != nil {
					return credential{}, false, err
				}
				password = p
			}
			return credential{kind: "password", username: username, password: password}, true, nil
		}
		return credential{}, false, nil
	}
	if c, ok, err := explicit(g.username, g.password, g.token, g.tokenName); ok || err != nil {
		return c, err
	}
	session, err := loadSession(a.home, a.conn.address)
	if err != nil {
		return credential{}, err
	}
	if session != nil && mode != loginFirstExplicit {
		return credential{kind: "session", token: session.Token, session: session}, nil
	}
	if c, ok, err := explicit(ctx.str("username"), ctx.str("password"), ctx.str("token"), ctx.str("token_name")); ok || err != nil {
		return c, err
	}
	if u, p := a.getenv("IGGY_USERNAME"), a.getenv("IGGY_PASSWORD"); u != "" && p != "" {
		return credential{kind: "password from IGGY_USERNAME and IGGY_PASSWORD", username: u, password: p}, nil
	}
	if session != nil {
		return credential{kind: "session", token: session.Token, session: session}, nil
	}
	return credential{}, fmt.Errorf("no credentials for the server at %s\n"+
		"hint: log in once with 'iggy -u USERNAME login', or give -u USERNAME [-p PASSWORD] or -t TOKEN before the command,\n"+
		"      or set IGGY_USERNAME and IGGY_PASSWORD", a.conn.address)
}

// connect opens the connection a command needs and, unless login is false, logs
// in. The client is kept in a.client for run to log out and close.
func (a *app) connect(ctx context.Context, login bool) (*client.Client, error) {
	return a.connectAs(ctx, login, loginRequired)
}

func (a *app) connectAs(ctx context.Context, login bool, mode needLogin) (*client.Client, error) {
	conn, err := a.resolveConnection()
	if err != nil {
		return nil, err
	}
	a.conn = conn
	var cred credential
	if login {
		if cred, err = a.resolveCredential(mode); err != nil {
			return nil, err
		}
	}
	c, err := a.dial(ctx)
	if err != nil {
		return nil, err
	}
	a.client = c
	if !login {
		return c, nil
	}
	a.debugf("logging in with a %s", cred.kind)
	if cred.token != "" {
		_, err = c.LoginWithPersonalAccessToken(ctx, cred.token)
	} else {
		_, err = c.Login(ctx, cred.username, cred.password)
	}
	if err != nil {
		return nil, a.loginFailed(err, cred)
	}
	a.loggedIn = true
	id, _ := c.Identity()
	a.debugf("logged in as user %d (server %s)", id.UserID, id.ServerVersion)
	if answered := c.Addr(); answered != conn.address {
		a.debugf("the cluster's leader is %s: the command goes there (asked %s)", answered, conn.address)
	}
	return c, nil
}

// dial connects within the connect timeout, and names the server and a way out
// when it cannot.
func (a *app) dial(ctx context.Context) (*client.Client, error) {
	opts := []client.Option{}
	if a.conn.tlsEnabled {
		cfg, err := client.NewTLSConfig(client.TLSOptions{CAFile: a.conn.tlsCAFile, ServerName: a.conn.tlsDomain})
		if err != nil {
			return nil, err
		}
		opts = append(opts, client.WithTLS(cfg))
	}
	dialCtx, cancel := context.WithTimeout(ctx, a.conn.timeout)
	defer cancel()
	a.debugf("connecting to %s over %s", a.conn.address, map[bool]string{false: "TCP", true: "TCP with TLS"}[a.conn.tlsEnabled])
	start := time.Now()
	c, err := client.Dial(dialCtx, a.conn.address, opts...)
	if err != nil {
		return nil, a.unreachable(ctx, err)
	}
	a.debugf("connected to %s in %s", a.conn.address, time.Since(start).Round(time.Microsecond))
	return c, nil
}

// unreachable explains a failed dial.
func (a *app) unreachable(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	cause := err.Error()
	var broken *client.ConnectionError
	if errors.As(err, &broken) && broken.Err != nil {
		cause = broken.Err.Error()
	}
	if errors.Is(err, wire.ErrInvalidTlsCertificate) {
		return fmt.Errorf("the TLS certificate of the server at %s is not trusted: %s\n"+
			"hint: give its CA with --tcp-tls-ca-file and the name it carries with --tcp-tls-domain", a.conn.address, cause)
	}
	hint := "is the server running there? Start one with 'go run ./cmd/iggy-shard', or point at yours with --tcp-server-address HOST:PORT (or a context: iggy context create)"
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ETIMEDOUT):
		cause = fmt.Sprintf("no answer within %s (--connect-timeout)", a.conn.timeout)
		hint = "is the address right, and does a firewall let it through?"
	case a.conn.tlsEnabled && !errors.Is(err, syscall.ECONNREFUSED):
		hint = "does the server speak TLS on that port? (without TLS, leave out --tcp-tls-enabled)"
	}
	return fmt.Errorf("cannot connect to the iggy server at %s: %s\nhint: %s", a.conn.address, cause, hint)
}

// loginFailed explains a refused login. A stored session the server no longer
// takes is removed: it can never work again.
func (a *app) loginFailed(err error, cred credential) error {
	var broken *client.ConnectionError
	if errors.As(err, &broken) {
		if errors.Is(err, io.EOF) && !a.conn.tlsEnabled {
			return fmt.Errorf("the server at %s closed the connection at login\n"+
				"hint: does it speak TLS? Then add --tcp-tls-enabled (and --tcp-tls-ca-file if its certificate is self-signed)", a.conn.address)
		}
		return serverError{err: err}
	}
	if cred.session != nil && (errors.Is(err, wire.ErrInvalidPersonalAccessToken) ||
		errors.Is(err, wire.ErrPersonalAccessTokenExpired) || errors.Is(err, wire.ErrUnauthenticated)) {
		removeErr := removeSession(a.home, a.conn.address)
		why := "was revoked on the server"
		if cred.session.expired(time.Now()) {
			why = "expired at " + cred.session.ExpiresAt.Local().Format(timeLayout)
		}
		msg := fmt.Sprintf("your login session for %s %s\nhint: log in again with 'iggy -u USERNAME login'", a.conn.address, why)
		if removeErr != nil {
			msg += fmt.Sprintf("\n(the stale session file could not be removed: %v)", removeErr)
		}
		return errors.New(msg)
	}
	what := "the login was refused"
	switch {
	case errors.Is(err, wire.ErrInvalidCredentials):
		what = "invalid username or password"
	case errors.Is(err, wire.ErrInvalidPersonalAccessToken):
		what = "the personal access token is unknown, revoked or expired"
	case errors.Is(err, wire.ErrUnauthenticated):
		what = "the login was refused (is the user inactive?)"
	}
	var code wire.ErrorCode
	if errors.As(err, &code) {
		what += fmt.Sprintf(" (%d)", code)
	}
	return fmt.Errorf("cannot log in to %s: %s", a.conn.address, what)
}

// readSecret asks for a secret: from the terminal without echo, or as one line of
// standard input when it is not a terminal. The prompt goes to stderr.
func (a *app) readSecret(prompt string) (string, error) {
	if a.io.inTerminal && a.io.readPassword != nil {
		fmt.Fprint(a.io.err, prompt)
		b, err := a.io.readPassword()
		fmt.Fprintln(a.io.err)
		if err != nil {
			return "", fmt.Errorf("reading the password: %w", err)
		}
		return string(b), nil
	}
	line, err := a.in.ReadString('\n')
	if err != nil && (err != io.EOF || line == "") {
		return "", fmt.Errorf("reading the password from standard input: %w", noInput(err))
	}
	return strings.TrimRight(line, "\r\n"), nil
}

func noInput(err error) error {
	if err == io.EOF {
		return errors.New("it is empty (give -p, or pipe the password in)")
	}
	return err
}
