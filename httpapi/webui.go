package httpapi

import (
	"errors"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/iggy-shard/iggy-shard/config"
)

// The Web UI: apache/iggy's dashboard (web/, built by `npm run build:static`
// into web/build/static) served at /ui from [http] web_ui_dir, with the routes
// of the reference, which embeds the same build (apache/iggy
// core/server/src/web.rs): /ui and /ui/ are index.html, /ui/<path> the file at
// <path>, a <path> with no dot that is no file index.html (the single-page
// app's own routes), anything else 404 "Not Found". The routes sit outside the
// API (no bearer, no CORS headers, no iggy-view) and answer GET and HEAD.
//
// Files are read only from inside the directory: the path must be a plain
// relative one (fs.ValidPath: no "..", no empty or "." elements) and is opened
// through os.OpenInRoot, which refuses a symbolic link that leads out. Only
// regular files are served, so there are no directory listings. The directory
// is opened on every request, so a rebuilt UI is served without a restart.

const (
	webUIPrefix = "/ui"
	webUIIndex  = "index.html"
)

// webUIContentTypes are the types of the files a SvelteKit static build holds,
// fixed here so a response does not depend on the host's mime.types; other
// extensions fall back to the standard library's table, then to
// application/octet-stream (the reference's fallback).
var webUIContentTypes = map[string]string{
	".html":  "text/html",
	".js":    "text/javascript",
	".mjs":   "text/javascript",
	".css":   "text/css",
	".json":  "application/json",
	".map":   "application/json",
	".svg":   "image/svg+xml",
	".png":   "image/png",
	".ico":   "image/x-icon",
	".webp":  "image/webp",
	".jpg":   "image/jpeg",
	".woff":  "font/woff",
	".woff2": "font/woff2",
	".txt":   "text/plain",
	".wasm":  "application/wasm",
}

// webUI serves the Web UI's files from dir.
type webUI struct {
	dir string // absolute
}

// newWebUI checks that dir holds the build's index.html, naming
// http.web_ui_dir when it does not.
func newWebUI(dir string) (*webUI, error) {
	refuse := func(reason string) error {
		return &config.SettingError{Setting: "http.web_ui_dir", Value: dir, Reason: reason}
	}
	if dir == "" {
		return nil, refuse("must name the directory of the Web UI's static build (apache/iggy web/: npm run build:static, then web/build/static) when http.web_ui is true")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, refuse(err.Error())
	}
	u := &webUI{dir: abs}
	f, _, err := u.open(webUIIndex)
	if err != nil {
		return nil, refuse("holds no index.html (" + err.Error() + "): is it web/build/static of `npm run build:static`?")
	}
	_ = f.Close()
	return u, nil
}

// isWebUIPath reports whether the escaped path p is one of the Web UI's routes:
// /ui, /ui/ or /ui/<anything> (as the API's routes, matched before decoding:
// /ui%2F is not one).
func isWebUIPath(p string) bool {
	return p == webUIPrefix || strings.HasPrefix(p, webUIPrefix+"/")
}

func (u *webUI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET,HEAD")
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	name := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, webUIPrefix), "/")
	if name == "" {
		name = webUIIndex
	}
	if u.serveFile(w, r, name) {
		return
	}
	if !strings.Contains(name, ".") && u.serveFile(w, r, webUIIndex) {
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusNotFound)
	_, _ = io.WriteString(w, "Not Found")
}

// serveFile answers with the regular file name inside the directory, or
// reports false when there is none.
func (u *webUI) serveFile(w http.ResponseWriter, r *http.Request, name string) bool {
	f, info, err := u.open(name)
	if err != nil {
		return false
	}
	defer f.Close()
	w.Header().Set("Content-Type", webUIContentType(name))
	w.Header().Set("Content-Length", strconv.FormatInt(info.Size(), 10))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = io.CopyN(w, f, info.Size())
	}
	return true
}

// open opens the regular file name (slash-separated, relative) inside the
// directory.
func (u *webUI) open(name string) (*os.File, fs.FileInfo, error) {
	if !fs.ValidPath(name) || strings.ContainsAny(name, `\`+"\x00") {
		return nil, nil, fs.ErrNotExist
	}
	f, err := os.OpenInRoot(u.dir, filepath.FromSlash(name))
	if err != nil {
		return nil, nil, err
	}
	info, err := f.Stat()
	if err == nil && !info.Mode().IsRegular() {
		err = errors.New(name + " is not a regular file")
	}
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	return f, info, nil
}

func webUIContentType(name string) string {
	ext := strings.ToLower(path.Ext(name))
	if t, ok := webUIContentTypes[ext]; ok {
		return t
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return t
	}
	return "application/octet-stream"
}
