package httpapi

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/iggy-shard/iggy-shard/config"
)

const testIndexHTML = "<!doctype html><title>Iggy</title>"

// webUIDir is a static build in a temporary directory, beside a secret file
// and directory outside it, linked from inside.
func webUIDir(t *testing.T) string {
	t.Helper()
	parent := t.TempDir()
	dir := filepath.Join(parent, "static")
	files := map[string]string{
		"index.html":                  testIndexHTML,
		"_app/immutable/entry/app.js": "export const app = 1;",
		"_app/immutable/assets/0.css": "body{}",
		"favicon.png":                 "\x89PNG",
		"healthz":                     "ok",
	}
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(parent, "secret.txt"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(parent, "private"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(parent, "private", "key.txt"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"escape.txt": "../secret.txt", "escape": "../private", "abs.txt": filepath.Join(parent, "secret.txt")} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func webUIAPI(t *testing.T, dir string) *API {
	a, _, _ := testAPI(t, func(o *Options) { o.HTTP.WebUI, o.HTTP.WebUIDir = true, dir })
	return a
}

// The Web UI's routes are the reference's (apache/iggy core/server/src/web.rs):
// /ui and /ui/ are index.html, a file is served with its type, a path with no
// dot that is no file is index.html (the app's own routes), else 404 "Not
// Found"; nothing outside the directory is reachable.
func TestWebUIRoutes(t *testing.T) {
	a := webUIAPI(t, webUIDir(t))
	tests := []struct {
		target      string
		status      int
		body        string
		contentType string
	}{
		{"/ui", 200, testIndexHTML, "text/html"},
		{"/ui/", 200, testIndexHTML, "text/html"},
		{"/ui/index.html", 200, testIndexHTML, "text/html"},
		{"/ui/_app/immutable/entry/app.js", 200, "export const app = 1;", "text/javascript"},
		{"/ui/_app/immutable/assets/0.css", 200, "body{}", "text/css"},
		{"/ui/favicon.png", 200, "\x89PNG", "image/png"},
		{"/ui/healthz", 200, "ok", "application/octet-stream"},
		// The app's routes, and directories, are index.html.
		{"/ui/streams", 200, testIndexHTML, "text/html"},
		{"/ui/streams/1/topics/2", 200, testIndexHTML, "text/html"},
		{"/ui/_app/immutable", 200, testIndexHTML, "text/html"},
		{"/ui/streams/", 200, testIndexHTML, "text/html"},
		// A missing asset is 404.
		{"/ui/_app/immutable/entry/missing.js", 404, "Not Found", "text/plain; charset=utf-8"},
		{"/ui/streams.v2", 404, "Not Found", "text/plain; charset=utf-8"},
		// Nothing outside the directory: .. (plain or encoded), links out.
		{"/ui/../secret.txt", 404, "Not Found", "text/plain; charset=utf-8"},
		{"/ui/%2e%2e/secret.txt", 404, "Not Found", "text/plain; charset=utf-8"},
		{"/ui/_app/../../secret.txt", 404, "Not Found", "text/plain; charset=utf-8"},
		{"/ui/_app/..%2f..%2fsecret.txt", 404, "Not Found", "text/plain; charset=utf-8"},
		{"/ui/escape.txt", 404, "Not Found", "text/plain; charset=utf-8"},
		{"/ui/abs.txt", 404, "Not Found", "text/plain; charset=utf-8"},
		{"/ui/escape/key.txt", 404, "Not Found", "text/plain; charset=utf-8"},
		{"/ui/escape", 200, testIndexHTML, "text/html"},
		{"/ui//etc/passwd", 200, testIndexHTML, "text/html"},
	}
	for _, tt := range tests {
		w := serve(a, "GET", tt.target, "", "", "Origin", "https://ui.example")
		h := w.Header()
		if w.Code != tt.status || w.Body.String() != tt.body || h.Get("Content-Type") != tt.contentType {
			t.Errorf("GET %s: %d %q %q, want %d %q %q", tt.target, w.Code, w.Body.String(), h.Get("Content-Type"),
				tt.status, tt.body, tt.contentType)
		}
		// Outside the API: no CORS headers, no iggy-view, no bearer needed.
		for _, name := range []string{"Iggy-View", "Access-Control-Allow-Origin", "Access-Control-Expose-Headers", "Vary"} {
			if v := h.Get(name); v != "" {
				t.Errorf("GET %s: %s: %q", tt.target, name, v)
			}
		}
	}
}

// HEAD is answered as GET without the body; other methods are 405, OPTIONS
// included (the CORS layer does not cover the Web UI).
func TestWebUIMethods(t *testing.T) {
	a := webUIAPI(t, webUIDir(t))
	w := serve(a, "HEAD", "/ui/_app/immutable/entry/app.js", "", "")
	if w.Code != 200 || w.Body.Len() != 0 || w.Header().Get("Content-Length") != "21" || w.Header().Get("Content-Type") != "text/javascript" {
		t.Fatalf("HEAD: %d %v %q", w.Code, w.Header(), w.Body)
	}
	for _, method := range []string{"POST", "PUT", "DELETE", "OPTIONS"} {
		w := serve(a, method, "/ui/", "", "", "Origin", "https://ui.example", "Access-Control-Request-Method", "GET")
		if w.Code != 405 || w.Header().Get("Allow") != "GET,HEAD" || w.Header().Get("Access-Control-Allow-Origin") != "" {
			t.Fatalf("%s /ui/: %d %v", method, w.Code, w.Header())
		}
	}
}

// The API's routes are unchanged beside the Web UI, and with web_ui off /ui is
// an unknown path: 404, empty body.
func TestWebUIOffIsAnUnknownPath(t *testing.T) {
	on := webUIAPI(t, webUIDir(t))
	if w := serve(on, "GET", "/ping", "", ""); w.Code != 200 || w.Body.String() != "pong" {
		t.Fatalf("GET /ping beside the Web UI: %d %q", w.Code, w.Body)
	}
	for _, target := range []string{"/uix", "/ui%2Findex.html"} {
		if w := serve(on, "GET", target, "", ""); w.Code != 404 || w.Body.Len() != 0 {
			t.Fatalf("GET %s beside the Web UI: %d %q", target, w.Code, w.Body)
		}
	}
	off, _, _ := testAPI(t, func(o *Options) { o.HTTP.WebUIDir = webUIDir(t) })
	for _, target := range []string{"/ui", "/ui/", "/ui/index.html", "/ui/streams"} {
		if w := serve(off, "GET", target, "", ""); w.Code != 404 || w.Body.Len() != 0 {
			t.Fatalf("GET %s with web_ui off: %d %q", target, w.Code, w.Body)
		}
	}
}

// web_ui = true without a directory holding index.html is refused, naming
// http.web_ui_dir.
func TestWebUIRefusedWithoutItsBuild(t *testing.T) {
	empty := t.TempDir()
	indexDir := t.TempDir()
	if err := os.Mkdir(filepath.Join(indexDir, "index.html"), 0o755); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "index.html"), []byte(testIndexHTML), 0o644); err != nil {
		t.Fatal(err)
	}
	linkedOut := t.TempDir()
	if err := os.Symlink(filepath.Join(outside, "index.html"), filepath.Join(linkedOut, "index.html")); err != nil {
		t.Fatal(err)
	}
	for name, dir := range map[string]string{"no directory": "", "missing": filepath.Join(empty, "absent"),
		"empty": empty, "index is a directory": indexDir, "index links out": linkedOut} {
		_, err := New(Options{HTTP: func() config.HTTP { c := testConfig(); c.WebUI, c.WebUIDir = true, dir; return c }(), Backend: newFake()})
		var se *config.SettingError
		if !errors.As(err, &se) || se.Setting != "http.web_ui_dir" || se.Value != dir {
			t.Errorf("%s: %v, want a SettingError naming http.web_ui_dir", name, err)
		}
	}
}
