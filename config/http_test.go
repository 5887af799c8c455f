package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestHTTPConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	full := write("http.toml", `
[http]
enabled = true
address = "0.0.0.0:3001"
max_request_size = "4 MiB"
max_connections = 64
[http.cors]
enabled = true
allowed_methods = ["GET", "POST"]
allowed_origins = ["https://ui.example"]
allowed_headers = ["content-type"]
exposed_headers = ["iggy-view"]
allow_credentials = true
allow_private_network = true
[http.jwt]
algorithm = "HS512"
issuer = "me"
audience = "you"
valid_issuers = ["me", "other"]
valid_audiences = ["you"]
access_token_expiry = "15 m"
clock_skew = "2 s"
not_before = "1 s"
encoding_secret = "top"
decoding_secret = "top"
[http.metrics]
enabled = false
endpoint = "nope"
[http.tls]
enabled = true
self_signed = false
cert_file = "c.pem"
key_file = "k.pem"
[quic]
enabled = true
[websocket]
enabled = true
`)
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	tests := []struct {
		name    string
		text    string // a TOML file, when not empty
		path    string
		env     map[string]string
		want    func(c Config) bool
		setting string // non-empty: Load or Validate must name it
	}{
		{name: "defaults are the reference's", want: func(c Config) bool {
			h := c.HTTP
			return h.Enabled && h.Address == "127.0.0.1:3000" && h.RequestSizeMaxBytes == 2_000_000 &&
				h.ConnectionsMax == 1024 && !h.WebUI && h.WebUIDir == "" && h.CORS.Enabled &&
				reflect.DeepEqual(h.CORS.AllowedMethods, []string{"GET", "POST", "PUT", "DELETE"}) &&
				reflect.DeepEqual(h.CORS.AllowedOrigins, []string{"*"}) &&
				reflect.DeepEqual(h.CORS.AllowedHeaders, []string{"content-type", "authorization"}) &&
				reflect.DeepEqual(h.CORS.ExposedHeaders, []string{"iggy-view"}) &&
				!h.CORS.AllowCredentials && !h.CORS.AllowPrivateNetwork &&
				h.JWT.Algorithm == "HS256" && h.JWT.Issuer == "iggy.apache.org" && h.JWT.Audience == "iggy.apache.org" &&
				reflect.DeepEqual(h.JWT.ValidIssuers, []string{"iggy.apache.org"}) &&
				h.JWT.AccessTokenExpiry == time.Hour && h.JWT.ClockSkew == 5*time.Second && h.JWT.NotBefore == 0 &&
				h.JWT.EncodingSecret == "" && h.MetricsEnabled && h.MetricsEndpoint == "/metrics" &&
				!h.TLS.Enabled && h.TLS.CertFile == "core/certs/iggy_cert.pem" && !c.QUICEnabled && !c.WebSocketEnabled
		}},
		{name: "file", path: full, want: func(c Config) bool {
			h := c.HTTP
			return h.Address == "0.0.0.0:3001" && h.RequestSizeMaxBytes == 4<<20 && h.ConnectionsMax == 64 &&
				reflect.DeepEqual(h.CORS.AllowedMethods, []string{"GET", "POST"}) &&
				reflect.DeepEqual(h.CORS.AllowedOrigins, []string{"https://ui.example"}) &&
				h.CORS.AllowCredentials && h.CORS.AllowPrivateNetwork &&
				h.JWT.Algorithm == "HS512" && h.JWT.Issuer == "me" && h.JWT.Audience == "you" &&
				reflect.DeepEqual(h.JWT.ValidIssuers, []string{"me", "other"}) &&
				h.JWT.AccessTokenExpiry == 15*time.Minute && h.JWT.ClockSkew == 2*time.Second &&
				h.JWT.NotBefore == time.Second && h.JWT.EncodingSecret == "top" && !h.MetricsEnabled &&
				h.TLS.Enabled && !h.TLS.SelfSigned && h.TLS.CertFile == "c.pem" && h.TLS.KeyFile == "k.pem" &&
				c.QUICEnabled && c.WebSocketEnabled
		}},
		{name: "environment over file", path: full, env: map[string]string{
			"IGGY_HTTP_ENABLED": "false", "IGGY_HTTP_ADDRESS": "127.0.0.1:1", "IGGY_HTTP_MAX_REQUEST_SIZE": "1 KB",
			"IGGY_HTTP_CORS_ALLOWED_ORIGINS": `["*", "x"]`, "IGGY_HTTP_JWT_VALID_AUDIENCES": "a, b",
			"IGGY_HTTP_JWT_ACCESS_TOKEN_EXPIRY": "none", "IGGY_HTTP_TLS_ENABLED": "false", "IGGY_QUIC_ENABLED": "false",
			"IGGY_HTTP_CORS_ALLOWED_METHODS": "", // empty: ignored
		}, want: func(c Config) bool {
			h := c.HTTP
			return !h.Enabled && h.Address == "127.0.0.1:1" && h.RequestSizeMaxBytes == 1000 &&
				reflect.DeepEqual(h.CORS.AllowedOrigins, []string{"*", "x"}) &&
				reflect.DeepEqual(h.CORS.AllowedMethods, []string{"GET", "POST"}) &&
				reflect.DeepEqual(h.JWT.ValidAudiences, []string{"a", "b"}) &&
				h.JWT.AccessTokenNeverExpires && !h.TLS.Enabled && !c.QUICEnabled && c.WebSocketEnabled
		}},
		{name: "unknown http key", text: "[http]\nport = 1\n", setting: "http.port"},
		{name: "unknown nested key", text: "[http.cors]\norigins = [\"*\"]\n", setting: "http.cors.origins"},
		{name: "trusted issuers", text: "[http.jwt]\nissuer = \"me\"\n[[http.jwt.trusted_issuers]]\nissuer = \"https://idp.example\"\naudience = \"iggy\"\njwks_url = \"https://idp.example/jwks\"\nuser_id = 7\n[[http.jwt.trusted_issuers]]\nissuer = \"https://other.example\"\njwks_url = \"https://other.example/jwks\"\nuser_id = \"8\"\n",
			want: func(c Config) bool {
				return c.HTTP.JWT.Issuer == "me" && reflect.DeepEqual(c.HTTP.JWT.TrustedIssuers, []TrustedIssuer{
					{Issuer: "https://idp.example", Audience: "iggy", JWKSURL: "https://idp.example/jwks", UserID: 7},
					{Issuer: "https://other.example", JWKSURL: "https://other.example/jwks", UserID: 8},
				})
			}},
		{name: "trusted issuers from env over file", text: "[[http.jwt.trusted_issuers]]\nissuer = \"a\"\njwks_url = \"https://a/jwks\"\nuser_id = 1\n",
			env: map[string]string{"IGGY_HTTP_JWT_TRUSTED_ISSUERS_0_USER_ID": "2", "IGGY_HTTP_JWT_TRUSTED_ISSUERS_1_ISSUER": "b",
				"IGGY_HTTP_JWT_TRUSTED_ISSUERS_1_JWKS_URL": "https://b/jwks", "IGGY_HTTP_JWT_TRUSTED_ISSUERS_1_USER_ID": "3"},
			want: func(c Config) bool {
				return reflect.DeepEqual(c.HTTP.JWT.TrustedIssuers, []TrustedIssuer{
					{Issuer: "a", JWKSURL: "https://a/jwks", UserID: 2},
					{Issuer: "b", JWKSURL: "https://b/jwks", UserID: 3},
				})
			}},
		{name: "trusted issuer unknown key", text: "[[http.jwt.trusted_issuers]]\nissuer = \"x\"\nkid = \"y\"\n", setting: "http.jwt.trusted_issuers[0].kid"},
		{name: "trusted issuer bad user id", text: "[[http.jwt.trusted_issuers]]\nuser_id = -1\n", setting: "http.jwt.trusted_issuers[0].user_id"},
		{name: "trusted issuer bad user id from env", env: map[string]string{"IGGY_HTTP_JWT_TRUSTED_ISSUERS_3_USER_ID": "x"}, setting: "IGGY_HTTP_JWT_TRUSTED_ISSUERS_3_USER_ID"},
		{name: "trusted issuers not tables", text: "[http.jwt]\ntrusted_issuers = [\"x\"]\n", setting: "http.jwt.trusted_issuers"},
		{name: "list of numbers", text: "[http.cors]\nallowed_methods = [1]\n", setting: "http.cors.allowed_methods"},
		{name: "bad bool", env: map[string]string{"IGGY_HTTP_ENABLED": "yes please"}, setting: "IGGY_HTTP_ENABLED"},
		{name: "bad size", env: map[string]string{"IGGY_HTTP_MAX_REQUEST_SIZE": "lots"}, setting: "IGGY_HTTP_MAX_REQUEST_SIZE"},
		{name: "zero size", env: map[string]string{"IGGY_HTTP_MAX_REQUEST_SIZE": "0"}, setting: "http.max_request_size"},
		{name: "bad duration", env: map[string]string{"IGGY_HTTP_JWT_CLOCK_SKEW": "soon"}, setting: "IGGY_HTTP_JWT_CLOCK_SKEW"},
		{name: "bad address", env: map[string]string{"IGGY_HTTP_ADDRESS": "3000"}, setting: "http.address"},
		{name: "no connections", env: map[string]string{"IGGY_HTTP_MAX_CONNECTIONS": "0"}, setting: "http.max_connections"},
		{name: "web ui without its directory", env: map[string]string{"IGGY_HTTP_WEB_UI": "true"}, setting: "http.web_ui_dir"},
		{name: "web ui with its directory from env", env: map[string]string{"IGGY_HTTP_WEB_UI": "true", "IGGY_HTTP_WEB_UI_DIR": "/srv/iggy-web"},
			want: func(c Config) bool { return c.HTTP.WebUI && c.HTTP.WebUIDir == "/srv/iggy-web" }},
		{name: "web ui with its directory from file", text: "[http]\nweb_ui = true\nweb_ui_dir = \"web/build/static\"\n",
			want: func(c Config) bool { return c.HTTP.WebUI && c.HTTP.WebUIDir == "web/build/static" }},
		{name: "algorithm", env: map[string]string{"IGGY_HTTP_JWT_ALGORITHM": "RS256"}, setting: "http.jwt.algorithm"},
		{name: "wildcard origin not first", env: map[string]string{"IGGY_HTTP_CORS_ALLOWED_ORIGINS": "[a, *]"}, setting: "http.cors.allowed_origins"},
		{name: "unknown method", env: map[string]string{"IGGY_HTTP_CORS_ALLOWED_METHODS": "[GET, FETCH]"}, setting: "http.cors.allowed_methods"},
		{name: "method any case", env: map[string]string{"IGGY_HTTP_CORS_ALLOWED_METHODS": "[get, patch]"}, want: func(c Config) bool { return true }},
		{name: "bad header name", env: map[string]string{"IGGY_HTTP_CORS_ALLOWED_HEADERS": "[a b]"}, setting: "http.cors.allowed_headers"},
		{name: "credentials with wildcard origin", env: map[string]string{"IGGY_HTTP_CORS_ALLOW_CREDENTIALS": "true"}, setting: "http.cors.allow_credentials"},
		{name: "credentials with lone wildcard header", env: map[string]string{"IGGY_HTTP_CORS_ALLOW_CREDENTIALS": "true",
			"IGGY_HTTP_CORS_ALLOWED_ORIGINS": "[https://a]", "IGGY_HTTP_CORS_ALLOWED_HEADERS": "[*]"}, setting: "http.cors.allow_credentials"},
		{name: "cors checks skipped when disabled", env: map[string]string{"IGGY_HTTP_CORS_ENABLED": "false", "IGGY_HTTP_CORS_ALLOW_CREDENTIALS": "true"},
			want: func(c Config) bool { return !c.HTTP.CORS.Enabled }},
		{name: "metrics endpoint", env: map[string]string{"IGGY_HTTP_METRICS_ENDPOINT": "metrics"}, setting: "http.metrics.endpoint"},
		{name: "base64 secret", env: map[string]string{"IGGY_HTTP_JWT_USE_BASE64_SECRET": "true", "IGGY_HTTP_JWT_ENCODING_SECRET": "not base64!"}, setting: "http.jwt.encoding_secret"},
		{name: "disabled http is not checked", env: map[string]string{"IGGY_HTTP_ENABLED": "false", "IGGY_HTTP_ADDRESS": "nowhere"},
			want: func(c Config) bool { return !c.HTTP.Enabled }},
		{name: "tls without a certificate", text: "[http.tls]\nenabled = true\ncert_file = \"\"\n", setting: "http.tls.cert_file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tt.path
			if tt.text != "" {
				path = write(strings.ReplaceAll(tt.name, " ", "_")+".toml", tt.text)
			}
			c, err := Load(path, env(tt.env))
			if err == nil {
				err = c.Validate()
			}
			if tt.setting != "" {
				var se *SettingError
				if !errors.As(err, &se) || se.Setting != tt.setting {
					t.Fatalf("error %v, want a SettingError naming %s", err, tt.setting)
				}
				if strings.Contains(err.Error(), "not base64!") {
					t.Fatalf("the error shows a secret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.want(c) {
				t.Fatalf("got %+v", c.HTTP)
			}
		})
	}
}

func TestTransportsNotServedAreWarned(t *testing.T) {
	for _, tt := range []struct {
		env  map[string]string
		want []string // substrings, one warning each
	}{
		{nil, nil},
		{map[string]string{"IGGY_QUIC_ENABLED": "true"}, []string{"quic.enabled"}},
		{map[string]string{"IGGY_QUIC_ENABLED": "true", "IGGY_WEBSOCKET_ENABLED": "true"}, []string{"quic.enabled", "websocket.enabled"}},
		{map[string]string{"IGGY_HTTP_JWT_ENCODING_SECRET": "a"}, []string{"only one of"}},
		{map[string]string{"IGGY_HTTP_JWT_ENCODING_SECRET": "a", "IGGY_HTTP_JWT_DECODING_SECRET": "b"}, []string{"differ"}},
		{map[string]string{"IGGY_HTTP_JWT_ENCODING_SECRET": "a", "IGGY_HTTP_JWT_DECODING_SECRET": "a"}, nil},
	} {
		c, err := Load("", func(k string) string { return tt.env[k] })
		if err != nil {
			t.Fatal(err)
		}
		got := c.Warnings()
		if len(got) != len(tt.want) {
			t.Fatalf("%v: warnings %q, want %d", tt.env, got, len(tt.want))
		}
		for i, w := range tt.want {
			if !strings.Contains(got[i], w) {
				t.Fatalf("%v: warning %q does not name %s", tt.env, got[i], w)
			}
		}
	}
}

func TestAdvertisedPorts(t *testing.T) {
	roster := NodePorts{TCP: 8090, QUIC: 8080, HTTP: 3000, WebSocket: 8092, TCPReplica: 8091}
	c := Default()
	c.QUICEnabled, c.WebSocketEnabled = true, true // warned, never served
	if got, want := c.AdvertisedPorts(roster), (NodePorts{TCP: 8090, HTTP: 3000, TCPReplica: 8091}); got != want {
		t.Fatalf("HTTP enabled: %+v, want %+v", got, want)
	}
	if c.HTTPPort() != 3000 {
		t.Fatalf("HTTPPort %d", c.HTTPPort())
	}
	c.HTTP.Enabled = false
	if got, want := c.AdvertisedPorts(roster), (NodePorts{TCP: 8090, TCPReplica: 8091}); got != want {
		t.Fatalf("HTTP disabled: %+v, want %+v", got, want)
	}
	if c.HTTPPort() != 0 {
		t.Fatalf("HTTPPort of a disabled listener: %d", c.HTTPPort())
	}
}
