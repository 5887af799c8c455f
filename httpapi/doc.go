// Package httpapi is Apache Iggy's HTTP REST transport: the route table of the
// reference server (apache/iggy core/server/src/http/), JSON in and out with the
// reference's field names and types, bearer authentication with JWTs and personal
// access tokens, CORS, and the net/http server that serves it.
//
// It implements no command. Each route decodes its JSON into the request type of
// the binary protocol (wire/request_*.go), encodes it with that type's Append,
// runs it through Backend.Do, the seam the binary protocol's handler runs through
// too, and renders the reply type (wire/reply_*.go, decoded with its Decode) as
// the reference's JSON. So a stream created over HTTP is the same stream over TCP,
// with the same permissions, limits and errors.
//
// The files, by concept: backend.go (the seam to the server), api.go (a request's
// way: CORS, route, body limit, bearer, handler, panic recovery), router.go
// (paths, methods, 404 and 405), errors.go (error bodies and statuses),
// jsontypes.go, permissions.go and messages.go (the JSON types), one file per
// group of routes (routes_*.go), auth.go and jwt.go (bearers), trusted.go (the
// bearers of trusted external issuers, verified with their JWKS), cors.go,
// forward.go (a backup relaying control-plane requests to the primary), server.go
// (the listener and its bounds).
//
// The messages routes carry the data and skip encoding/json on their way:
// send_scan.go reads a send's body in one pass straight into the batch (any body
// it does not take goes to the encoding/json decoder in messages.go, whose answer
// it must match), poll_write.go writes a poll's answer straight from the wire
// reply, and base64_*.go are their base64. Each is fuzzed against what it replaces.
//
// Tokens are signed and verified with github.com/golang-jwt/jwt/v5 rather than by
// hand: the checks a verifier must make (the algorithm pinned, expiry, not-before,
// issuer and audience, leeway) are easy to get subtly wrong, and that package is
// the Go ecosystem's reviewed implementation of them.
package httpapi
