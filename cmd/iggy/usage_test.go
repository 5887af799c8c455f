package main

import (
	"net"
	"strings"
	"testing"
	"time"
)

// A command line that cannot run exits 2 and says why, before any connection: the
// server address given is a closed port, so a command that tried to connect would
// exit 1 instead.
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 256)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bogus"}, `unknown command "bogus" for "iggy"`},
		{[]string{"strem"}, "Did you mean stream?"},
		{[]string{"stream"}, "iggy stream needs a subcommand: create, delete, update, get, list, purge"},
		{[]string{"stream", "bogus"}, `unknown command "bogus" for "iggy stream"`},
		{[]string{"stream", "create"}, "iggy stream create takes 1 argument(s), got 0"},
		{[]string{"stream", "get", "a", "b"}, "takes 1 argument(s), got 2"},
		{[]string{"stream", "get", long}, "invalid stream ID"},
		{[]string{"stream", "list", "-l", "grid"}, `"grid" is not table or list`},
		{[]string{"stream", "list", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"stream", "list", "-u", "iggy"}, "unknown shorthand flag: 'u'"},
		{[]string{"--output", "yaml", "stream", "list"}, `invalid --output "yaml"`},
		{[]string{"-u", "a", "-t", "b", "stream", "list"}, "give one of --username, --token and --token-name"},
		{[]string{"-p", "secret", "stream", "list"}, "--password needs --username"},
		{[]string{"--transport", "http", "stream", "list"}, `transport "http" is not built yet`},
		{[]string{"--tcp-server-address", "nowhere", "stream", "list"}, `invalid server address "nowhere"`},
		{[]string{"--connect-timeout", "0s", "ping"}, "invalid --connect-timeout"},
		{[]string{"topic", "create", "s", "t", "1"}, "takes at least 4 argument(s), got 3"},
		{[]string{"topic", "create", "s", "t", "x", "none"}, `invalid partitions count "x"`},
		{[]string{"topic", "create", "s", "t", "1001", "none"}, "a topic has at most 1000"},
		{[]string{"topic", "create", "s", "t", "1", "zip"}, `invalid compression algorithm "zip"`},
		{[]string{"topic", "create", "s", "t", "1", "none", "15fortnights"}, `unknown unit "fortnights"`},
		{[]string{"topic", "create", "s", "t", "1", "none", "-m", "lots"}, "invalid --max-topic-size"},
		{[]string{"topic", "create", "s", "t", "1", "none", "--set", "novalue"}, "expected KEY=VALUE, got: novalue"},
		{[]string{"topic", "create", "s", "t", "1", "none", "--set", "=v"}, "expected non-empty key"},
		{[]string{"topic", "create", "s", "t", "1", "gzip", "--set", "compression_algorithm=none"}, "given twice"},
		{[]string{"partition", "create", "s", "t", "0"}, "invalid partitions count"},
		{[]string{"segment", "delete", "s", "t", "p", "1"}, `invalid partition ID "p"`},
		{[]string{"consumer-offset", "get", "-k", "group", "1", "s", "t", "0"}, `"group" is not consumer (c) or consumer-group (cg)`},
		{[]string{"consumer-offset", "set", "1", "s", "t", "0", "-5"}, "unknown shorthand flag: '5'"},
		{[]string{"consumer-offset", "set", "1", "s", "t", "0", "x"}, `invalid offset "x"`},
		{[]string{"message", "send", "-p", "1", "-m", "k", "s", "t", "m"}, "give --partition-id or --message-key, not both"},
		{[]string{"message", "send", "-m", long, "s", "t", "m"}, "invalid --message-key"},
		{[]string{"message", "send", "-H", "k:string", "s", "t", "m"}, "expected key:kind:value"},
		{[]string{"message", "send", "-H", "k:decimal:1", "s", "t", "m"}, `unknown kind "decimal"`},
		{[]string{"message", "send", "-H", "k:uint8:300", "s", "t", "m"}, `"300" is not a uint8`},
		{[]string{"message", "send", "-H", "k:bool:yes", "s", "t", "m"}, `"yes" is not true or false`},
		{[]string{"message", "send", "s", "t", ""}, "message 1 is empty"},
		{[]string{"message", "send", "--input-file", "f", "s", "t", "m"}, "give MESSAGES or --input-file, not both"},
		{[]string{"message", "send", "--input-file", "/nonexistent/f", "s", "t"}, "cannot read --input-file"},
		{[]string{"message", "poll", "s", "t", "0"}, "give exactly one of --offset OFFSET, --first, --last and --next"},
		{[]string{"message", "poll", "--first", "--last", "s", "t", "0"}, "give exactly one of"},
		{[]string{"message", "poll", "--first", "-m", "0", "s", "t", "0"}, "invalid --message-count 0"},
		{[]string{"message", "poll", "--first", "--output", "xml", "s", "t", "0"}, `invalid --output "xml"`},
		{[]string{"message", "poll", "--first", "s", "t", "-1"}, "unknown shorthand flag: '1'"},
		{[]string{"user", "create", "u", "p", "-g", "m_srv,fly"}, `Unknown global permission(s) "fly"`},
		{[]string{"user", "create", "u", "p", "-s", "x:m_str"}, "Invalid stream ID"},
		{[]string{"user", "create", "u", "p", "-s", "1:m_str,"}, `Unknown permission(s) "[empty]" for stream ID: 1`},
		{[]string{"user", "create", "u", "p", "-s", "1#y"}, "Invalid topic ID"},
		{[]string{"user", "create", "u", "p", "-s", "1#2:dance"}, `Unknown permission(s) "dance" for topic ID: 2`},
		{[]string{"user", "create", "u", "p", "-u", "asleep"}, `"asleep" is not active or inactive`},
		{[]string{"user", "status", "u", "asleep"}, "invalid status"},
		{[]string{"pat", "create", "n", "soon"}, "invalid expiry"},
		{[]string{"pat", "create", "n", "1day", "--store-token"}, "--store-token cannot be given with an EXPIRY"},
		{[]string{"login", "forever"}, "invalid expiry"},
		{[]string{"ping", "-c", "0"}, "invalid --count 0"},
		{[]string{"options", "broker"}, `invalid scope "broker"`},
		{[]string{"stats", "-o", "yaml"}, `invalid --output "yaml"`},
		{[]string{"snapshot", "-c", "rar"}, `invalid --compression "rar"`},
		{[]string{"snapshot", "-s", "everything"}, `invalid --snapshot-types "everything"`},
		{[]string{"snapshot", "-o", "/nonexistent"}, `invalid --out-dir "/nonexistent"`},
		{[]string{"client", "get", "me"}, `invalid client ID "me"`},
		{[]string{"context", "create", "bad name"}, `invalid context name "bad name"`},
		{[]string{"context", "create", "x", "--transport", "quic"}, "this iggy speaks tcp only"},
		{[]string{"context", "create", "x", "--tcp-tls-enabled", "yes"}, `invalid --tcp-tls-enabled "yes"`},
		{[]string{"context", "delete", "default"}, "the default context cannot be deleted"},
	} {
		e := newEnv(t)
		r := e.raw(append([]string{"--tcp-server-address", "127.0.0.1:1"}, tc.args...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("iggy %s: want exit 2 saying %q, got:\n%s", strings.Join(tc.args, " "), tc.want, r)
		}
	}
}

// A server that cannot be reached is named, with a hint; the exit status is 1.
func TestUnreachableServer(t *testing.T) {
	t.Parallel()
	r := newEnv(t).raw("--tcp-server-address", "127.0.0.1:1", "-t", "token", "stream", "list")
	fails(t, r, exitFailed, "cannot connect to the iggy server at 127.0.0.1:1", "connection refused", "hint: is the server running there?")
	r = newEnv(t).raw("--tcp-server-address", "127.0.0.1:1", "ping")
	fails(t, r, exitFailed, "cannot connect to the iggy server at 127.0.0.1:1")
}

// The connect timeout bounds the TCP connect and the TLS handshake: a port that
// accepts and never answers the handshake is given up on, and said so.
func TestConnectTimeout(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	start := time.Now()
	r := newEnv(t).raw("--tcp-server-address", l.Addr().String(), "--tcp-tls-enabled", "--connect-timeout", "200ms", "ping")
	fails(t, r, exitFailed, "cannot connect to the iggy server at "+l.Addr().String()+": no answer within 200ms (--connect-timeout)")
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("gave up after %s", took)
	}
}

// Without credentials a command that needs a login says how to give some.
func TestMissingCredentials(t *testing.T) {
	t.Parallel()
	r := newEnv(t).iggy("stream", "list")
	fails(t, r, exitFailed, "no credentials for the server at "+serverAddr, "iggy -u USERNAME login", "IGGY_USERNAME")
}
