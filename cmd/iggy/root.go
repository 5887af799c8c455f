package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Defaults of the connection options: the reference's (apache/iggy
// core/common/src/types/args/mod.rs), and ours for what it lacks.
const (
	defaultTransport        = "tcp"
	defaultTCPServerAddress = "127.0.0.1:8090"
	defaultTLSDomain        = "localhost"
	defaultConnectTimeout   = 5 * time.Second
)

// globalFlags are the options given before the command (iggy -u iggy stream list),
// as the reference takes them, except --output, --quiet and --verbose, which are
// also taken after it.
type globalFlags struct {
	quiet     bool
	verbose   bool
	debugFile string
	output    string
	version   bool
	generate  string

	username, password, token, tokenName string

	transport        string
	tcpServerAddress string
	tlsEnabled       bool
	tlsDomain        string
	tlsCAFile        string
	connectTimeout   time.Duration
	encryptionKey    string

	// set holds the long names of the flags given on the command line, so that the
	// active context fills in only the others.
	set map[string]bool
}

// Output formats of --output.
const (
	outputText = "text"
	outputJSON = "json"
)

func (g *globalFlags) check() error {
	switch g.output {
	case outputText, outputJSON:
	default:
		return usageErrorf("invalid --output %q: text or json", g.output)
	}
	if g.connectTimeout <= 0 {
		return usageErrorf("invalid --connect-timeout %s: it must be positive", g.connectTimeout)
	}
	credentials := 0
	for _, given := range []bool{g.set["username"], g.set["token"], g.set["token-name"]} {
		if given {
			credentials++
		}
	}
	if credentials > 1 {
		return usageErrorf("give one of --username, --token and --token-name")
	}
	if g.set["password"] && !g.set["username"] {
		return usageErrorf("--password needs --username")
	}
	return nil
}

// usageTemplate is cobra's, with the aliases beside each command (as the reference
// lists them) and the usage line of a group of commands without flags of its own.
const usageTemplate = `Usage:{{if .HasAvailableSubCommands}}
  {{.CommandPath}}{{if not .HasParent}} [flags]{{end}} <command>{{else}}
  {{.UseLine}}{{end}}{{if gt (len .Aliases) 0}}

Aliases:
  {{.NameAndAliases}}{{end}}{{if .HasExample}}

Examples:
{{.Example}}{{end}}{{if .HasAvailableSubCommands}}

Commands:{{range .Commands}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding }}  {{.Short}}{{if .Aliases}} [alias: {{join .Aliases ", "}}]{{end}}{{end}}{{end}}{{end}}{{if .HasAvailableLocalFlags}}

Flags:
{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableInheritedFlags}}

Global Flags:
{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableSubCommands}}

Use "{{.CommandPath}} <command> --help" for more information about a command.{{end}}
`

func init() {
	// Commands are listed in the reference's order, not sorted.
	cobra.EnableCommandSorting = false
	cobra.AddTemplateFunc("join", strings.Join)
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "iggy",
		Short: "CLI for Iggy message streaming platform",
		Long: "CLI for Iggy message streaming platform: administer and inspect an iggy-shard (or Apache Iggy)\n" +
			"server or cluster over TCP.\n\n" +
			"Options that say where to connect and who you are (-u, -p, -t, -n, --tcp-*) go before the command:\n" +
			"  iggy -u iggy -p iggy stream list",
		TraverseChildren:  true,
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return unknownCommand(cmd, args[0])
			}
			return nil
		},
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			a.flags.set = changedFlags(cmd)
			return a.setup(cmd)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case a.flags.version:
				fmt.Fprintf(a.io.out, "iggy %s (iggy-shard, binary protocol 0.11.0)\n", version)
				return nil
			case a.flags.generate != "":
				return generateCompletion(cmd, a.flags.generate)
			}
			return a.overview(cmd)
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{msg: err.Error()} })
	root.SetUsageTemplate(usageTemplate)
	a.defineGlobalFlags(root)
	root.AddCommand(
		a.streamCommand(),
		a.topicCommand(),
		a.partitionCommand(),
		a.segmentCommand(),
		a.pingCommand(),
		a.meCommand(),
		a.optionsCommand(),
		a.statsCommand(),
		a.snapshotCommand(),
		a.patCommand(),
		a.userCommand(),
		a.clientCommand(),
		a.clusterCommand(),
		a.consumerGroupCommand(),
		a.consumerOffsetCommand(),
		a.messageCommand(),
		a.contextCommand(),
		a.loginCommand(),
		a.logoutCommand(),
		a.sessionCommand(),
	)
	return root
}

func (a *app) defineGlobalFlags(root *cobra.Command) {
	g := &a.flags
	f := root.Flags()
	f.SortFlags = false
	f.StringVar(&g.transport, "transport", defaultTransport, "Transport to connect over (only tcp is built; quic, http and ws are not yet)")
	f.StringVar(&g.tcpServerAddress, "tcp-server-address", defaultTCPServerAddress, "Server address (host:port) for TCP")
	f.BoolVar(&g.tlsEnabled, "tcp-tls-enabled", false, "Speak TLS to the server (--tcp-tls-enabled=false to turn a context's TLS off)")
	f.StringVar(&g.tlsDomain, "tcp-tls-domain", defaultTLSDomain, "Name the server's TLS certificate must carry")
	f.StringVar(&g.tlsCAFile, "tcp-tls-ca-file", "", "PEM file of the certificate authorities to trust (default: the system's)")
	f.DurationVar(&g.connectTimeout, "connect-timeout", defaultConnectTimeout, "How long to wait for the server to accept the connection")
	f.StringVar(&g.encryptionKey, "encryption-key", "", "Encrypt message payloads on send and decrypt them on poll: an AES-256-GCM key, 32 bytes in base64")
	f.StringVarP(&g.debugFile, "debug", "d", "", "Write diagnostics (connection, login, which node answered) to this file")
	f.StringVarP(&g.username, "username", "u", "", "Username to log in with (the password is asked for when -p is not given)")
	f.StringVarP(&g.password, "password", "p", "", "Password to log in with")
	f.StringVarP(&g.token, "token", "t", "", "Personal access token to log in with")
	f.StringVarP(&g.tokenName, "token-name", "n", "", "Name of a personal access token stored with 'iggy pat create --store-token'")
	f.StringVar(&g.generate, "generate", "", "Print the shell completion script: bash, zsh, fish or powershell")
	f.BoolVarP(&g.version, "version", "V", false, "Print the version")

	p := root.PersistentFlags()
	p.SortFlags = false
	p.StringVar(&g.output, "output", outputText, "Output format: text or json (the HTTP API's field names)")
	p.BoolVarP(&g.quiet, "quiet", "q", false, "Print nothing on success")
	p.BoolVarP(&g.verbose, "verbose", "v", false, "Print diagnostics to stderr (connection, login, which node answered)")
}

// changedFlags collects the long names of the flags given on the command line,
// on the command and on every parent.
func changedFlags(cmd *cobra.Command) map[string]bool {
	set := map[string]bool{}
	for c := cmd; c != nil; c = c.Parent() {
		c.Flags().Visit(func(f *pflag.Flag) { set[f.Name] = true })
	}
	return set
}

// banner is "Iggy CLI" in FIGlet's standard font, as the reference's overview
// opens.
const banner = ` ___                     ____ _     ___ 
|_ _|__ _  __ _ _   _   / ___| |   |_ _|
 | |/ _` + "`" + ` |/ _` + "`" + ` | | | | | |   | |    | | 
 | | (_| | (_| | |_| | | |___| |___ | | 
|___\__, |\__, |\__, |  \____|_____|___|
    |___/ |___/ |___/                   
`

// overview is what iggy alone prints: the banner, the commands and where to read
// more.
func (a *app) overview(cmd *cobra.Command) error {
	var b strings.Builder
	b.WriteString(banner)
	b.WriteString("\n" + cmd.Short + "\n\nUsage: iggy [OPTIONS] [COMMAND]\n\nCommands:\n")
	width := 0
	for _, c := range cmd.Commands() {
		width = max(width, len(c.Name()))
	}
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() || c.Name() == "help" {
			fmt.Fprintf(&b, "  %-*s  %s", width, c.Name(), c.Short)
			if len(c.Aliases) > 0 {
				fmt.Fprintf(&b, " [alias: %s]", strings.Join(c.Aliases, ", "))
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("\nRun 'iggy --help' for full help message.\n" +
		"Run 'iggy COMMAND --help' for more information on a command.\n\n" +
		"For more help on what's Iggy and how to use it, head to https://iggy.apache.org\n")
	_, err := fmt.Fprint(a.io.out, b.String())
	return err
}

// generateCompletion prints the completion script of a shell.
func generateCompletion(root *cobra.Command, shell string) error {
	out := root.OutOrStdout()
	switch shell {
	case "bash":
		return root.GenBashCompletionV2(out, true)
	case "zsh":
		return root.GenZshCompletion(out)
	case "fish":
		return root.GenFishCompletion(out, true)
	case "powershell":
		return root.GenPowerShellCompletionWithDesc(out)
	}
	return usageErrorf("invalid --generate %q: bash, zsh, fish or powershell", shell)
}
