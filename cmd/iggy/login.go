package main

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/spf13/cobra"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Login sessions (apache/iggy core/cli/src/commands/binary_system/{login,logout}.rs):
// 'iggy login' logs in once with any credentials and creates a personal access
// token named iggy-cli-session, kept for the server under IGGY_HOME
// (sessions.go); later commands log in with it, and 'iggy logout' deletes it on
// the server and here.

func (a *app) loginCommand() *cobra.Command {
	cmd := leaf("login [flags] [EXPIRY]...", "li", "login to Iggy server", cobra.ArbitraryArgs, a.login)
	cmd.Long = "Log in to the Iggy server once: a personal access token is created and kept (in a file only you can\n" +
		"read, under IGGY_HOME), and the next commands use it, until it expires or 'iggy logout'.\n\n" +
		"EXPIRY is how long the session lasts: durations that are summed (default 15 minutes), or none for ever."
	cmd.Example = "  iggy -u iggy login\n  iggy -u iggy -p iggy login 1day\n  iggy -u iggy login 2h 30m"
	return cmd
}

func (a *app) logoutCommand() *cobra.Command {
	return example(leaf("logout", "lo", "logout from Iggy server", exactArgs(0), a.logout), "  iggy logout")
}

func (a *app) sessionCommand() *cobra.Command {
	status := leaf("status", "s", "Show whether a login session is stored for the server", exactArgs(0), a.sessionStatus)
	return groupCommand("session", "sess", "login session operations", status)
}

func (a *app) login(cmd *cobra.Command, args []string) error {
	micros, lifetime, err := tokenLifetime(args, defaultSessionLifetime)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	c, err := a.connectAs(ctx, true, loginFirstExplicit)
	if err != nil {
		return err
	}
	addr := a.conn.address
	a.executing("login command")
	tokens, err := c.GetPersonalAccessTokens(ctx)
	if err != nil {
		return a.refused(err)
	}
	var onServer *wire.PatEntry
	for i := range tokens {
		if string(tokens[i].Name) == sessionTokenName {
			onServer = &tokens[i]
		}
	}
	stored, err := loadSession(a.home, addr)
	if err != nil {
		return err
	}
	now := time.Now()
	if stored != nil && onServer != nil && !stored.expired(now) && !patExpired(onServer, now) {
		return a.result(sessionView(addr, stored), func() { a.say("Already logged into Iggy server %s", addr) })
	}
	if err := removeSession(a.home, addr); err != nil {
		return err
	}
	if onServer != nil {
		a.target = target{token: sessionTokenName}
		if err := c.DeletePersonalAccessToken(ctx, sessionTokenName); err != nil {
			return fmt.Errorf("problem deleting old personal access token with name: %s: %s", sessionTokenName, describe(err, a.target))
		}
	}
	if a.home == "" {
		return fmt.Errorf("cannot keep a login session: %w", errNoHome)
	}
	token, err := c.CreatePersonalAccessToken(ctx, sessionTokenName, micros)
	if err != nil {
		return a.refused(err)
	}
	session := &storedLogin{Server: addr, TokenName: sessionTokenName, Token: token}
	if lifetime > 0 {
		// The server's own expiry when it lists it (it counts from when it
		// applied the token), else ours.
		at := now.Add(lifetime).UTC()
		if tokens, err := c.GetPersonalAccessTokens(ctx); err == nil {
			for _, t := range tokens {
				if string(t.Name) == sessionTokenName && t.ExpiryAtMicros != 0 {
					at = time.UnixMicro(int64(t.ExpiryAtMicros)).UTC()
				}
			}
		}
		session.ExpiresAt = &at
	}
	if err := saveSession(a.home, session); err != nil {
		// A token nobody holds is of no use: take it back.
		_ = c.DeletePersonalAccessToken(ctx, sessionTokenName)
		return fmt.Errorf("cannot keep the login session: %w", err)
	}
	a.debugf("login session stored for %s", addr)
	return a.result(sessionView(addr, session), func() { a.say("Successfully logged into Iggy server %s", addr) })
}

// patExpired reports whether a listed token has expired.
func patExpired(t *wire.PatEntry, now time.Time) bool {
	return t.ExpiryAtMicros != 0 && t.ExpiryAtMicros != math.MaxUint64 && uint64(now.UnixMicro()) >= t.ExpiryAtMicros
}

// sessionJSON describes a stored login without its token.
type sessionJSON struct {
	ServerAddress string     `json:"server_address"`
	Active        bool       `json:"active"`
	TokenName     string     `json:"token_name,omitempty"`
	ExpiresAt     *time.Time `json:"expires_at,omitempty"`
}

func sessionView(addr string, s *storedLogin) sessionJSON {
	if s == nil {
		return sessionJSON{ServerAddress: addr}
	}
	return sessionJSON{ServerAddress: addr, Active: true, TokenName: s.TokenName, ExpiresAt: s.ExpiresAt}
}

func (a *app) logout(cmd *cobra.Command, _ []string) error {
	conn, err := a.resolveConnection()
	if err != nil {
		return err
	}
	a.conn = conn
	addr := conn.address
	stored, err := loadSession(a.home, addr)
	if err != nil {
		return err
	}
	if stored == nil {
		return a.result(sessionView(addr, nil), func() { a.say("Not logged into Iggy server %s: there is no login session to end", addr) })
	}
	ctx := cmd.Context()
	c, err := a.dial(ctx)
	if err != nil {
		return err
	}
	a.client = c
	a.executing("logout command")
	if _, err := c.LoginWithPersonalAccessToken(ctx, stored.Token); err != nil {
		var code wire.ErrorCode
		if !errors.As(err, &code) {
			return serverError{err: err}
		}
		// The server no longer takes the token: nothing is left to delete there.
		if err := removeSession(a.home, addr); err != nil {
			return err
		}
		return a.result(sessionView(addr, nil), func() {
			a.say("Logged out from Iggy server %s (the session had already expired or been revoked)", addr)
		})
	}
	a.loggedIn = true
	a.target = target{token: sessionTokenName}
	if err := c.DeletePersonalAccessToken(ctx, sessionTokenName); err != nil && !errors.Is(err, wire.ErrResourceNotFound) {
		return fmt.Errorf("problem deleting personal access token with name: %s: %s", sessionTokenName, describe(err, a.target))
	}
	if err := removeSession(a.home, addr); err != nil {
		return err
	}
	return a.result(sessionView(addr, nil), func() { a.say("Successfully logged out from Iggy server %s", addr) })
}

func (a *app) sessionStatus(_ *cobra.Command, _ []string) error {
	conn, err := a.resolveConnection()
	if err != nil {
		return err
	}
	stored, err := loadSession(a.home, conn.address)
	if err != nil {
		return err
	}
	a.executing("session status command")
	return a.result(sessionView(conn.address, stored), func() {
		props := []property{{"Server Address", conn.address}, {"Session Active", "No"}}
		if stored != nil {
			props[1].value = "Yes (token presence only, freshness not verified)"
			expiry := "never"
			if stored.ExpiresAt != nil {
				expiry = stored.ExpiresAt.Local().Format(timeLayout)
				if stored.expired(time.Now()) {
					expiry += " (expired)"
				}
			}
			props = append(props, property{"Session Expires", expiry})
		}
		a.properties(props)
	})
}
