package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/iggy-shard/iggy-shard/jsonview"
)

// sessionUser makes a user of its own for a login test: logins of one user share
// the iggy-cli-session token, and the tests run in parallel.
func sessionUser(t *testing.T, e *env) string {
	t.Helper()
	u := name("session")
	e.ok("user", "create", u, "secret-1", "-g", "r_str,m_usr,r_usr")
	return u
}

func TestLoginLogout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := sessionUser(t, e)
	file := filepath.Join(e.home, "sessions", serverFileName(serverAddr))

	fails(t, e.iggy("logout"), exitOK) // nothing to end
	has(t, e.iggy("logout"), "Not logged into Iggy server "+serverAddr)

	// The password comes from standard input when it is not a terminal.
	e.stdin = strings.NewReader("secret-1\n")
	r := e.iggy("-u", u, "login", "2h")
	has(t, r, "Executing login command\nSuccessfully logged into Iggy server "+serverAddr+"\n")
	if strings.Contains(r.stdout+r.stderr, "secret-1") {
		t.Fatalf("the password was printed:\n%s", r)
	}
	info, err := os.Stat(file)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("session file %s: %v %v", file, info, err)
	}
	if dir, err := os.Stat(filepath.Dir(file)); err != nil || dir.Mode().Perm() != 0o700 {
		t.Fatalf("sessions directory: %v %v", dir, err)
	}
	var stored storedLogin
	if _, err := toml.DecodeFile(file, &stored); err != nil {
		t.Fatal(err)
	}
	if stored.Server != serverAddr || stored.TokenName != sessionTokenName || len(stored.Token) < 20 || stored.ExpiresAt == nil ||
		stored.ExpiresAt.Sub(time.Now()) < 119*time.Minute || stored.ExpiresAt.Sub(time.Now()) > 121*time.Minute {
		t.Fatalf("stored login: %+v", stored)
	}

	// Later commands need no credentials.
	has(t, e.iggy("user", "get", u), "Username     "+u)
	has(t, e.iggy("session", "status"), "Session Active   Yes", "Session Expires  ")
	has(t, e.iggy("-u", u, "-p", "secret-1", "login"), "Already logged into Iggy server "+serverAddr)
	var tokens []jsonview.PersonalAccessToken
	jsonUnmarshal(e.iggy("--output", "json", "pat", "list").stdout, &tokens)
	if len(tokens) != 1 || tokens[0].Name != sessionTokenName || tokens[0].ExpiryAt == nil {
		t.Fatalf("the user's tokens: %+v", tokens)
	}

	// Logout deletes the token on the server and the file here.
	has(t, e.iggy("logout"), "Successfully logged out from Iggy server "+serverAddr)
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("session file after logout: %v", err)
	}
	jsonUnmarshal(e.iggy("-u", u, "-p", "secret-1", "--output", "json", "pat", "list").stdout, &tokens)
	if len(tokens) != 0 {
		t.Fatalf("tokens after logout: %+v", tokens)
	}
	has(t, e.iggy("session", "status"), "Session Active  No")
	fails(t, e.iggy("user", "get", u), exitFailed, "no credentials")
}

// A session revoked on the server, or expired, says so and asks for a new login;
// its file is removed.
func TestLoginSessionRevokedOrExpired(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := sessionUser(t, e)
	file := filepath.Join(e.home, "sessions", serverFileName(serverAddr))

	e.iggy("-u", u, "-p", "secret-1", "login")
	has(t, newEnv(t).iggy("-u", u, "-p", "secret-1", "pat", "delete", sessionTokenName), "deleted")
	fails(t, e.iggy("stream", "list"), exitFailed, "your login session for "+serverAddr+" was revoked on the server",
		"hint: log in again with 'iggy -u USERNAME login'")
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("a revoked session's file is kept: %v", err)
	}

	has(t, e.iggy("-u", u, "-p", "secret-1", "login", "1s"), "Successfully logged into")
	var stored storedLogin
	toml.DecodeFile(file, &stored)
	time.Sleep(time.Until(*stored.ExpiresAt) + 20*time.Millisecond)
	var r result
	eventually(t, "the token expires on the server", func() bool {
		r = e.iggy("stream", "list")
		return r.code != exitOK
	})
	fails(t, r, exitFailed, "your login session for "+serverAddr+" expired at ", "log in again")

	// A logout after the session died ends it here all the same.
	e.iggy("-u", u, "-p", "secret-1", "login", "1s")
	toml.DecodeFile(file, &stored)
	time.Sleep(time.Until(*stored.ExpiresAt) + 20*time.Millisecond)
	has(t, e.iggy("logout"), "Logged out from Iggy server "+serverAddr+" (the session had already expired or been revoked)")
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("session file after logout: %v", err)
	}
}

// Explicit credentials win over a stored session.
func TestCredentialOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := sessionUser(t, e)
	e.iggy("-u", u, "-p", "secret-1", "login")
	var me jsonview.Client
	jsonUnmarshal(e.iggy("--output", "json", "-t", rootToken, "me").stdout, &me)
	if me.UserID == nil || *me.UserID != 0 {
		t.Fatalf("-t beside a session: logged in as %v", me.UserID)
	}
	jsonUnmarshal(e.iggy("--output", "json", "me").stdout, &me)
	if me.UserID == nil || *me.UserID == 0 {
		t.Fatalf("the session: logged in as %v", me.UserID)
	}
	e.iggy("logout")

	// IGGY_USERNAME and IGGY_PASSWORD come last.
	e.vars["IGGY_USERNAME"], e.vars["IGGY_PASSWORD"] = u, "secret-1"
	has(t, e.iggy("me"), "User ID")
	e.vars["IGGY_PASSWORD"] = "wrong"
	fails(t, e.iggy("me"), exitFailed, "invalid username or password")
}

// Without -p on a terminal, the password is read without echo and never shown.
func TestPasswordPromptOnTerminal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := sessionUser(t, e)
	e.inTerminal, e.password = true, "secret-1"
	r := e.iggy("-u", u, "me")
	has(t, r, "User ID")
	if !strings.HasPrefix(r.stderr, "Password: ") || strings.Contains(r.stdout+r.stderr, "secret-1") {
		t.Fatalf("prompt:\n%s", r)
	}
	e.inTerminal = false
	fails(t, e.iggy("-u", u, "me"), exitFailed, "reading the password from standard input: it is empty")
}
