package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// Stored logins. The reference keeps a login session's token, and tokens saved by
// 'pat create --store-token', in the OS keyring; a headless Linux machine has none,
// so they live in files readable by their owner alone (0600, in 0700
// directories) under $IGGY_HOME:
//
//	sessions/<server>.toml   the login session of one server:
//	                         server, token_name, token, expires_at (absent: never)
//	tokens/<server>.toml     [token.<name>] token = "..." per stored token
//
// <server> is the server's address with every byte but letters, digits, '.' and
// '-' made '_' (127.0.0.1:8090 → 127.0.0.1_8090); the file names the address it
// belongs to, and a file of another address is not used.
const (
	sessionsDir = "sessions"
	tokensDir   = "tokens"
	// sessionTokenName is the personal access token 'iggy login' creates, the
	// reference's name for it.
	sessionTokenName = "iggy-cli-session"
	// defaultSessionLifetime is how long a login lasts without an argument.
	defaultSessionLifetime = 15 * time.Minute
)

// storedLogin is a login session kept for one server.
type storedLogin struct {
	Server    string `toml:"server"`
	TokenName string `toml:"token_name"`
	Token     string `toml:"token"`
	// ExpiresAt is nil for a token that never expires.
	ExpiresAt *time.Time `toml:"expires_at,omitempty"`
}

func (s *storedLogin) expired(now time.Time) bool {
	return s.ExpiresAt != nil && !now.Before(*s.ExpiresAt)
}

// serverFileName is the file name of a server's stored login or tokens.
func serverFileName(address string) string {
	var b strings.Builder
	for _, r := range address {
		if r == '.' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String() + ".toml"
}

// loadSession is the stored login for address, nil when there is none (or no home
// to keep one in).
func loadSession(home, address string) (*storedLogin, error) {
	if home == "" {
		return nil, nil
	}
	path := filepath.Join(home, sessionsDir, serverFileName(address))
	var s storedLogin
	if _, err := toml.DecodeFile(path, &s); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("cannot read the stored login %s: %w\nhint: remove it and log in again", path, err)
	}
	if s.Server != address || s.Token == "" {
		return nil, nil
	}
	return &s, nil
}

// saveSession stores the login for s.Server.
func saveSession(home string, s *storedLogin) error {
	if home == "" {
		return errNoHome
	}
	var b strings.Builder
	if err := toml.NewEncoder(&b).Encode(s); err != nil {
		return err
	}
	return writeSecretFile(filepath.Join(home, sessionsDir), serverFileName(s.Server), []byte(b.String()))
}

// removeSession deletes the stored login of address; none is no error.
func removeSession(home, address string) error {
	if home == "" {
		return nil
	}
	err := os.Remove(filepath.Join(home, sessionsDir, serverFileName(address)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// tokenFile is the tokens stored for one server.
type tokenFile struct {
	Server string                 `toml:"server"`
	Token  map[string]storedToken `toml:"token"`
}

type storedToken struct {
	Token string `toml:"token"`
}

func readTokens(home, address string) (*tokenFile, string, error) {
	path := filepath.Join(home, tokensDir, serverFileName(address))
	f := &tokenFile{}
	if _, err := toml.DecodeFile(path, f); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, path, fmt.Errorf("cannot read the stored tokens %s: %w", path, err)
	}
	if f.Server != address || f.Token == nil {
		f = &tokenFile{Server: address, Token: map[string]storedToken{}}
	}
	return f, path, nil
}

// storeToken keeps a token under its name for address.
func storeToken(home, address, name, token string) error {
	if home == "" {
		return errNoHome
	}
	f, _, err := readTokens(home, address)
	if err != nil {
		return err
	}
	f.Token[name] = storedToken{Token: token}
	return writeTokens(home, f)
}

func writeTokens(home string, f *tokenFile) error {
	var b strings.Builder
	if err := toml.NewEncoder(&b).Encode(f); err != nil {
		return err
	}
	return writeSecretFile(filepath.Join(home, tokensDir), serverFileName(f.Server), []byte(b.String()))
}

// loadStoredToken is the token stored under name for address.
func loadStoredToken(home, address, name string) (string, error) {
	if home == "" {
		return "", fmt.Errorf("no token named '%s' is stored: %w", name, errNoHome)
	}
	f, path, err := readTokens(home, address)
	if err != nil {
		return "", err
	}
	t, ok := f.Token[name]
	if !ok {
		return "", fmt.Errorf("no token named '%s' is stored for %s (in %s)\nhint: iggy -u USERNAME pat create --store-token %s", name, address, path, name)
	}
	return t.Token, nil
}

// forgetToken removes a stored token; reports whether there was one.
func forgetToken(home, address, name string) (bool, error) {
	if home == "" {
		return false, nil
	}
	f, _, err := readTokens(home, address)
	if err != nil {
		return false, err
	}
	if _, ok := f.Token[name]; !ok {
		return false, nil
	}
	delete(f.Token, name)
	if len(f.Token) == 0 {
		err := os.Remove(filepath.Join(home, tokensDir, serverFileName(address)))
		if errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
		return true, err
	}
	return true, writeTokens(home, f)
}
