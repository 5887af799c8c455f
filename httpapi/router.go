package httpapi

import (
	"net/http"
	"net/url"
	"strings"
)

// The router matches the reference's axum router (apache/iggy
// core/server/src/http.rs): a path matches the pattern whose static segments win over
// captures, segment by segment; a path no pattern matches is 404 with an empty body; a
// pattern matched with a method it lacks is 405 with an empty body and an allow
// header; HEAD runs a GET route; no trailing-slash or dot-segment normalisation;
// captures are percent-decoded.

// authMode says what a route needs of the Authorization header.
type authMode uint8

const (
	authPublic authMode = iota // no bearer read
	authBearer                 // a JWT or a raw personal access token
)

// endpoint is one method of a pattern.
type endpoint struct {
	method string
	auth   authMode
	// consistency marks the reads that take ?consistency= (the
	// reference's reads.rs).
	consistency bool
	// forward marks a control-plane route, which a backup relays to the primary
	// (forward.go).
	forward bool
	handle  func(rc *reqCtx) error
}

// pattern is one path of the table with its methods.
type pattern struct {
	text      string   // as written, e.g. "/streams/{stream_id}"
	segments  []string // split on "/"; "{name}" captures
	endpoints []endpoint
}

// router is the route table.
type router struct {
	patterns []*pattern
}

func (rt *router) add(method, path string, auth authMode, consistency bool, handle func(rc *reqCtx) error) {
	e := endpoint{method: method, auth: auth, consistency: consistency, forward: controlPlane(path), handle: handle}
	for _, p := range rt.patterns {
		if p.text == path {
			p.endpoints = append(p.endpoints, e)
			return
		}
	}
	rt.patterns = append(rt.patterns, &pattern{text: path, segments: strings.Split(strings.TrimPrefix(path, "/"), "/"),
		endpoints: []endpoint{e}})
}

// match finds the pattern of an escaped path and its decoded captures, in pattern
// order. ok is false when no pattern matches or a segment does not decode.
func (rt *router) match(escapedPath string) (p *pattern, captures []string, ok bool) {
	if !strings.HasPrefix(escapedPath, "/") {
		return nil, nil, false
	}
	raw := strings.Split(escapedPath[1:], "/")
	var best *pattern
	for _, cand := range rt.patterns {
		if len(cand.segments) != len(raw) || !cand.matches(raw) {
			continue
		}
		if best == nil || cand.moreStaticThan(best) {
			best = cand
		}
	}
	if best == nil {
		return nil, nil, false
	}
	for i, s := range best.segments {
		if isCapture(s) {
			v, err := url.PathUnescape(raw[i])
			if err != nil {
				return nil, nil, false
			}
			captures = append(captures, v)
		}
	}
	return best, captures, true
}

func isCapture(segment string) bool { return strings.HasPrefix(segment, "{") }

func (p *pattern) matches(raw []string) bool {
	for i, s := range p.segments {
		if isCapture(s) {
			if raw[i] == "" {
				return false
			}
		} else if s != raw[i] {
			return false
		}
	}
	return true
}

// moreStaticThan reports whether p has a static segment where q first captures.
func (p *pattern) moreStaticThan(q *pattern) bool {
	for i := range p.segments {
		ps, qs := isCapture(p.segments[i]), isCapture(q.segments[i])
		if ps != qs {
			return !ps
		}
	}
	return false
}

// endpoint finds the method's endpoint; HEAD falls back to GET.
func (p *pattern) endpoint(method string) (endpoint, bool) {
	for _, e := range p.endpoints {
		if e.method == method {
			return e, true
		}
	}
	if method == http.MethodHead {
		return p.endpoint(http.MethodGet)
	}
	return endpoint{}, false
}

// allow is the allow header of a 405: the pattern's methods, HEAD beside GET.
func (p *pattern) allow() string {
	var methods []string
	for _, e := range p.endpoints {
		methods = append(methods, e.method)
		if e.method == http.MethodGet {
			methods = append(methods, http.MethodHead)
		}
	}
	return strings.Join(methods, ",")
}

// captureNames lists the pattern's capture names in order.
func (p *pattern) captureNames() []string {
	var names []string
	for _, s := range p.segments {
		if isCapture(s) {
			names = append(names, strings.Trim(s, "{}"))
		}
	}
	return names
}
