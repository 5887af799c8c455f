package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"
)

// HTTP is Apache Iggy's [http] section (apache/iggy core/server/config.toml and
// core/configs/src/common/http.rs), with its key names, defaults and IGGY_HTTP_*
// environment variables (the TOML path upper-cased, dots as underscores):
//
//	[http]
//	enabled = true                      # IGGY_HTTP_ENABLED
//	address = "127.0.0.1:3000"          # IGGY_HTTP_ADDRESS
//	max_request_size = "2 MB"           # IGGY_HTTP_MAX_REQUEST_SIZE: request bodies (413 above)
//	max_connections = 1024              # ours, IGGY_HTTP_MAX_CONNECTIONS: open connections at once
//	web_ui = false                      # IGGY_HTTP_WEB_UI: serve apache/iggy's Web UI at /ui
//	web_ui_dir = ""                     # ours, IGGY_HTTP_WEB_UI_DIR: its static build (web/build/static)
//	[http.cors]
//	enabled = true                      # IGGY_HTTP_CORS_ENABLED
//	allowed_methods = ["GET", "POST", "PUT", "DELETE"]
//	allowed_origins = ["*"]
//	allowed_headers = ["content-type", "authorization"]
//	exposed_headers = ["iggy-view"]
//	allow_credentials = false
//	allow_private_network = false
//	[http.jwt]
//	algorithm = "HS256"                 # HS256, HS384 or HS512
//	issuer = "iggy.apache.org"
//	audience = "iggy.apache.org"
//	valid_issuers = ["iggy.apache.org"]
//	valid_audiences = ["iggy.apache.org"]
//	access_token_expiry = "1 h"         # or "none": iat + 1,000,000,000 s
//	clock_skew = "5 s"
//	not_before = "0 s"
//	encoding_secret = ""                # both empty: derived from cluster.auth.shared_secret,
//	decoding_secret = ""                # else random per start
//	use_base64_secret = false
//	[http.metrics]
//	enabled = true
//	endpoint = "/metrics"
//	[http.tls]
//	enabled = false
//	self_signed = true                  # ours, as [tcp.tls]
//	cert_file = "core/certs/iggy_cert.pem"
//	key_file = "core/certs/iggy_key.pem"
//
// Lists in the environment are written "[a, b]" (elements may be quoted) or "a,b".
// [[http.jwt.trusted_issuers]] lists external issuers whose tokens are verified
// through their JWKS (the reference's optional A2A bearers): each entry's issuer,
// audience, jwks_url and user_id, at most TrustedIssuersMax of them; in the
// environment IGGY_HTTP_JWT_TRUSTED_ISSUERS_<i>_{ISSUER,AUDIENCE,JWKS_URL,USER_ID}
// sets entry i (an entry of the file at the same index is replaced field by
// field). The entries' contents are checked where they are used (httpapi.New).
type HTTP struct {
	Enabled             bool
	Address             string
	RequestSizeMaxBytes uint64
	// ConnectionsMax bounds the open HTTP connections; more wait in the listen
	// backlog until one closes.
	ConnectionsMax int
	// WebUI serves the Web UI at /ui from WebUIDir, a directory holding the
	// static build of apache/iggy web/ (`npm run build:static`: web/build/static),
	// which the reference embeds in its binary and we do not.
	WebUI           bool
	WebUIDir        string
	CORS            CORS
	JWT             JWT
	MetricsEnabled  bool
	MetricsEndpoint string
	TLS             TLS
}

// CORS is [http.cors].
type CORS struct {
	Enabled             bool
	AllowedMethods      []string
	AllowedOrigins      []string
	AllowedHeaders      []string
	ExposedHeaders      []string
	AllowCredentials    bool
	AllowPrivateNetwork bool
}

// JWT is [http.jwt].
type JWT struct {
	Algorithm      string
	Issuer         string
	Audience       string
	ValidIssuers   []string
	ValidAudiences []string
	// AccessTokenExpiry is a token's lifetime; AccessTokenNeverExpires is the
	// reference's "none" (exp = iat + 1,000,000,000 s).
	AccessTokenExpiry       time.Duration
	AccessTokenNeverExpires bool
	ClockSkew               time.Duration
	NotBefore               time.Duration
	EncodingSecret          string
	DecodingSecret          string
	UseBase64Secret         bool
	TrustedIssuers          []TrustedIssuer
}

// TrustedIssuer is one [[http.jwt.trusted_issuers]] entry: tokens whose iss is
// Issuer, verified with a key of the JWKS at JWKSURL and carrying Audience, act
// as the user UserID.
type TrustedIssuer struct {
	Issuer   string
	Audience string
	JWKSURL  string
	UserID   uint32
}

// TrustedIssuersMax bounds [[http.jwt.trusted_issuers]].
const TrustedIssuersMax = 256

// HTTPConnectionsMaxDefault is the default cap on open HTTP connections.
const HTTPConnectionsMaxDefault = 1024

// DefaultHTTP is the reference's [http] defaults.
func DefaultHTTP() HTTP {
	return HTTP{
		Enabled:             true,
		Address:             "127.0.0.1:3000",
		RequestSizeMaxBytes: 2_000_000,
		ConnectionsMax:      HTTPConnectionsMaxDefault,
		CORS: CORS{
			Enabled:        true,
			AllowedMethods: []string{"GET", "POST", "PUT", "DELETE"},
			AllowedOrigins: []string{"*"},
			AllowedHeaders: []string{"content-type", "authorization"},
			ExposedHeaders: []string{"iggy-view"},
		},
		JWT: JWT{
			Algorithm:         "HS256",
			Issuer:            "iggy.apache.org",
			Audience:          "iggy.apache.org",
			ValidIssuers:      []string{"iggy.apache.org"},
			ValidAudiences:    []string{"iggy.apache.org"},
			AccessTokenExpiry: time.Hour,
			ClockSkew:         5 * time.Second,
		},
		MetricsEnabled:  true,
		MetricsEndpoint: "/metrics",
		TLS: TLS{
			SelfSigned: true,
			CertFile:   "core/certs/iggy_cert.pem",
			KeyFile:    "core/certs/iggy_key.pem",
		},
	}
}

// httpSetting is one key of [http]: its TOML path (the environment variable is
// derived from it) and how its text form is applied. File values reach set in the
// same text form as the environment's, so the two cannot read a key differently.
type httpSetting struct {
	key string
	set func(h *HTTP, v string) error
}

var errNotBool = fmt.Errorf("not true or false")

func boolSetting(key string, dst func(h *HTTP) *bool) httpSetting {
	return httpSetting{key, func(h *HTTP, v string) error {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return errNotBool
		}
		*dst(h) = on
		return nil
	}}
}

func stringSetting(key string, dst func(h *HTTP) *string) httpSetting {
	return httpSetting{key, func(h *HTTP, v string) error { *dst(h) = v; return nil }}
}

func listSetting(key string, dst func(h *HTTP) *[]string) httpSetting {
	return httpSetting{key, func(h *HTTP, v string) error { *dst(h) = parseList(v); return nil }}
}

func durationSetting(key string, dst func(h *HTTP) *time.Duration) httpSetting {
	return httpSetting{key, func(h *HTTP, v string) error {
		d, err := ParseDuration(v)
		if err != nil {
			return err
		}
		if d < 0 {
			return fmt.Errorf("must not be negative")
		}
		*dst(h) = d
		return nil
	}}
}

var httpSettings = []httpSetting{
	boolSetting("http.enabled", func(h *HTTP) *bool { return &h.Enabled }),
	stringSetting("http.address", func(h *HTTP) *string { return &h.Address }),
	{"http.max_request_size", func(h *HTTP, v string) error {
		n, err := ParseSizeBytes(v)
		if err != nil {
			return fmt.Errorf("not a size (e.g. \"2 MB\")")
		}
		h.RequestSizeMaxBytes = n
		return nil
	}},
	{"http.max_connections", func(h *HTTP, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("not a whole number")
		}
		h.ConnectionsMax = n
		return nil
	}},
	boolSetting("http.web_ui", func(h *HTTP) *bool { return &h.WebUI }),
	stringSetting("http.web_ui_dir", func(h *HTTP) *string { return &h.WebUIDir }),
	boolSetting("http.cors.enabled", func(h *HTTP) *bool { return &h.CORS.Enabled }),
	listSetting("http.cors.allowed_methods", func(h *HTTP) *[]string { return &h.CORS.AllowedMethods }),
	listSetting("http.cors.allowed_origins", func(h *HTTP) *[]string { return &h.CORS.AllowedOrigins }),
	listSetting("http.cors.allowed_headers", func(h *HTTP) *[]string { return &h.CORS.AllowedHeaders }),
	listSetting("http.cors.exposed_headers", func(h *HTTP) *[]string { return &h.CORS.ExposedHeaders }),
	boolSetting("http.cors.allow_credentials", func(h *HTTP) *bool { return &h.CORS.AllowCredentials }),
	boolSetting("http.cors.allow_private_network", func(h *HTTP) *bool { return &h.CORS.AllowPrivateNetwork }),
	stringSetting("http.jwt.algorithm", func(h *HTTP) *string { return &h.JWT.Algorithm }),
	stringSetting("http.jwt.issuer", func(h *HTTP) *string { return &h.JWT.Issuer }),
	stringSetting("http.jwt.audience", func(h *HTTP) *string { return &h.JWT.Audience }),
	listSetting("http.jwt.valid_issuers", func(h *HTTP) *[]string { return &h.JWT.ValidIssuers }),
	listSetting("http.jwt.valid_audiences", func(h *HTTP) *[]string { return &h.JWT.ValidAudiences }),
	{"http.jwt.access_token_expiry", func(h *HTTP, v string) error {
		if s := strings.TrimSpace(v); s == "none" || s == "never" || s == "unlimited" {
			h.JWT.AccessTokenNeverExpires, h.JWT.AccessTokenExpiry = true, 0
			return nil
		}
		d, err := ParseDuration(v)
		if err != nil || d < 0 {
			return fmt.Errorf("not a duration (e.g. \"1 h\") or \"none\"")
		}
		h.JWT.AccessTokenNeverExpires, h.JWT.AccessTokenExpiry = false, d
		return nil
	}},
	durationSetting("http.jwt.clock_skew", func(h *HTTP) *time.Duration { return &h.JWT.ClockSkew }),
	durationSetting("http.jwt.not_before", func(h *HTTP) *time.Duration { return &h.JWT.NotBefore }),
	stringSetting("http.jwt.encoding_secret", func(h *HTTP) *string { return &h.JWT.EncodingSecret }),
	stringSetting("http.jwt.decoding_secret", func(h *HTTP) *string { return &h.JWT.DecodingSecret }),
	boolSetting("http.jwt.use_base64_secret", func(h *HTTP) *bool { return &h.JWT.UseBase64Secret }),
	boolSetting("http.metrics.enabled", func(h *HTTP) *bool { return &h.MetricsEnabled }),
	stringSetting("http.metrics.endpoint", func(h *HTTP) *string { return &h.MetricsEndpoint }),
	boolSetting("http.tls.enabled", func(h *HTTP) *bool { return &h.TLS.Enabled }),
	boolSetting("http.tls.self_signed", func(h *HTTP) *bool { return &h.TLS.SelfSigned }),
	stringSetting("http.tls.cert_file", func(h *HTTP) *string { return &h.TLS.CertFile }),
	stringSetting("http.tls.key_file", func(h *HTTP) *string { return &h.TLS.KeyFile }),
}

// envName is a key's environment variable: IGGY_ and the path upper-cased.
func envName(key string) string {
	return "IGGY_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// secretKeys are never echoed in an error.
func isSecretKey(key string) bool { return strings.HasSuffix(key, "_secret") }

func shown(key, v string) string {
	if isSecretKey(key) {
		return "(hidden)"
	}
	return v
}

// applyFile applies the [http] table of the TOML file, flattened to dotted keys.
func (h *HTTP) applyFile(table map[string]any) error {
	if jwt, ok := table["jwt"].(map[string]any); ok {
		if entries, ok := jwt["trusted_issuers"]; ok {
			issuers, err := trustedIssuersFromTOML(entries)
			if err != nil {
				return err
			}
			h.JWT.TrustedIssuers = issuers
			delete(jwt, "trusted_issuers")
		}
	}
	flat := map[string]string{}
	if err := flattenTOML("http", table, flat); err != nil {
		return err
	}
	keys := make([]string, 0, len(flat))
	for k := range flat {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	byKey := map[string]httpSetting{}
	for _, s := range httpSettings {
		byKey[s.key] = s
	}
	for _, k := range keys {
		s, ok := byKey[k]
		if !ok {
			return &SettingError{Setting: k, Value: "", Reason: "unknown key"}
		}
		if err := s.set(h, flat[k]); err != nil {
			return &SettingError{Setting: k, Value: shown(k, flat[k]), Reason: err.Error()}
		}
	}
	return nil
}

// flattenTOML turns a decoded TOML table into dotted keys and text values in the
// environment's notation.
func flattenTOML(prefix string, table map[string]any, out map[string]string) error {
	for k, v := range table {
		key := prefix + "." + k
		switch v := v.(type) {
		case map[string]any:
			if err := flattenTOML(key, v, out); err != nil {
				return err
			}
		case []map[string]any:
			return &SettingError{Setting: key, Value: "", Reason: "unknown key"}
		case []any:
			parts := make([]string, len(v))
			for i, e := range v {
				s, ok := e.(string)
				if !ok {
					return &SettingError{Setting: key, Value: fmt.Sprint(v), Reason: "must be a list of strings"}
				}
				parts[i] = s
			}
			out[key] = strings.Join(parts, ",")
		case string:
			out[key] = v
		case bool:
			out[key] = strconv.FormatBool(v)
		case int64:
			out[key] = strconv.FormatInt(v, 10)
		default:
			return &SettingError{Setting: key, Value: fmt.Sprint(v), Reason: "not a string, number, boolean or list"}
		}
	}
	return nil
}

// applyEnv applies the IGGY_HTTP_* variables; an empty value is ignored, as the
// reference does. environ lists the variables set (os.Environ), for those whose
// names are not fixed (applyTrustedIssuersEnv).
func (h *HTTP) applyEnv(getenv func(string) string, environ []string) error {
	for _, s := range httpSettings {
		name := envName(s.key)
		v := getenv(name)
		if v == "" {
			continue
		}
		if err := s.set(h, v); err != nil {
			return &SettingError{Setting: name, Value: shown(s.key, v), Reason: err.Error()}
		}
	}
	return h.applyTrustedIssuersEnv(getenv, environ)
}

// trustedIssuersFromTOML reads [[http.jwt.trusted_issuers]].
func trustedIssuersFromTOML(v any) ([]TrustedIssuer, error) {
	const key = "http.jwt.trusted_issuers"
	if empty, ok := v.([]any); ok && len(empty) == 0 {
		return nil, nil
	}
	entries, ok := v.([]map[string]any)
	if !ok {
		return nil, &SettingError{Setting: key, Value: fmt.Sprint(v), Reason: "must be an array of tables ([[http.jwt.trusted_issuers]])"}
	}
	if len(entries) > TrustedIssuersMax {
		return nil, &SettingError{Setting: key, Value: fmt.Sprint(len(entries), " entries"), Reason: fmt.Sprintf("at most %d", TrustedIssuersMax)}
	}
	issuers := make([]TrustedIssuer, len(entries))
	for i, e := range entries {
		for field, value := range e {
			setting := fmt.Sprintf("%s[%d].%s", key, i, field)
			var text string
			switch value := value.(type) {
			case string:
				text = value
			case int64:
				text = strconv.FormatInt(value, 10)
			default:
				return nil, &SettingError{Setting: setting, Value: fmt.Sprint(value), Reason: "not a string or number"}
			}
			if err := issuers[i].set(field, text); err != nil {
				return nil, &SettingError{Setting: setting, Value: text, Reason: err.Error()}
			}
		}
	}
	return issuers, nil
}

// trustedIssuersEnvPrefix begins the variables of [[http.jwt.trusted_issuers]]:
// IGGY_HTTP_JWT_TRUSTED_ISSUERS_<i>_<FIELD>, FIELD one of trustedIssuerFields in
// capitals and i from 0 to TrustedIssuersMax-1, written without leading zeros.
const trustedIssuersEnvPrefix = "IGGY_HTTP_JWT_TRUSTED_ISSUERS_"

var trustedIssuerFields = [...]string{"issuer", "audience", "jwks_url", "user_id"}

func trustedIssuerEnvName(i int, field string) string {
	return trustedIssuersEnvPrefix + strconv.Itoa(i) + "_" + strings.ToUpper(field)
}

// applyTrustedIssuersEnv reads IGGY_HTTP_JWT_TRUSTED_ISSUERS_<i>_<FIELD>: a
// variable of entry i sets that field, growing the list to i+1 entries.
//
// It asks getenv for every name it reads, so a variable under the prefix that is
// none of them (an index past the cap, a misspelt field) would leave its entry
// silently out; environ, the variables set as os.Environ lists them, is searched for
// one, and it is refused. getenv gives its value, so one it answers "" for is unset,
// as everywhere.
func (h *HTTP) applyTrustedIssuersEnv(getenv func(string) string, environ []string) error {
	for i := range TrustedIssuersMax {
		for _, field := range trustedIssuerFields {
			name := trustedIssuerEnvName(i, field)
			v := getenv(name)
			if v == "" {
				continue
			}
			for len(h.JWT.TrustedIssuers) <= i {
				h.JWT.TrustedIssuers = append(h.JWT.TrustedIssuers, TrustedIssuer{})
			}
			if err := h.JWT.TrustedIssuers[i].set(field, v); err != nil {
				return &SettingError{Setting: name, Value: v, Reason: err.Error()}
			}
		}
	}
	for _, variable := range environ {
		name, _, _ := strings.Cut(variable, "=")
		if !strings.HasPrefix(name, trustedIssuersEnvPrefix) || isTrustedIssuerEnvName(name) {
			continue
		}
		if v := getenv(name); v != "" {
			return &SettingError{Setting: name, Value: shown(strings.ToLower(name), v), Reason: fmt.Sprintf(
				"not read: the variables of [[http.jwt.trusted_issuers]] are %s<i>_{ISSUER,AUDIENCE,JWKS_URL,USER_ID}, i from 0 to %d",
				trustedIssuersEnvPrefix, TrustedIssuersMax-1)}
		}
	}
	return nil
}

// isTrustedIssuerEnvName reports whether applyTrustedIssuersEnv reads the variable
// name.
func isTrustedIssuerEnvName(name string) bool {
	index, _, ok := strings.Cut(strings.TrimPrefix(name, trustedIssuersEnvPrefix), "_")
	i, err := strconv.Atoi(index)
	if !ok || err != nil || i < 0 || i >= TrustedIssuersMax {
		return false
	}
	for _, f := range trustedIssuerFields {
		if name == trustedIssuerEnvName(i, f) {
			return true
		}
	}
	return false
}

// set sets one field of an entry from its text.
func (t *TrustedIssuer) set(field, v string) error {
	switch field {
	case "issuer":
		t.Issuer = v
	case "audience":
		t.Audience = v
	case "jwks_url":
		t.JWKSURL = v
	case "user_id":
		id, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
		if err != nil {
			return errors.New("must be a user id (an unsigned 32-bit number)")
		}
		t.UserID = uint32(id)
	default:
		return errors.New("unknown key")
	}
	return nil
}

// parseList reads "[a, b]", "[\"a\", \"b\"]" or "a,b"; entries are trimmed and
// empty ones dropped, as the reference's list parsing does.
func parseList(v string) []string {
	s := strings.TrimSpace(v)
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	var out []string
	for _, e := range strings.Split(s, ",") {
		e = strings.Trim(strings.TrimSpace(e), `"'`)
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// corsMethods are the methods a CORS allow-list may name (case-insensitive).
var corsMethods = map[string]bool{"GET": true, "POST": true, "PUT": true, "DELETE": true,
	"HEAD": true, "OPTIONS": true, "CONNECT": true, "PATCH": true, "TRACE": true}

// validate checks [http] and names the first setting it cannot honour.
func (h *HTTP) validate() error {
	if !h.Enabled {
		return nil
	}
	host, port, err := net.SplitHostPort(h.Address)
	if err != nil {
		return &SettingError{Setting: "http.address", Value: h.Address, Reason: "not host:port"}
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return &SettingError{Setting: "http.address", Value: h.Address, Reason: "port is not a number in 0..65535"}
	}
	if host != "" && net.ParseIP(host) == nil && host != "localhost" {
		return &SettingError{Setting: "http.address", Value: h.Address, Reason: "host must be an IP address or localhost"}
	}
	if h.RequestSizeMaxBytes < 1 || h.RequestSizeMaxBytes > 1<<31 {
		return &SettingError{Setting: "http.max_request_size", Value: strconv.FormatUint(h.RequestSizeMaxBytes, 10),
			Reason: "must be 1 byte to 2 GiB"}
	}
	if h.ConnectionsMax < 1 || h.ConnectionsMax > 1<<20 {
		return &SettingError{Setting: "http.max_connections", Value: strconv.Itoa(h.ConnectionsMax), Reason: "must be 1 to 1048576"}
	}
	if h.WebUI && h.WebUIDir == "" {
		// Whether the directory holds the build is checked where it is served
		// (httpapi.New), as the TLS files are checked where they are loaded.
		return &SettingError{Setting: "http.web_ui_dir", Value: "",
			Reason: "must name the Web UI's static build (apache/iggy web/: npm run build:static, then web/build/static) when http.web_ui is true"}
	}
	if err := h.CORS.validate(); err != nil {
		return err
	}
	if err := h.JWT.validate(); err != nil {
		return err
	}
	if h.MetricsEnabled && !strings.HasPrefix(h.MetricsEndpoint, "/") {
		return &SettingError{Setting: "http.metrics.endpoint", Value: h.MetricsEndpoint, Reason: "must start with /"}
	}
	if h.TLS.Enabled && h.TLS.CertFile == "" {
		return &SettingError{Setting: "http.tls.cert_file", Value: "", Reason: "must name a PEM certificate file when TLS is enabled"}
	}
	if h.TLS.Enabled && h.TLS.KeyFile == "" {
		return &SettingError{Setting: "http.tls.key_file", Value: "", Reason: "must name a PEM key file when TLS is enabled"}
	}
	return nil
}

func (c *CORS) validate() error {
	if !c.Enabled {
		return nil
	}
	for i, o := range c.AllowedOrigins {
		if o == "*" && i > 0 {
			return &SettingError{Setting: "http.cors.allowed_origins", Value: strings.Join(c.AllowedOrigins, ","), Reason: `"*" may only be the first entry`}
		}
		if !validHeaderValue(o) {
			return &SettingError{Setting: "http.cors.allowed_origins", Value: o, Reason: "not a valid header value"}
		}
	}
	for _, m := range c.AllowedMethods {
		if !corsMethods[strings.ToUpper(m)] {
			return &SettingError{Setting: "http.cors.allowed_methods", Value: m, Reason: "not one of GET POST PUT DELETE HEAD OPTIONS CONNECT PATCH TRACE"}
		}
	}
	for _, l := range []struct {
		key  string
		list []string
	}{{"http.cors.allowed_headers", c.AllowedHeaders}, {"http.cors.exposed_headers", c.ExposedHeaders}} {
		for _, name := range l.list {
			if name != "*" && !validHeaderName(name) {
				return &SettingError{Setting: l.key, Value: name, Reason: "not a valid header name"}
			}
		}
	}
	if c.AllowCredentials {
		lone := func(l []string) bool { return len(l) == 1 && l[0] == "*" }
		switch {
		case len(c.AllowedOrigins) > 0 && c.AllowedOrigins[0] == "*":
			return &SettingError{Setting: "http.cors.allow_credentials", Value: "true", Reason: `cannot be combined with the wildcard origin "*"`}
		case lone(c.AllowedHeaders):
			return &SettingError{Setting: "http.cors.allow_credentials", Value: "true", Reason: `cannot be combined with allowed_headers ["*"]`}
		case lone(c.ExposedHeaders):
			return &SettingError{Setting: "http.cors.allow_credentials", Value: "true", Reason: `cannot be combined with exposed_headers ["*"]`}
		}
	}
	return nil
}

func (j *JWT) validate() error {
	switch j.Algorithm {
	case "HS256", "HS384", "HS512":
	default:
		return &SettingError{Setting: "http.jwt.algorithm", Value: j.Algorithm, Reason: "must be HS256, HS384 or HS512"}
	}
	if j.UseBase64Secret {
		for _, s := range []struct{ key, v string }{{"http.jwt.encoding_secret", j.EncodingSecret}, {"http.jwt.decoding_secret", j.DecodingSecret}} {
			if _, err := base64.StdEncoding.DecodeString(s.v); err != nil {
				return &SettingError{Setting: s.key, Value: "(hidden)", Reason: "not standard base64 (use_base64_secret is true)"}
			}
		}
	}
	if len(j.ValidIssuers) == 0 {
		return &SettingError{Setting: "http.jwt.valid_issuers", Value: "", Reason: "must name at least one issuer"}
	}
	if len(j.ValidAudiences) == 0 {
		return &SettingError{Setting: "http.jwt.valid_audiences", Value: "", Reason: "must name at least one audience"}
	}
	return nil
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// validHeaderValue reports whether s is visible ASCII, spaces and tabs only.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// AdvertisedPorts is what GET_CLUSTER_METADATA tells clients of a node whose
// roster entry lists ports: the port of each transport this server serves, 0 (the
// reference's "disabled") for one it does not: QUIC and WebSocket always, HTTP
// when [http] is disabled. Every node of a cluster runs the same configuration of
// transports, so this node's settings stand for its peers'.
func (c *Config) AdvertisedPorts(roster NodePorts) NodePorts {
	p := NodePorts{TCP: roster.TCP, TCPReplica: roster.TCPReplica}
	if c.HTTP.Enabled {
		p.HTTP = roster.HTTP
	}
	return p
}

// HTTPPort is the port of [http] address, 0 when HTTP is disabled or the address
// names none (port 0 picks one at bind time: the bound port is the one to tell).
func (c *Config) HTTPPort() uint16 {
	if !c.HTTP.Enabled {
		return 0
	}
	_, port, err := net.SplitHostPort(c.HTTP.Address)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return 0
	}
	return uint16(n)
}
