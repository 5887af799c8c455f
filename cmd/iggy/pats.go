package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/jsonview"
	"github.com/iggy-shard/iggy-shard/wire"
)

func (a *app) patCommand() *cobra.Command {
	create := leaf("create [flags] <NAME> [EXPIRY]...", "c", "Create personal access token", minArgs(1), nil)
	create.Long = "Create personal access token with the given name and lifetime (durations that are summed, e.g.\n" +
		"15days 2min 2s; none or unlimited, or nothing, for a token that never expires).\n\n" +
		"The token is shown once; with --quiet only the token is printed, for scripts."
	create.Example = "  iggy pat create name\n  iggy pat create client 1day\n  iggy pat create sensor 3weeks\n  iggy pat create ci --store-token"
	store := create.Flags().BoolP("store-token", "s", false,
		"Keep the token (in a file only you can read, under IGGY_HOME) instead of printing it; use it with -n NAME")
	create.RunE = func(cmd *cobra.Command, args []string) error { return a.patCreate(cmd, args, *store) }

	list := leaf("list [flags]", "l", "List all personal access tokens", exactArgs(0), nil)
	var mode listMode
	addListMode(list, &mode)
	list.RunE = func(cmd *cobra.Command, _ []string) error { return a.patList(cmd, mode) }

	return groupCommand("pat", "", "personal access token operations",
		create,
		example(leaf("delete <NAME>", "d", "Delete personal access token with given name", exactArgs(1), a.patDelete), "  iggy pat delete client"),
		list,
	)
}

// tokenLifetime reads the EXPIRY arguments of pat create and login: microseconds
// for the server, 0 for "never", and the words for the explain line.
func tokenLifetime(parts []string, fallback time.Duration) (micros uint64, lifetime time.Duration, err error) {
	if len(parts) == 0 {
		if fallback == 0 {
			return wire.TokenExpiryNever, 0, nil
		}
		return uint64(fallback / time.Microsecond), fallback, nil
	}
	d, never, err := parseExpiryParts(parts)
	switch {
	case err != nil:
		return 0, 0, usageErrorf("invalid expiry: %v", err)
	case never:
		return wire.TokenExpiryNever, 0, nil
	case d == 0:
		// server_default: a token that never expires.
		return wire.TokenExpiryNever, 0, nil
	}
	return uint64(d / time.Microsecond), d, nil
}

func expirySuffix(lifetime time.Duration) string {
	if lifetime == 0 {
		return "without token expire time"
	}
	return "token expire time: " + formatHumanDuration(lifetime)
}

func (a *app) patCreate(cmd *cobra.Command, args []string, store bool) error {
	name := args[0]
	if store && len(args) > 1 {
		return usageErrorf("--store-token cannot be given with an EXPIRY")
	}
	micros, lifetime, err := tokenLifetime(args[1:], 0)
	if err != nil {
		return err
	}
	what := "personal access token with name: " + name + " and " + expirySuffix(lifetime)
	return a.call(cmd, target{token: name}, "create "+what, func(ctx context.Context, c *client.Client) error {
		token, err := c.CreatePersonalAccessToken(ctx, name, micros)
		if err != nil {
			return err
		}
		if store {
			if err := storeToken(a.home, a.conn.address, name, token); err != nil {
				return fmt.Errorf("the token %s was created but could not be stored: %w\nhint: delete it with 'iggy pat delete %s'", name, err, name)
			}
			a.say("Personal access token with name: %s and %s created (stored; log in with -n %s)", name, expirySuffix(lifetime), name)
			return nil
		}
		if a.flags.quiet {
			// The token is shown only once: in quiet mode it is the whole output.
			_, err := fmt.Fprintln(a.io.out, token)
			return err
		}
		return a.result(map[string]string{"token": token}, func() {
			a.say("%s created", capitalize(what))
			a.say("Token: %s", token)
		})
	})
}

func capitalize(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

func (a *app) patDelete(cmd *cobra.Command, args []string) error {
	name := args[0]
	return a.call(cmd, target{token: name}, "delete personal access tokens with name: "+name, func(ctx context.Context, c *client.Client) error {
		if err := c.DeletePersonalAccessToken(ctx, name); err != nil {
			return err
		}
		if _, err := forgetToken(a.home, a.conn.address, name); err != nil {
			return fmt.Errorf("the token %s was deleted on the server, but its stored copy could not be removed: %w", name, err)
		}
		a.say("Personal access token with name: %s deleted", name)
		return nil
	})
}

func (a *app) patList(cmd *cobra.Command, mode listMode) error {
	return a.call(cmd, target{}, "list personal access tokens in "+string(mode)+" mode", func(ctx context.Context, c *client.Client) error {
		tokens, err := c.GetPersonalAccessTokens(ctx)
		if err != nil {
			return err
		}
		views := make([]jsonview.PersonalAccessToken, len(tokens))
		rows := make([][]string, len(tokens))
		for i := range tokens {
			t := &tokens[i]
			views[i] = jsonview.PersonalAccessTokenOf(t)
			expiry := "unlimited"
			if t.ExpiryAtMicros != 0 {
				expiry = localTime(t.ExpiryAtMicros)
			}
			rows[i] = []string{string(t.Name), expiry}
		}
		return a.result(views, func() {
			a.table(mode, []string{"Name", "Token Expiry Time"}, rows)
		})
	})
}
