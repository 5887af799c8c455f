package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/jsonview"
)

// version is this command's version; the protocol it speaks is 0.11.0.
const version = "0.1.0"

// stdio is what a run reads and writes, and what it knows of the terminal.
type stdio struct {
	in  io.Reader
	out io.Writer
	err io.Writer
	// inTerminal: a password is read without echo through readPassword, not as a
	// line of in. errTerminal: long sends show their progress on err.
	inTerminal, errTerminal bool
	readPassword            func() ([]byte, error)
}

// app is one run of the command: its streams, its flags, and its connection.
type app struct {
	in     *bufio.Reader
	io     stdio
	getenv func(string) string
	flags  globalFlags

	// contexts is the state under IGGY_HOME; home is that directory, "" when there
	// is none.
	home     string
	contexts *contextStore

	// conn says where to connect, once the flags and the active context are merged.
	conn connection
	// client is the connection a command opened; run logs out and closes it.
	client *client.Client
	// loggedIn says whether client holds a login that run must end.
	loggedIn bool
	// target names what the running command works on, for its errors.
	target target

	// debugFile (--debug) receives every diagnostic with a timestamp; with
	// --verbose they go to stderr too.
	debugFile *os.File
}

// run is the whole command: it parses args, runs the command and returns the exit
// status. ctx ends on Ctrl-C.
func run(ctx context.Context, args []string, std stdio, getenv func(string) string) int {
	a := &app{in: bufio.NewReader(std.in), io: std, getenv: getenv}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetOut(std.out)
	root.SetErr(std.err)
	err := root.ExecuteContext(ctx)
	if closeErr := a.finish(); err == nil {
		err = closeErr
	}
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(std.err, "Error: "+err.Error())
	var usage usageError
	if errors.As(err, &usage) {
		return exitUsage
	}
	return exitFailed
}

// finish logs out and closes the connection the command opened, and closes the
// debug file. A failed logout is no failure of the command: the server ends the
// session with the connection.
func (a *app) finish() error {
	if a.client != nil {
		if a.loggedIn && (a.flags.verbose || a.debugFile != nil) {
			a.reportAnsweringNode()
		}
		if a.loggedIn {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			if err := a.client.Logout(ctx); err != nil {
				a.debugf("logout: %v", err)
			}
			cancel()
		}
		a.client.Close()
		a.client = nil
	}
	if a.debugFile != nil {
		err := a.debugFile.Close()
		a.debugFile = nil
		if err != nil {
			return fmt.Errorf("writing the debug file: %w", err)
		}
	}
	return nil
}

// debugf writes a diagnostic line to the --debug file and, with --verbose, to
// stderr. Diagnostics never carry a secret.
func (a *app) debugf(format string, args ...any) {
	if a.debugFile == nil && !a.flags.verbose {
		return
	}
	line := fmt.Sprintf(format, args...)
	if a.debugFile != nil {
		fmt.Fprintf(a.debugFile, "%s %s\n", time.Now().Format(time.RFC3339Nano), line)
	}
	if a.flags.verbose {
		fmt.Fprintln(a.io.err, "iggy: "+line)
	}
}

// setup runs before every command: it opens the diagnostics and reads the
// contexts.
func (a *app) setup(cmd *cobra.Command) error {
	if a.flags.debugFile != "" {
		// The reference deletes the file first: each run's trace stands alone.
		f, err := os.OpenFile(a.flags.debugFile, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return fmt.Errorf("cannot open the debug file: %w", err)
		}
		a.debugFile = f
	}
	if err := a.flags.check(); err != nil {
		return err
	}
	a.home = iggyHome(a.getenv)
	store, err := loadContexts(a.home)
	if err != nil {
		return err
	}
	a.contexts = store
	a.debugf("iggy %s: %s", version, cmd.CommandPath())
	return nil
}

// groupCommand is a command that only holds subcommands: run alone or with an
// unknown subcommand, it is a usage error.
func groupCommand(use, alias, short string, subcommands ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErrorf("%s needs a subcommand: %s\nRun '%s --help' for more.", cmd.CommandPath(), subcommandNames(cmd), cmd.CommandPath())
			}
			return unknownCommand(cmd, args[0])
		},
		RunE: func(*cobra.Command, []string) error { return nil },
	}
	if alias != "" {
		cmd.Aliases = []string{alias}
	}
	cmd.AddCommand(subcommands...)
	return cmd
}

func unknownCommand(cmd *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	if s := cmd.SuggestionsFor(name); len(s) > 0 {
		msg += "\nDid you mean " + strings.Join(s, " or ") + "?"
	}
	return usageErrorf("%s\nRun '%s --help' for usage.", msg, cmd.CommandPath())
}

func subcommandNames(cmd *cobra.Command) string {
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	return strings.Join(names, ", ")
}

// leaf builds a command with aliases and an argument check.
func leaf(use, alias, short string, args cobra.PositionalArgs, run func(cmd *cobra.Command, args []string) error) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, Args: args, RunE: run}
	if alias != "" {
		cmd.Aliases = strings.Split(alias, ",")
	}
	return cmd
}

// call runs a command that needs a login: it connects and logs in, prints the
// reference's "Executing <explain>" line and runs do, whose error is told in the
// terms of t.
func (a *app) call(cmd *cobra.Command, t target, explain string, do func(ctx context.Context, c *client.Client) error) error {
	a.target = t
	c, err := a.connect(cmd.Context(), true)
	if err != nil {
		return err
	}
	a.executing("%s", explain)
	return a.refused(do(cmd.Context(), c))
}

// reportAnsweringNode says which node served the command: in a cluster the client
// follows the leader, which may not be the node it was pointed at.
func (a *app) reportAnsweringNode() {
	addr := a.client.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	node := ""
	if m, err := a.client.GetClusterMetadata(ctx); err == nil {
		for _, n := range m.Nodes {
			if sameAddress(net.JoinHostPort(string(n.IP), port(n.TCPPort)), addr) {
				node = fmt.Sprintf(" (node %s, %s)", n.Name, jsonview.RoleName(n.Role))
			}
		}
	}
	a.debugf("answered by %s%s", addr, node)
}

// sameAddress compares host:port addresses, IPs as IPs.
func sameAddress(x, y string) bool {
	hx, px, errX := net.SplitHostPort(x)
	hy, py, errY := net.SplitHostPort(y)
	if errX != nil || errY != nil || px != py {
		return x == y
	}
	if ix, iy := net.ParseIP(hx), net.ParseIP(hy); ix != nil && iy != nil {
		return ix.Equal(iy)
	}
	return strings.EqualFold(hx, hy)
}
