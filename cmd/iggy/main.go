// Command iggy administers and inspects an iggy-shard (or Apache Iggy) server or
// cluster from a terminal: streams, topics, partitions, segments, consumer groups
// and offsets, users and permissions, personal access tokens, clients, the
// cluster, and messages (send and poll, with a follow mode). It is the reference
// CLI's command tree, arguments and flags (apache/iggy core/cli), talking TCP
// (with TLS) through package client.
//
//	iggy -u iggy -p iggy login                 # once: later commands use the session
//	iggy stream create orders
//	iggy topic create orders events 3 none
//	iggy message send orders events "hello"
//	iggy message poll --first -m 10 orders events 0
//	iggy --output json stream list             # the HTTP API's JSON
//
// Exit status: 0 on success, 1 when the server refused or failed the command (its
// error code and meaning are printed), 2 for a command line that cannot run.
// Contexts (named connection settings) and stored logins live under $IGGY_HOME
// (default ~/.iggy). Not built yet: the QUIC, HTTP and WebSocket transports.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first Ctrl-C, a second one ends the process at once.
		<-ctx.Done()
		stop()
	}()
	std := stdio{
		in: os.Stdin, out: os.Stdout, err: os.Stderr,
		inTerminal:   term.IsTerminal(int(os.Stdin.Fd())),
		errTerminal:  term.IsTerminal(int(os.Stderr.Fd())),
		readPassword: func() ([]byte, error) { return term.ReadPassword(int(os.Stdin.Fd())) },
	}
	os.Exit(run(ctx, os.Args[1:], std, os.Getenv))
}
