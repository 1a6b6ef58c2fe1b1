package console

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
)

// staticFS holds the console's stylesheet and script, written for
// precept; nothing is fetched from elsewhere.
//
//go:embed static
var staticFS embed.FS

// staticETags are the files' content hashes.
var staticETags = func() map[string]string {
	m := map[string]string{}
	entries, _ := fs.ReadDir(staticFS, "static")
	for _, e := range entries {
		data, _ := staticFS.ReadFile("static/" + e.Name())
		sum := sha256.Sum256(data)
		m[e.Name()] = `"` + hex.EncodeToString(sum[:8]) + `"`
	}
	return m
}()

func (c *Console) static(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	etag, ok := staticETags[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	data, _ := staticFS.ReadFile("static/" + name)
	h := w.Header()
	h.Set("Content-Type", mime.TypeByExtension(path.Ext(name)))
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", etag)
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Write(data)
}
