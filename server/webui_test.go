package server

import (
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/iggy-shard/iggy-shard/config"
)

// [http] web_ui serves the build in web_ui_dir at /ui beside the API, on the
// server's own listener.
func TestWebUIServedWithTheServer(t *testing.T) {
	build := t.TempDir()
	const index = "<!doctype html><title>Iggy</title>"
	if err := os.WriteFile(filepath.Join(build, "index.html"), []byte(index), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t.TempDir(), 1)
	cfg.HTTP.WebUI, cfg.HTTP.WebUIDir = true, build
	s := startTestServer(t, cfg)
	base := "http://" + s.HTTPAddr().String()
	for _, path := range []string{"/ui/", "/ui/streams"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || string(body) != index || resp.Header.Get("Iggy-View") != "" {
			t.Fatalf("GET %s: %d %q %v %v", path, resp.StatusCode, body, resp.Header, err)
		}
	}
	resp, err := http.Get(base + "/ping")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /ping beside the Web UI: %d", resp.StatusCode)
	}
}

// web_ui = true with a directory that holds no build stops the start, naming
// http.web_ui_dir.
func TestWebUIWithoutItsBuildStopsTheStart(t *testing.T) {
	cfg := testConfig(t.TempDir(), 1)
	cfg.HTTP.WebUI, cfg.HTTP.WebUIDir = true, t.TempDir()
	s, err := start(cfg, nil)
	if err == nil {
		s.Shutdown(testContext(t))
		t.Fatal("the server started with a Web UI directory without index.html")
	}
	var se *config.SettingError
	if !errors.As(err, &se) || se.Setting != "http.web_ui_dir" || se.Value != cfg.HTTP.WebUIDir {
		t.Fatalf("start without the Web UI's build: %v", err)
	}
}
