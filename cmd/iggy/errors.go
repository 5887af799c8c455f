package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Exit statuses: the scripting contract.
const (
	exitOK     = 0
	exitFailed = 1 // the server refused or failed the command, or it could not run
	exitUsage  = 2 // the command line is wrong
)

// usageError is a command line that cannot run: exit 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return usageError{msg: fmt.Sprintf(format, args...)}
}

// serverError is a command the server refused or failed, told in the command's
// terms.
type serverError struct {
	err    error
	target target
}

func (e serverError) Error() string { return describe(e.err, e.target) }
func (e serverError) Unwrap() error { return e.err }

// refused wraps a client call's error with what the command was working on; nil
// stays nil.
func (a *app) refused(err error) error {
	if err == nil {
		return nil
	}
	return serverError{err: err, target: a.target}
}

// describe tells a client error to a person: a protocol code by its meaning and
// number, a broken connection by what broke.
func describe(err error, t target) string {
	if errors.Is(err, context.Canceled) {
		return "interrupted"
	}
	var broken *client.ConnectionError
	if errors.As(err, &broken) {
		cause := broken.Code.Error()
		if broken.Err != nil {
			cause = broken.Err.Error()
		}
		if errors.Is(err, context.DeadlineExceeded) {
			cause = "the server did not answer in time"
		}
		return "the connection to the server broke on " + broken.Op + ": " + cause
	}
	var code wire.ErrorCode
	if errors.As(err, &code) {
		return meaning(code, t) + " (" + strconv.FormatUint(uint64(code), 10) + ")"
	}
	return err.Error()
}

// meaning says what a refusal means for the command's target. Codes without a
// sentence of their own fall back to their protocol name in words.
func meaning(code wire.ErrorCode, t target) string {
	inTopic := fmt.Sprintf("topic '%s' of stream '%s'", t.topic, t.stream)
	switch code {
	case wire.ErrStreamIdNotFound, wire.ErrStreamNameNotFound:
		return fmt.Sprintf("stream '%s' not found", t.stream)
	case wire.ErrTopicIdNotFound, wire.ErrTopicNameNotFound:
		return fmt.Sprintf("topic '%s' not found in stream '%s'", t.topic, t.stream)
	case wire.ErrPartitionNotFound:
		return fmt.Sprintf("partition %s not found in %s", t.partition, inTopic)
	case wire.ErrConsumerGroupIdNotFound, wire.ErrConsumerGroupNameNotFound:
		return fmt.Sprintf("consumer group '%s' not found in %s", t.group, inTopic)
	case wire.ErrStreamNameAlreadyExists:
		return fmt.Sprintf("a stream named '%s' already exists", t.name)
	case wire.ErrTopicNameAlreadyExists:
		return fmt.Sprintf("a topic named '%s' already exists in stream '%s'", t.name, t.stream)
	case wire.ErrConsumerGroupNameAlreadyExists:
		return fmt.Sprintf("a consumer group named '%s' already exists in %s", t.name, inTopic)
	case wire.ErrUserAlreadyExists:
		return fmt.Sprintf("a user named '%s' already exists", t.name)
	case wire.ErrPersonalAccessTokenAlreadyExists:
		return fmt.Sprintf("you already have a personal access token named '%s'", t.token)
	case wire.ErrClientNotFound:
		return fmt.Sprintf("client %s not found", t.client)
	case wire.ErrResourceNotFound:
		switch {
		case t.user != "":
			return fmt.Sprintf("user '%s' not found", t.user)
		case t.token != "":
			return fmt.Sprintf("personal access token '%s' not found", t.token)
		case t.consumer != "":
			return fmt.Sprintf("stream '%s', topic '%s', partition %s or consumer '%s' not found", t.stream, t.topic, t.partition, t.consumer)
		case t.group != "":
			return fmt.Sprintf("stream '%s', topic '%s', partition %s or consumer group '%s' not found, or the partition is not"+
				" assigned to this connection as a member of the group", t.stream, t.topic, t.partition, t.group)
		case t.stream != "":
			return fmt.Sprintf("stream '%s', its topic '%s' or the partition was not found", t.stream, t.topic)
		}
		return "not found"
	case wire.ErrConsumerOffsetNotFound:
		return fmt.Sprintf("no offset stored for consumer '%s' on partition %s of %s", t.consumer, t.partition, inTopic)
	case wire.ErrInvalidOffset:
		return fmt.Sprintf("offset beyond the last message of partition %s of %s", t.partition, inTopic)
	case wire.ErrUnauthenticated:
		return "not logged in (the session ended or was never opened)"
	case wire.ErrUnauthorized:
		return "permission denied: the logged-in user may not do this"
	case wire.ErrInvalidCredentials:
		if t.user != "" {
			return "the current password is wrong"
		}
		return "invalid username or password"
	case wire.ErrInvalidPersonalAccessToken:
		return "invalid personal access token (unknown, revoked or expired)"
	case wire.ErrPersonalAccessTokenExpired:
		return "the personal access token has expired"
	case wire.ErrInvalidUsername:
		return "invalid username: it must be 3 to 50 bytes"
	case wire.ErrInvalidPassword:
		return "invalid password: it must be 3 to 100 bytes"
	case wire.ErrCannotDeleteUser:
		return "the root user cannot be deleted"
	case wire.ErrCannotChangePermissions:
		return "the root user's permissions cannot be changed"
	case wire.ErrPersonalAccessTokensLimitReached:
		return "you have as many personal access tokens as the server allows"
	case wire.ErrInvalidPersonalAccessTokenExpiry:
		return "the token would already have expired"
	case wire.ErrInvalidTopicSize:
		return "the max topic size is below the topic's segment size"
	case wire.ErrTooManyPartitions:
		return "a topic takes 1 to 1000 partitions at a time"
	case wire.ErrInvalidPartitionsCount:
		return fmt.Sprintf("%s does not have that many partitions", inTopic)
	case wire.ErrUnsupportedOptionKey:
		return "an option key is not one this command accepts (see 'iggy options topic')"
	case wire.ErrInvalidOptionValue:
		return "an option value is invalid (see 'iggy options topic')"
	case wire.ErrFeatureUnavailable:
		return "the server does not offer this command"
	case wire.ErrTransientNotAccepted, wire.ErrTransientNotCommitted:
		return "the cluster could not take the command now (no leader, or it is catching up); try again"
	case wire.ErrInvalidTlsCertificate:
		return "the server's TLS certificate is not trusted (give its CA with --tcp-tls-ca-file, and its name with --tcp-tls-domain)"
	}
	return words(code.String())
}

// words turns a protocol name into lower-case words: "TooManyStreams" → "too many
// streams".
func words(name string) string {
	var b strings.Builder
	for i, r := range name {
		if unicode.IsUpper(r) && i > 0 {
			b.WriteByte(' ')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}
