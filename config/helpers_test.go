package config

import (
	"errors"
	"strings"
	"testing"
)

// envOf is a getenv over m.
func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// loadValidated is what a start does with a file and an environment: Load, then
// Validate.
func loadValidated(path string, env map[string]string) (Config, error) {
	c, err := Load(path, envOf(env))
	if err == nil {
		err = c.Validate()
	}
	return c, err
}

// mustNameSetting fails t unless err is a SettingError of setting whose text
// names it.
func mustNameSetting(t *testing.T, err error, setting string) {
	t.Helper()
	var se *SettingError
	if !errors.As(err, &se) || se.Setting != setting || !strings.Contains(err.Error(), setting) {
		t.Fatalf("error %v, want one naming %s", err, setting)
	}
}
