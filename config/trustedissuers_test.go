package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTrustedIssuersMax: [[http.jwt.trusted_issuers]] holds at most
// TrustedIssuersMax entries; one more refuses the start naming the key.
func TestTrustedIssuersMax(t *testing.T) {
	issuers := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "[[http.jwt.trusted_issuers]]\nissuer = \"https://idp-%d.example\"\njwks_url = \"https://idp-%d.example/jwks\"\nuser_id = %d\n", i, i, i)
		}
		return b.String()
	}
	dir := t.TempDir()
	for _, n := range []int{TrustedIssuersMax, TrustedIssuersMax + 1} {
		path := filepath.Join(dir, fmt.Sprint(n, ".toml"))
		if err := os.WriteFile(path, []byte(issuers(n)), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := Load(path, func(string) string { return "" })
		if n == TrustedIssuersMax {
			if err != nil || len(c.HTTP.JWT.TrustedIssuers) != n {
				t.Fatalf("%d trusted issuers: %d read, %v", n, len(c.HTTP.JWT.TrustedIssuers), err)
			}
			if last := c.HTTP.JWT.TrustedIssuers[n-1]; last.UserID != uint32(n-1) || last.Issuer != fmt.Sprintf("https://idp-%d.example", n-1) {
				t.Fatalf("the last trusted issuer read as %+v", last)
			}
			continue
		}
		var se *SettingError
		if !errors.As(err, &se) || se.Setting != "http.jwt.trusted_issuers" {
			t.Fatalf("%d trusted issuers: %v, want a refusal naming http.jwt.trusted_issuers", n, err)
		}
	}
}

// TestTrustedIssuersEnvNotReadRefused: a variable under
// IGGY_HTTP_JWT_TRUSTED_ISSUERS_ that names no entry field Load reads (an index at or
// past TrustedIssuersMax, an index with leading zeros, an unknown field) refuses the
// start naming it, instead of leaving its entry silently out. The variables are found
// in the process environment; getenv still gives their values, so one it answers ""
// for is unset.
func TestTrustedIssuersEnvNotReadRefused(t *testing.T) {
	const prefix = "IGGY_HTTP_JWT_TRUSTED_ISSUERS_"
	t.Run("last index read", func(t *testing.T) {
		t.Setenv(prefix+"255_ISSUER", "https://idp-255.example")
		c, err := Load("", os.Getenv)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(c.HTTP.JWT.TrustedIssuers); n != TrustedIssuersMax || c.HTTP.JWT.TrustedIssuers[n-1].Issuer != "https://idp-255.example" {
			t.Fatalf("%d trusted issuers read, want %d with the last one's issuer", n, TrustedIssuersMax)
		}
	})
	for _, name := range []string{
		prefix + "256_ISSUER",
		prefix + "1000_JWKS_URL",
		prefix + "18446744073709551616_USER_ID", // past any int
		prefix + "007_AUDIENCE",
		prefix + "0_ISUER",
		prefix + "0_issuer",
		prefix + "ISSUER",
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(name, "https://idp.example")
			_, err := Load("", os.Getenv)
			var se *SettingError
			if !errors.As(err, &se) || se.Setting != name {
				t.Fatalf("%s set: %v, want a refusal naming it", name, err)
			}
			if _, err := Load("", func(string) string { return "" }); err != nil {
				t.Fatalf("%s set but hidden by getenv: %v", name, err)
			}
		})
	}
}
