package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/jsonview"
	"github.com/iggy-shard/iggy-shard/wire"
)

// userStatus is a user's active/inactive argument or flag.
type userStatus wire.UserStatus

func (s *userStatus) String() string { return jsonview.UserStatusName(uint8(*s)) }
func (s *userStatus) Type() string   { return "active|inactive" }
func (s *userStatus) Set(v string) error {
	switch v {
	case "active":
		*s = userStatus(wire.UserActive)
	case "inactive":
		*s = userStatus(wire.UserInactive)
	default:
		return fmt.Errorf("%q is not active or inactive", v)
	}
	return nil
}

// permissionFlags are the -g and -s of user create and user permissions.
type permissionFlags struct {
	global  string
	streams []string
}

func addPermissionFlags(cmd *cobra.Command) *permissionFlags {
	p := &permissionFlags{}
	cmd.Flags().StringVarP(&p.global, "global-permissions", "g", "",
		"Global permissions, comma-separated: "+longNames(globalPermissionNames[:]))
	cmd.Flags().StringArrayVarP(&p.streams, "stream-permissions", "s", nil,
		"Permissions on a stream and its topics, STREAM_ID[:PERMS][#TOPIC_ID[:PERMS]]..., repeat for more streams;\n"+
			"stream PERMS: "+longNames(streamPermissionNames[:])+";\ntopic PERMS: "+longNames(topicPermissionNames[:]))
	return p
}

func (p *permissionFlags) parse(cmd *cobra.Command) (*wire.Permissions, error) {
	return parsePermissions(p.global, cmd.Flags().Changed("global-permissions"), p.streams)
}

func (a *app) userCommand() *cobra.Command {
	create := leaf("create [flags] <USERNAME> [PASSWORD]", "c", "Create user with given username and password", rangeArgs(1, 2), nil)
	create.Long = "Create user with given username and password (asked for when not given), status and permissions."
	create.Example = "  iggy user create testuser 'pass#1%X!'\n  iggy user create guest guess --user-status inactive\n" +
		"  iggy user create guest guess --global-permissions p_msg,s_msg\n  iggy user create guest guest -s 1:manage_topics,read_topics\n" +
		"  iggy user create user1 test12 -s 4:manage_stream,r_top#1:s_msg,p_msg#2:manage_topic"
	status := userStatus(wire.UserActive)
	create.Flags().VarP(&status, "user-status", "u", "User status: active or inactive")
	createPerms := addPermissionFlags(create)
	create.RunE = func(cmd *cobra.Command, args []string) error {
		return a.userCreate(cmd, args, wire.UserStatus(status), createPerms)
	}

	list := leaf("list [flags]", "l", "List all users", exactArgs(0), nil)
	var mode listMode
	addListMode(list, &mode)
	list.RunE = func(cmd *cobra.Command, _ []string) error { return a.userList(cmd, mode) }

	permissions := leaf("permissions [flags] <USER_ID>", "p", "Set permissions for user with given ID (none when neither -g nor -s is given)", exactArgs(1), nil)
	permissions.Example = "  iggy user permissions 2\n  iggy user permissions 2 -g r_str,p_msg -s 1:s_msg"
	setPerms := addPermissionFlags(permissions)
	permissions.RunE = func(cmd *cobra.Command, args []string) error { return a.userPermissions(cmd, args, setPerms) }

	return groupCommand("user", "u", "user operations",
		create,
		example(leaf("delete <USER_ID>", "d", "Delete user with given ID", exactArgs(1), a.userDelete), "  iggy user delete 2\n  iggy user delete testuser"),
		example(leaf("get <USER_ID>", "g", "Get details of a single user with given ID", exactArgs(1), a.userGet), "  iggy user get 2\n  iggy user get testuser"),
		list,
		example(leaf("name <USER_ID> <USERNAME>", "n", "Change username for user with given ID", exactArgs(2), a.userName), "  iggy user name 2 new_user_name"),
		example(leaf("status <USER_ID> <STATUS>", "s", "Change status (active or inactive) of user with given ID", exactArgs(2), a.userStatusChange),
			"  iggy user status testuser inactive"),
		example(leaf("password <USER_ID> [CURRENT_PASSWORD] [NEW_PASSWORD]", "pwd",
			"Change password for user with given ID (the passwords not given are asked for)", rangeArgs(1, 3), a.userPassword),
			"  iggy user password 3\n  iggy user password 3 current_password new_password"),
		permissions,
	)
}

func (a *app) userCreate(cmd *cobra.Command, args []string, status wire.UserStatus, perms *permissionFlags) error {
	permissions, err := perms.parse(cmd)
	if err != nil {
		return err
	}
	username := args[0]
	return a.call(cmd, target{name: username}, "create user with username: "+username, func(ctx context.Context, c *client.Client) error {
		password := ""
		if len(args) == 2 {
			password = args[1]
		} else if password, err = a.readSecret("Password for " + username + ": "); err != nil {
			return err
		}
		u, err := c.CreateUser(ctx, username, password, status, permissions)
		if err != nil {
			return err
		}
		return a.result(jsonview.UserDetailsOf(u), func() {
			a.say("User with username: %s and ID: %d created", username, u.ID)
		})
	})
}

func (a *app) userDelete(cmd *cobra.Command, args []string) error {
	user, err := parseIdentifier("user ID", args[0])
	if err != nil {
		return err
	}
	return a.call(cmd, target{user: args[0]}, "delete user with ID: "+args[0], func(ctx context.Context, c *client.Client) error {
		if err := c.DeleteUser(ctx, user); err != nil {
			return err
		}
		a.say("User with ID: %s deleted", args[0])
		return nil
	})
}

func (a *app) userGet(cmd *cobra.Command, args []string) error {
	user, err := parseIdentifier("user ID", args[0])
	if err != nil {
		return err
	}
	return a.call(cmd, target{user: args[0]}, "get user with ID: "+args[0], func(ctx context.Context, c *client.Client) error {
		u, err := c.GetUser(ctx, user)
		if err != nil {
			return err
		}
		return a.result(jsonview.UserDetailsOf(u), func() {
			props := []property{
				{"User ID", strconv.FormatUint(uint64(u.ID), 10)},
				{"Created", localTime(u.CreatedAtMicros)},
				{"Status", jsonview.UserStatusName(u.Status)},
				{"Username", string(u.Username)},
				{"Permissions", "none"},
			}
			if u.HasPermissions {
				props[4].value = permissionsText(&u.Permissions)
			}
			a.properties(props)
		})
	})
}

func (a *app) userList(cmd *cobra.Command, mode listMode) error {
	return a.call(cmd, target{}, "list users in "+string(mode)+" mode", func(ctx context.Context, c *client.Client) error {
		users, err := c.GetUsers(ctx)
		if err != nil {
			return err
		}
		views := make([]jsonview.User, len(users))
		rows := make([][]string, len(users))
		for i := range users {
			u := &users[i]
			views[i] = jsonview.UserOf(u)
			rows[i] = []string{strconv.FormatUint(uint64(u.ID), 10), localTime(u.CreatedAtMicros), jsonview.UserStatusName(u.Status), string(u.Username)}
		}
		return a.result(views, func() {
			if len(rows) == 0 {
				a.say("No users found!")
				return
			}
			a.table(mode, []string{"ID", "Created", "Status", "Username"}, rows)
		})
	})
}

func (a *app) userName(cmd *cobra.Command, args []string) error {
	user, err := parseIdentifier("user ID", args[0])
	if err != nil {
		return err
	}
	name := args[1]
	explain := "update user with ID: " + args[0] + " with username: " + name
	return a.call(cmd, target{user: args[0], name: name}, explain, func(ctx context.Context, c *client.Client) error {
		if err := c.UpdateUser(ctx, user, client.UserUpdate{Username: name}); err != nil {
			return err
		}
		a.say("User with ID: %s updated with username: %s", args[0], name)
		return nil
	})
}

func (a *app) userStatusChange(cmd *cobra.Command, args []string) error {
	user, err := parseIdentifier("user ID", args[0])
	if err != nil {
		return err
	}
	var status userStatus
	if err := status.Set(args[1]); err != nil {
		return usageErrorf("invalid status: %v", err)
	}
	explain := "update user with ID: " + args[0] + " with status: " + args[1]
	return a.call(cmd, target{user: args[0]}, explain, func(ctx context.Context, c *client.Client) error {
		if err := c.UpdateUser(ctx, user, client.UserUpdate{Status: wire.UserStatus(status)}); err != nil {
			return err
		}
		a.say("User with ID: %s updated with status: %s", args[0], args[1])
		return nil
	})
}

func (a *app) userPassword(cmd *cobra.Command, args []string) error {
	user, err := parseIdentifier("user ID", args[0])
	if err != nil {
		return err
	}
	passwords := args[1:]
	return a.call(cmd, target{user: args[0]}, "change password for user with ID: "+args[0], func(ctx context.Context, c *client.Client) error {
		for i, prompt := range []string{"Current password: ", "New password: "} {
			if len(passwords) <= i {
				p, err := a.readSecret(prompt)
				if err != nil {
					return err
				}
				passwords = append(passwords, p)
			}
		}
		if err := c.ChangePassword(ctx, user, passwords[0], passwords[1]); err != nil {
			return err
		}
		a.say("Password for user with ID: %s changed", args[0])
		return nil
	})
}

func (a *app) userPermissions(cmd *cobra.Command, args []string, perms *permissionFlags) error {
	user, err := parseIdentifier("user ID", args[0])
	if err != nil {
		return err
	}
	permissions, err := perms.parse(cmd)
	if err != nil {
		return err
	}
	return a.call(cmd, target{user: args[0]}, "update permissions for user with ID: "+args[0], func(ctx context.Context, c *client.Client) error {
		if err := c.UpdatePermissions(ctx, user, permissions); err != nil {
			return err
		}
		a.say("Permissions for user with ID: %s updated", args[0])
		return nil
	})
}
