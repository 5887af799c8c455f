package main

import (
	"strings"
	"testing"

	"github.com/iggy-shard/iggy-shard/jsonview"
)

func TestUserCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := name("alice")

	var created jsonview.UserDetails
	e.json(&created, "user", "create", u, "secret-1", "-g", "r_str,poll_messages", "-s", "3:s_msg#1:p_msg,read_topic", "-s", "4")
	if created.Username != u || created.Status != "active" || created.Permissions == nil {
		t.Fatalf("created user: %+v", created)
	}
	p := created.Permissions
	if !p.Global.ReadStreams || !p.Global.PollMessages || p.Global.ManageServers || len(p.Streams) != 2 ||
		!p.Streams["3"].SendMessages || p.Streams["3"].ReadStream || !p.Streams["3"].Topics["1"].PollMessages ||
		!p.Streams["3"].Topics["1"].ReadTopic || p.Streams["4"].SendMessages {
		t.Fatalf("created permissions: %+v", p)
	}
	fails(t, e.root("user", "create", u, "other-pass"), exitFailed, "a user named '"+u+"' already exists (46)")

	r := e.ok("user", "get", u)
	has(t, r, "Username     "+u, "Status       active", "Permissions  global: read_streams, poll_messages\n",
		"stream 3: send_messages\n", "  topic 1: read_topic, poll_messages\n", "stream 4: none\n")
	has(t, e.ok("user", "list"), "ID  Created", "active  "+u+"\n")
	has(t, e.ok("user", "list", "-l", "list"), "|active|"+u+"\n")
	var users []map[string]any
	e.json(&users, "user", "list")
	for _, x := range users {
		if _, ok := x["permissions"]; ok {
			t.Fatalf("user list carries permissions: %v", x)
		}
	}

	has(t, e.ok("user", "name", u, u+"-b"), "User with ID: "+u+" updated with username: "+u+"-b")
	u += "-b"
	has(t, e.ok("user", "status", u, "inactive"), "User with ID: "+u+" updated with status: inactive")
	has(t, e.ok("user", "permissions", u), "Permissions for user with ID: "+u+" updated")
	var got jsonview.UserDetails
	e.json(&got, "user", "get", u)
	if got.Status != "inactive" || got.Permissions != nil {
		t.Fatalf("after status and permissions: %+v", got)
	}
	e.ok("user", "permissions", u, "-g", "m_srv")
	e.json(&got, "user", "get", u)
	if got.Permissions == nil || !got.Permissions.Global.ManageServers || got.Permissions.Streams != nil {
		t.Fatalf("after -g m_srv: %+v", got.Permissions)
	}
	e.ok("user", "status", u, "active")

	// Passwords not given are read from standard input, a line each, and never printed.
	e.stdin = strings.NewReader("secret-1\nsecret-2\n")
	r = e.ok("user", "password", u)
	has(t, r, "Password for user with ID: "+u+" changed")
	if strings.Contains(r.stdout+r.stderr, "secret-") {
		t.Fatalf("a password was printed:\n%s", r)
	}
	fails(t, e.root("user", "password", u, "wrong-one", "secret-3"), exitFailed, "the current password is wrong (42)")
	has(t, newEnv(t).iggy("-u", u, "-p", "secret-2", "me"), "User ID")
	fails(t, newEnv(t).iggy("-u", u, "-p", "secret-1", "me"), exitFailed, "cannot log in to "+serverAddr+": invalid username or password")

	has(t, e.ok("user", "delete", u), "User with ID: "+u+" deleted")
	fails(t, e.root("user", "get", u), exitFailed, "user '"+u+"' not found")
	fails(t, e.root("user", "delete", u), exitFailed, "user '"+u+"' not found (20)")
	fails(t, e.root("user", "delete", "0"), exitFailed, "the root user cannot be deleted (48)")
	fails(t, e.root("user", "permissions", "iggy"), exitFailed, "the root user's permissions cannot be changed (49)")
	fails(t, e.root("user", "create", "ab", "secret"), exitFailed, "invalid username: it must be 3 to 50 bytes (43)")

	// A password left out of user create is read from standard input.
	e.stdin = strings.NewReader("from-stdin\n")
	e.ok("user", "create", u+"-c")
	has(t, newEnv(t).iggy("-u", u+"-c", "-p", "from-stdin", "me"), "User ID")
	e.ok("user", "delete", u+"-c")
}

// A user without permissions is refused, and told so.
func TestPermissionDenied(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := name("nobody")
	e.ok("user", "create", u, "secret-1")
	fails(t, newEnv(t).iggy("-u", u, "-p", "secret-1", "stream", "create", name("denied")), exitFailed,
		"permission denied: the logged-in user may not do this (41)")
}

func TestPATCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := name("patuser")
	e.ok("user", "create", u, "secret-1", "-g", "r_str,r_srv")
	asUser := func(args ...string) result {
		return e.iggy(append([]string{"-u", u, "-p", "secret-1"}, args...)...)
	}

	r := asUser("pat", "create", "ci", "1day")
	has(t, r, "Personal access token with name: ci and token expire time: 1day created\nToken: ")
	token := strings.TrimSpace(r.stdout[strings.Index(r.stdout, "Token: ")+len("Token: "):])
	has(t, newEnv(t).iggy("-t", token, "stream", "list"), "Executing list streams")

	r = asUser("-q", "pat", "create", "quiet")
	quietToken := strings.TrimSpace(r.stdout)
	if r.code != exitOK || strings.Contains(r.stdout, " ") || len(quietToken) < 20 {
		t.Fatalf("-q pat create prints the token alone:\n%s", r)
	}
	has(t, newEnv(t).iggy("-t", quietToken, "me"), "User ID")

	var createdJSON map[string]string
	r = asUser("--output", "json", "pat", "create", "json")
	if err := jsonUnmarshal(r.stdout, &createdJSON); err != nil || createdJSON["token"] == "" {
		t.Fatalf("pat create JSON: %v\n%s", err, r)
	}
	fails(t, asUser("pat", "create", "ci"), exitFailed, "you already have a personal access token named 'ci' (51)")

	r = asUser("pat", "list")
	has(t, r, "Name   Token Expiry Time\n", "ci     20", "quiet  unlimited\n")
	var tokens []jsonview.PersonalAccessToken
	if err := jsonUnmarshal(asUser("--output", "json", "pat", "list").stdout, &tokens); err != nil || len(tokens) != 3 {
		t.Fatalf("pat list JSON: %v %+v", err, tokens)
	}
	for _, tk := range tokens {
		if (tk.Name == "ci") != (tk.ExpiryAt != nil) {
			t.Fatalf("expiry of %s: %v", tk.Name, tk.ExpiryAt)
		}
	}

	// A stored token is kept out of sight and used by name.
	r = e.iggy("-u", u, "-p", "secret-1", "pat", "create", "stored", "--store-token")
	has(t, r, "Personal access token with name: stored and without token expire time created (stored; log in with -n stored)")
	if strings.Contains(r.stdout, "Token:") {
		t.Fatalf("a stored token was printed:\n%s", r)
	}
	has(t, e.iggy("-n", "stored", "me"), "User ID")
	fails(t, e.iggy("-n", "other", "me"), exitFailed, "no token named 'other' is stored for "+serverAddr)
	has(t, e.iggy("-n", "stored", "pat", "delete", "ci"), "Personal access token with name: ci deleted")
	fails(t, newEnv(t).iggy("-t", token, "me"), exitFailed, "the personal access token is unknown, revoked or expired")
	has(t, asUser("pat", "delete", "stored"), "Personal access token with name: stored deleted")
	fails(t, e.iggy("-n", "stored", "me"), exitFailed, "no token named 'stored' is stored")
	fails(t, asUser("pat", "delete", "ci"), exitFailed, "personal access token 'ci' not found (20)")
}
