package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/spf13/cobra"
)

// contextKeys are the settings a context may hold that context show names, in the
// reference's order, with their labels; secret ones are masked.
var contextKeys = []struct {
	key, label string
	secret     bool
}{
	{"transport", "Transport", false},
	{"encryption_key", "Encryption Key", true},
	{"credentials_username", "Credentials Username", false},
	{"credentials_password", "Credentials Password", true},
	{"http_api_url", "HTTP API URL", false},
	{"http_retries", "HTTP Retries", false},
	{"tcp_server_address", "TCP Server Address", false},
	{"tcp_reconnection_max_retries", "TCP Reconnection Max Retries", false},
	{"tcp_reconnection_interval", "TCP Reconnection Interval", false},
	{"tcp_tls_enabled", "TCP TLS Enabled", false},
	{"tcp_tls_domain", "TCP TLS Domain", false},
	{"tcp_tls_ca_file", "TCP TLS CA File", false},
	{"quic_client_address", "QUIC Client Address", false},
	{"quic_server_address", "QUIC Server Address", false},
	{"quic_server_name", "QUIC Server Name", false},
	{"websocket_server_address", "WebSocket Server Address", false},
	{"username", "Username", false},
	{"password", "Password", true},
	{"token", "Token", true},
	{"token_name", "Token Name", false},
}

const secretMask = "********"

func (a *app) contextCommand() *cobra.Command {
	list := leaf("list [flags]", "l", "List all contexts", exactArgs(0), nil)
	var mode listMode
	addListMode(list, &mode)
	list.RunE = func(*cobra.Command, []string) error { return a.contextList(mode) }

	create := leaf("create [flags] <CONTEXT_NAME>", "c", "Create a new context", exactArgs(1), nil)
	create.Long = "Create a new context: a named set of connection settings and credentials, kept in\n" +
		"$IGGY_HOME/contexts.toml (readable by you only). 'iggy context use NAME' makes it active."
	create.Example = "  iggy context create production --tcp-server-address 10.0.0.1:8090\n" +
		"  iggy context create local --username iggy --password iggy\n" +
		"  iggy context create secure --tcp-server-address iggy.example.com:8090 --tcp-tls-enabled true"
	values := map[string]*string{}
	f := create.Flags()
	f.SortFlags = false
	for _, flag := range []struct{ name, short, key, usage string }{
		{"transport", "", "transport", "Transport (tcp)"},
		{"tcp-server-address", "", "tcp_server_address", "Server address (host:port) for TCP"},
		{"tcp-tls-enabled", "", "tcp_tls_enabled", "Speak TLS: true or false"},
		{"tcp-tls-domain", "", "tcp_tls_domain", "Name the server's TLS certificate must carry"},
		{"tcp-tls-ca-file", "", "tcp_tls_ca_file", "PEM file of the certificate authorities to trust"},
		{"username", "u", "username", "Username to log in with"},
		{"password", "p", "password", "Password to log in with (kept in plain text in contexts.toml, readable by you only)"},
		{"token", "t", "token", "Personal access token to log in with"},
		{"token-name", "n", "token_name", "Name of a stored personal access token to log in with"},
	} {
		values[flag.key] = f.StringP(flag.name, flag.short, "", flag.usage)
	}
	create.RunE = func(cmd *cobra.Command, args []string) error { return a.contextCreate(cmd, args[0], values) }

	return groupCommand("context", "ctx", "context operations",
		list,
		example(leaf("use <CONTEXT_NAME>", "u", "Set the active context", exactArgs(1),
			func(_ *cobra.Command, args []string) error { return a.contextUse(args[0]) }), "  iggy context use dev"),
		create,
		example(leaf("delete <CONTEXT_NAME>", "d", "Delete an existing context", exactArgs(1),
			func(_ *cobra.Command, args []string) error { return a.contextDelete(args[0]) }), "  iggy context delete production"),
		example(leaf("show <CONTEXT_NAME>", "s", "Show the settings of a context (secrets masked)", exactArgs(1),
			func(_ *cobra.Command, args []string) error { return a.contextShow(args[0]) }), "  iggy context show default"),
	)
}

type contextJSON struct {
	Name   string `json:"name"`
	Active bool   `json:"active"`
}

func (a *app) contextList(mode listMode) error {
	a.executing("list contexts in %s mode", mode)
	var views []contextJSON
	var rows [][]string
	for _, name := range a.contexts.names() {
		active := name == a.contexts.activeName
		views = append(views, contextJSON{Name: name, Active: active})
		shown := name
		if active {
			shown += "*"
		}
		rows = append(rows, []string{shown})
	}
	return a.result(views, func() { a.table(mode, []string{"Name"}, rows) })
}

func (a *app) contextUse(name string) error {
	a.executing("use context %s", name)
	if _, ok := a.contexts.contexts[name]; !ok {
		return fmt.Errorf("context key '%s' is missing from contexts.toml\nhint: iggy context list", name)
	}
	if err := a.contexts.setActive(name); err != nil {
		return fmt.Errorf("cannot set the active context: %w", err)
	}
	a.say("active context set to '%s'", name)
	return nil
}

func (a *app) contextCreate(cmd *cobra.Command, name string, flags map[string]*string) error {
	a.executing("create context %s", name)
	if !validContextName(name) {
		return usageErrorf("invalid context name %q: letters, digits, '-' and '_' only", name)
	}
	if _, ok := a.contexts.contexts[name]; ok {
		return fmt.Errorf("context '%s' already exists", name)
	}
	values := contextValues{}
	for key, v := range flags {
		if cmd.Flags().Changed(strings.ReplaceAll(key, "_", "-")) {
			values[key] = *v
		}
	}
	if t, ok := values["transport"]; ok && t != "tcp" {
		return usageErrorf("invalid transport '%s' - this iggy speaks tcp only (quic, http and ws are not built yet)", t)
	}
	if s, ok := values["tcp_tls_enabled"]; ok {
		switch s {
		case "true", "false":
			values["tcp_tls_enabled"] = s == "true"
		default:
			return usageErrorf("invalid --tcp-tls-enabled %q: true or false", s)
		}
	}
	if a.contexts.dir == "" {
		return fmt.Errorf("cannot keep contexts: %w", errNoHome)
	}
	a.contexts.contexts[name] = values
	if err := a.contexts.save(); err != nil {
		return fmt.Errorf("cannot write contexts.toml: %w", err)
	}
	a.say("context '%s' created successfully", name)
	return nil
}

func (a *app) contextDelete(name string) error {
	a.executing("delete context %s", name)
	if name == defaultContext {
		return usageErrorf("the default context cannot be deleted")
	}
	if _, ok := a.contexts.contexts[name]; !ok {
		return fmt.Errorf("context '%s' not found", name)
	}
	delete(a.contexts.contexts, name)
	if err := a.contexts.save(); err != nil {
		return fmt.Errorf("cannot write contexts.toml: %w", err)
	}
	if a.contexts.activeName == name {
		if err := a.contexts.setActive(defaultContext); err != nil {
			return fmt.Errorf("cannot reset the active context: %w", err)
		}
	}
	a.say("context '%s' deleted successfully", name)
	return nil
}

func (a *app) contextShow(name string) error {
	a.executing("show context %s", name)
	values, ok := a.contexts.contexts[name]
	if !ok {
		return fmt.Errorf("context '%s' not found", name)
	}
	shown := name
	if name == a.contexts.activeName {
		shown += "*"
	}
	props := []property{{"Name", shown}}
	masked := map[string]any{}
	known := map[string]bool{}
	for _, k := range contextKeys {
		known[k.key] = true
		v, ok := values[k.key]
		if !ok {
			continue
		}
		text := tomlValueText(v)
		if k.secret {
			text, v = secretMask, secretMask
		}
		props = append(props, property{k.label, text})
		masked[k.key] = v
	}
	var unknown []string
	for k := range values {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(unknown)
	for _, k := range unknown {
		props = append(props, property{k, tomlValueText(values[k])})
		masked[k] = values[k]
	}
	return a.result(map[string]any{"name": name, "active": name == a.contexts.activeName, "settings": masked},
		func() { a.properties(props) })
}

// tomlValueText shows a TOML value as TOML writes it, strings bare.
func tomlValueText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := toml.Marshal(map[string]any{"v": v})
	if err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSpace(strings.TrimPrefix(string(b), "v = "))
}
