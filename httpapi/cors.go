package httpapi

import (
	"net/http"
	"slices"
	"strings"

	"github.com/iggy-shard/iggy-shard/config"
)

// corsPolicy is [http.cors] as the reference's tower-http layer applies it
// (apache/iggy core/server/src/http.rs): every OPTIONS request is answered 200 by the
// layer itself, and every other answer carries vary, the allowed origin and the
// exposed headers.
type corsPolicy struct {
	anyOrigin      bool
	origins        []string
	methods        string
	headers        string
	exposed        string
	credentials    bool
	privateNetwork bool
}

const corsVary = "origin, access-control-request-method, access-control-request-headers"

func newCORSPolicy(c config.CORS) *corsPolicy {
	p := &corsPolicy{
		methods:        strings.Join(upper(c.AllowedMethods), ","),
		headers:        strings.Join(c.AllowedHeaders, ","),
		exposed:        strings.Join(c.ExposedHeaders, ","),
		credentials:    c.AllowCredentials,
		privateNetwork: c.AllowPrivateNetwork,
	}
	if len(c.AllowedOrigins) > 0 && c.AllowedOrigins[0] == "*" {
		p.anyOrigin = true
	} else {
		p.origins = c.AllowedOrigins
	}
	return p
}

func upper(l []string) []string {
	out := make([]string, len(l))
	for i, s := range l {
		out[i] = strings.ToUpper(s)
	}
	return out
}

func (p *corsPolicy) origin(h, req http.Header) {
	if p.anyOrigin {
		h.Set("Access-Control-Allow-Origin", "*")
	} else if o := req.Get("Origin"); o != "" && slices.Contains(p.origins, o) {
		h.Set("Access-Control-Allow-Origin", o)
	}
	if p.credentials {
		h.Set("Access-Control-Allow-Credentials", "true")
	}
}

// preflight writes the headers of the layer's answer to an OPTIONS request.
func (p *corsPolicy) preflight(h, req http.Header) {
	h.Set("Vary", corsVary)
	p.origin(h, req)
	if p.methods != "" {
		h.Set("Access-Control-Allow-Methods", p.methods)
	}
	if p.headers != "" {
		h.Set("Access-Control-Allow-Headers", p.headers)
	}
	if p.privateNetwork && req.Get("Access-Control-Request-Private-Network") == "true" {
		h.Set("Access-Control-Allow-Private-Network", "true")
	}
}

// decorate writes the headers every other answer carries.
func (p *corsPolicy) decorate(h, req http.Header) {
	h.Set("Vary", corsVary)
	p.origin(h, req)
	if p.exposed != "" {
		h.Set("Access-Control-Expose-Headers", p.exposed)
	}
}
