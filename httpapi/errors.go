package httpapi

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/iggy-shard/iggy-shard/wire"
)

// apiError is a JSON error answer (apache/iggy core/server/src/http/error.rs): the
// body {"id","code","reason","field"} in that order, field null when absent.
type apiError struct {
	status     int
	ID         uint32  `json:"id"`
	Code       string  `json:"code"`
	Reason     string  `json:"reason"`
	Field      *string `json:"field"`
	retryAfter bool
}

func (e *apiError) Error() string { return e.Code + ": " + e.Reason }

// rejection is a framework rejection (axum's extractor
// rejections): a status and a text/plain
// body, written before the handler's work starts.
type rejection struct {
	status int
	text   string
}

func (r *rejection) Error() string { return r.text }

func rejectJSONSyntax(err error) error {
	return &rejection{http.StatusBadRequest, "Failed to parse the request body as JSON: " + err.Error()}
}

func rejectJSONShape(detail string) error {
	return &rejection{http.StatusUnprocessableEntity, "Failed to deserialize the JSON body into the target type: " + detail}
}

func rejectQuery(detail string) error {
	return &rejection{http.StatusBadRequest, "Failed to deserialize query string: " + detail}
}

func rejectPath(detail string) error {
	return &rejection{http.StatusBadRequest, "Invalid URL: " + detail}
}

var errBodyTooLarge = &rejection{http.StatusRequestEntityTooLarge, "Failed to buffer the request body: length limit exceeded"}

var errUnsupportedMediaType = &rejection{http.StatusUnsupportedMediaType, "Expected request with `Content-Type: application/json`"}

// The HTTP-layer errors that have no IggyError (error.rs).
var (
	errNotFound   = &apiError{status: http.StatusNotFound, ID: 404, Code: "not_found", Reason: "Resource not found"}
	errNotPrimary = &apiError{status: http.StatusServiceUnavailable, ID: 503, Code: "not_primary",
		Reason: "linearizable read requires the primary; retry against the leader", retryAfter: true}
	errCannotCommit = &apiError{status: http.StatusServiceUnavailable, ID: 9, Code: "cannot_establish_connection",
		Reason: "Cannot establish connection", retryAfter: true}
)

// statusOf is the status of an IggyError code (error.rs): 400 for every code
// the table does not name.
func statusOf(c wire.ErrorCode) int {
	switch c {
	case wire.ErrStreamIdNotFound, wire.ErrTopicIdNotFound, wire.ErrPartitionNotFound, wire.ErrSegmentNotFound,
		wire.ErrClientNotFound, wire.ErrConsumerGroupIdNotFound, wire.ErrConsumerGroupNameNotFound,
		wire.ErrConsumerGroupMemberNotFound, wire.ErrConsumerOffsetNotFound, wire.ErrResourceNotFound:
		return http.StatusNotFound
	case wire.ErrUnauthenticated, wire.ErrAccessTokenMissing, wire.ErrInvalidAccessToken, wire.ErrInvalidPersonalAccessToken:
		return http.StatusUnauthorized
	case wire.ErrUnauthorized:
		return http.StatusForbidden
	case wire.ErrTransientNotCommitted, wire.ErrTransientNotAccepted, wire.ErrCannotEstablishConnection:
		return http.StatusServiceUnavailable
	case wire.ErrInvalidClientId:
		return http.StatusConflict
	}
	return http.StatusBadRequest
}

// fieldOf is the body's field for a code (error.rs), empty for null.
func fieldOf(c wire.ErrorCode) string {
	switch c {
	case wire.ErrStreamIdNotFound, wire.ErrInvalidStreamId:
		return "stream_id"
	case wire.ErrTopicIdNotFound, wire.ErrInvalidTopicId:
		return "topic_id"
	case wire.ErrPartitionNotFound:
		return "partition_id"
	case wire.ErrSegmentNotFound:
		return "segment_id"
	case wire.ErrClientNotFound:
		return "client_id"
	case wire.ErrInvalidStreamName, wire.ErrStreamNameAlreadyExists, wire.ErrInvalidTopicName,
		wire.ErrTopicNameAlreadyExists, wire.ErrConsumerGroupNameAlreadyExists, wire.ErrPersonalAccessTokenAlreadyExists:
		return "name"
	case wire.ErrInvalidOffset:
		return "offset"
	case wire.ErrInvalidConsumerGroupId:
		return "consumer_group_id"
	case wire.ErrUserAlreadyExists:
		return "username"
	}
	return ""
}

// reasons are the reference's texts (IggyError's Display, apache/iggy
// core/common/src/error/iggy_error.rs) for the codes clients meet most, with the
// placeholders the reference shows when it rebuilds an error from its number
// (error.rs). Other codes read as their name in words.
var reasons = map[wire.ErrorCode]string{
	wire.ErrInvalidCommand:                   "Invalid command",
	wire.ErrInvalidIdentifier:                "Invalid identifier",
	wire.ErrCannotEstablishConnection:        "Cannot establish connection",
	wire.ErrResourceNotFound:                 "Resource with key:  was not found.",
	wire.ErrUnauthenticated:                  "Unauthenticated",
	wire.ErrUnauthorized:                     "Unauthorized",
	wire.ErrInvalidCredentials:               "Invalid credentials",
	wire.ErrUserInactive:                     "User inactive",
	wire.ErrUserAlreadyExists:                "User already exists",
	wire.ErrInvalidPersonalAccessToken:       "Invalid personal access token",
	wire.ErrTransientNotCommitted:            "Request transiently not committed; retry, on any replica",
	wire.ErrTransientNotAccepted:             "Request transiently not accepted; retry, on any replica",
	wire.ErrAccessTokenMissing:               "Access token is missing",
	wire.ErrInvalidAccessToken:               "Invalid access token",
	wire.ErrInvalidClientId:                  "Invalid client ID",
	wire.ErrStreamIdNotFound:                 "Stream with ID: 0 was not found.",
	wire.ErrStreamNameAlreadyExists:          "Stream with name:  already exists.",
	wire.ErrTopicIdNotFound:                  "Topic with ID: 0 for stream with ID: 0 was not found.",
	wire.ErrTopicNameAlreadyExists:           "Topic with name:  for stream with ID: 0 already exists.",
	wire.ErrPartitionNotFound:                "Partition with ID: 0 for topic with ID: 0 for stream with ID: 0 was not found.",
	wire.ErrConsumerGroupIdNotFound:          "Consumer group with ID: 0 for topic with ID: 0 was not found.",
	wire.ErrConsumerGroupNameAlreadyExists:   "Consumer group with name:  for topic with ID: 0 already exists.",
	wire.ErrConsumerOffsetNotFound:           "Consumer offset for consumer with ID: 0 was not found.",
	wire.ErrPersonalAccessTokenAlreadyExists: "Personal access token:  for user with ID: 0 already exists",
	wire.ErrInvalidOffset:                    "Invalid offset: 0",
}

// errorFromCode is the JSON error of an IggyError code.
func errorFromCode(c wire.ErrorCode) *apiError {
	e := &apiError{status: statusOf(c), ID: uint32(c), Code: snakeCase(c.String()), Reason: reasons[c]}
	if e.Reason == "" {
		e.Reason = inWords(e.Code)
	}
	if f := fieldOf(c); f != "" {
		e.Field = &f
	}
	e.retryAfter = e.status == http.StatusServiceUnavailable
	return e
}

// snakeCase turns an IggyError variant name into the reference's code:
// "StreamIdNotFound" is "stream_id_not_found", "TcpError" "tcp_error".
func snakeCase(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'A' && c <= 'Z' {
			prevLower := i > 0 && (name[i-1] >= 'a' && name[i-1] <= 'z' || name[i-1] >= '0' && name[i-1] <= '9')
			nextLower := i > 0 && i+1 < len(name) && name[i+1] >= 'a' && name[i+1] <= 'z' && name[i-1] >= 'A' && name[i-1] <= 'Z'
			if prevLower || nextLower {
				b.WriteByte('_')
			}
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
	return b.String()
}

// inWords is a code read as a sentence: "invalid_offset" is "Invalid offset".
func inWords(code string) string {
	s := strings.ReplaceAll(code, "_", " ")
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// writeError answers err: a rejection as text, an apiError or a wire.ErrorCode as
// JSON; anything else is a failure to reach the server's planes, answered as the
// reference answers a write it could not submit (503, id 9) and logged.
func writeError(w http.ResponseWriter, log *slog.Logger, route string, err error) {
	var rej *rejection
	if errors.As(err, &rej) {
		h := w.Header()
		h.Set("Content-Type", "text/plain; charset=utf-8")
		if rej.status == http.StatusRequestEntityTooLarge {
			h.Set("Connection", "close")
		}
		w.WriteHeader(rej.status)
		_, _ = w.Write([]byte(rej.text))
		return
	}
	var ae *apiError
	var code wire.ErrorCode
	switch {
	case errors.As(err, &ae):
	case errors.As(err, &code):
		ae = errorFromCode(code)
	default:
		log.Warn("http: the request could not be served", "route", route, "err", err)
		ae = errCannotCommit
	}
	if ae.retryAfter || ae.status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, ae.status, ae)
}

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		// Every value passed here is built by this package: a failure is its bug.
		panic("httpapi: encoding a reply: " + err.Error())
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
