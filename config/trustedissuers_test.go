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
