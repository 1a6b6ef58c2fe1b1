package chroma

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/precept-dev/precept/lib/testenv"
	"github.com/precept-dev/precept/lib/vectorindex"
	"github.com/precept-dev/precept/lib/vectorindex/indextest"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunWithChroma(m)) }

// runID keeps this process's collections apart from any other run's on
// the same server, and seq each test's (-count reruns them in one process).
var (
	runID = fmt.Sprintf("%x", time.Now().UnixNano()&0xffffffff)
	seq   atomic.Int64
)

// prefix returns a collection prefix no other call returns.
func prefix(key string) string {
	return fmt.Sprintf("precept-test-%s-%d-%s", runID, seq.Add(1), key)
}

func openT(t *testing.T, opts Options) (*Index, bool) {
	t.Helper()
	idx, reset, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { idx.Close() })
	return idx, reset
}

func TestIndexMeetsTheContract(t *testing.T) {
	base := testenv.Chroma(t)
	run := prefix("contract")
	indextest.Run(t, func(t *testing.T, key string, spec vectorindex.Spec) (vectorindex.Index, bool) {
		idx, reset, err := Open(context.Background(), Options{URL: base, CollectionPrefix: run + "-" + key, Spec: spec})
		if err != nil {
			t.Fatalf("open %s: %v", key, err)
		}
		return idx, reset
	})
}

func TestCollectionNameIsReadableAndNeverShared(t *testing.T) {
	tests := []struct {
		embedder string
		dim      int
		want     string
	}{
		{"local-ngram-v1", 384, "precept-feedback-local-ngram-v1-384"},
		{"nomic_embed.v1.5", 768, "precept-feedback-nomic_embed.v1.5-768"},
		{"openai/text-embedding-3-small", 1536, "precept-feedback-openai-text-embedding-3-small-1536-"},
		{"openai-text-embedding-3-small", 1536, "precept-feedback-openai-text-embedding-3-small-1536"},
		{"a..b", 8, "precept-feedback-a.-b-8-"},
		{"Ünïcode", 8, "precept-feedback--n-code-8-"},
	}
	seen := map[string]string{}
	for _, tt := range tests {
		got := CollectionName(DefaultCollectionPrefix, vectorindex.Spec{Embedder: tt.embedder, Dimension: tt.dim})
		if strings.HasSuffix(tt.want, "-") {
			// A lossy name ends in 8 hex digits of the exact name's hash.
			if !strings.HasPrefix(got, tt.want) || len(got) != len(tt.want)+8 {
				t.Errorf("CollectionName(%q) = %q, want %q + 8 hex digits", tt.embedder, got, tt.want)
			}
		} else if got != tt.want {
			t.Errorf("CollectionName(%q) = %q, want %q", tt.embedder, got, tt.want)
		}
		if other, ok := seen[got]; ok {
			t.Errorf("%q and %q share collection %q", tt.embedder, other, got)
		}
		seen[got] = tt.embedder
	}
	long := CollectionName(DefaultCollectionPrefix, vectorindex.Spec{Embedder: strings.Repeat("x", 1000), Dimension: 8})
	if len(long) > 512 {
		t.Errorf("name for a 1000-character embedder is %d characters, Chroma allows 512", len(long))
	}
}

func TestOptionsValidateFillsDefaultsAndRejectsBadValues(t *testing.T) {
	spec := vectorindex.Spec{Embedder: "e", Dimension: 4}
	o := Options{URL: "http://127.0.0.1:1", Spec: spec}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.Tenant != DefaultTenant || o.Database != DefaultDatabase || o.CollectionPrefix != DefaultCollectionPrefix || o.Timeout != DefaultTimeout || o.TokenHeader != AuthorizationHeader {
		t.Errorf("defaults not filled: %+v", o)
	}
	bad := []Options{
		{Spec: spec},
		{URL: "127.0.0.1:8000", Spec: spec},
		{URL: "ftp://host", Spec: spec},
		{URL: "http://host/?token=x", Spec: spec},
		{URL: "http://host", Spec: vectorindex.Spec{Embedder: "e"}},
		{URL: "http://host", Spec: spec, CollectionPrefix: "-starts-badly"},
		{URL: "http://host", Spec: spec, CollectionPrefix: "has space"},
		{URL: "http://host", Spec: spec, CollectionPrefix: "a..b"},
		{URL: "http://host", Spec: spec, Timeout: -time.Second},
		{URL: "http://host", Spec: spec, Token: "t", TokenHeader: "X-Other"},
	}
	for _, o := range bad {
		if err := o.Validate(); !errors.Is(err, vectorindex.ErrInvalid) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalid", o, err)
		}
	}
}

func TestOpenRecordsTheSpecAndCosineOnANewCollection(t *testing.T) {
	base := testenv.Chroma(t)
	spec := vectorindex.Spec{Embedder: "local-ngram-v1", Dimension: 16}
	opts := Options{URL: base, CollectionPrefix: prefix("record"), Spec: spec}
	idx, reset := openT(t, opts)
	if !reset {
		t.Fatal("new collection: reset = false")
	}
	if want := opts.CollectionPrefix + "-local-ngram-v1-16"; idx.Collection() != want {
		t.Errorf("collection %q, want %q", idx.Collection(), want)
	}
	var col struct {
		Metadata      map[string]any `json:"metadata"`
		Configuration struct {
			HNSW struct {
				Space string `json:"space"`
			} `json:"hnsw"`
		} `json:"configuration_json"`
	}
	getJSON(t, base+"/api/v2/tenants/default_tenant/databases/default_database/collections/"+idx.Collection(), &col)
	if col.Metadata[metaEmbedder] != "local-ngram-v1" || col.Metadata[metaDimension] != "16" || col.Configuration.HNSW.Space != "cosine" {
		t.Errorf("collection metadata %v, space %q; want the spec and cosine", col.Metadata, col.Configuration.HNSW.Space)
	}
	if err := idx.Close(); err != nil {
		t.Fatal(err)
	}
	if _, reset := openT(t, opts); reset {
		t.Error("existing collection: reset = true, want false")
	}
}

func TestOpenRefusesACollectionHoldingOtherEmbeddings(t *testing.T) {
	base := testenv.Chroma(t)
	spec := vectorindex.Spec{Embedder: "e1", Dimension: 4}
	tests := []struct {
		name     string
		metadata map[string]any
	}{
		{"other embedder", map[string]any{metaSpace: "cosine", metaEmbedder: "e2", metaDimension: "4"}},
		{"other dimension", map[string]any{metaSpace: "cosine", metaEmbedder: "e1", metaDimension: "8"}},
		{"l2 distance", map[string]any{metaSpace: "l2", metaEmbedder: "e1", metaDimension: "4"}},
		{"not precept's", map[string]any{"owner": "someone else"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := prefix(fmt.Sprint("mismatch", i))
			body, _ := json.Marshal(map[string]any{"name": CollectionName(p, spec), "metadata": tt.metadata})
			postJSON(t, base+"/api/v2/tenants/default_tenant/databases/default_database/collections", body)
			_, _, err := Open(context.Background(), Options{URL: base, CollectionPrefix: p, Spec: spec})
			if !errors.Is(err, ErrSpecMismatch) {
				t.Fatalf("open: %v, want ErrSpecMismatch", err)
			}
		})
	}
}

// recordingProxy forwards to a real Chroma server, records each write's
// size and can lower the server's advertised batch limit.
type recordingProxy struct {
	mu       sync.Mutex
	batches  map[string][]int // path suffix → ids per request
	maxBatch int
}

func (p *recordingProxy) handler(t *testing.T, target string) http.Handler {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/pre-flight-checks") && p.maxBatch > 0 {
			fmt.Fprintf(w, `{"max_batch_size":%d,"supports_base64_encoding":true}`, p.maxBatch)
			return
		}
		for _, op := range []string{"/upsert", "/delete", "/get"} {
			if strings.HasSuffix(r.URL.Path, op) {
				b, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(b))
				var req struct {
					IDs []string `json:"ids"`
				}
				_ = json.Unmarshal(b, &req)
				p.mu.Lock()
				p.batches[op] = append(p.batches[op], len(req.IDs))
				p.mu.Unlock()
			}
		}
		rp.ServeHTTP(w, r)
	})
}

func TestLargeWritesAreSplitIntoTheServersBatchSize(t *testing.T) {
	base := testenv.Chroma(t)
	tests := []struct {
		name      string
		serverMax int
		wantMax   int
	}{
		{"precept's cap of 1000", 0, 1000},
		{"a lower server limit", 300, 300},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &recordingProxy{batches: map[string][]int{}, maxBatch: tt.serverMax}
			srv := httptest.NewServer(p.handler(t, base))
			defer srv.Close()
			spec := vectorindex.Spec{Embedder: "batch", Dimension: 8}
			idx, _ := openT(t, Options{URL: srv.URL, CollectionPrefix: prefix(fmt.Sprint("batch", i)), Spec: spec})
			vs := indextest.RandomVectors(rand.New(rand.NewPCG(1, 2)), 2500, spec.Dimension, "b")
			if err := idx.Upsert(context.Background(), vs); err != nil {
				t.Fatal(err)
			}
			ids := make([]string, len(vs))
			for i, v := range vs {
				ids[i] = v.ID
			}
			if err := idx.Delete(context.Background(), ids[:2200]); err != nil {
				t.Fatal(err)
			}
			if n, err := idx.Count(context.Background()); err != nil || n != 300 {
				t.Fatalf("count = %d, %v; want 300", n, err)
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			for op, sizes := range p.batches {
				total := 0
				for _, n := range sizes {
					if n > tt.wantMax {
						t.Errorf("%s request with %d IDs, want ≤ %d", op, n, tt.wantMax)
					}
					total += n
				}
				if want := map[string]int{"/upsert": 2500, "/get": 2500, "/delete": 2200}[op]; total != want {
					t.Errorf("%s requests carried %d IDs in all, want %d", op, total, want)
				}
			}
		})
	}
}

// fakeChroma answers pre-flight and fails everything else with a message
// that repeats the credentials it was sent, as a careless proxy might.
func fakeChroma(t *testing.T, seen chan<- http.Header) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case seen <- r.Header.Clone():
		default:
		}
		if strings.HasSuffix(r.URL.Path, "/pre-flight-checks") {
			fmt.Fprint(w, `{"max_batch_size":100}`)
			return
		}
		w.WriteHeader(http.StatusForbidden)
		msg := fmt.Sprintf("denied %s %s for http://%s%s", r.Header.Get("Authorization"), r.Header.Get("X-Chroma-Token"), r.Host, r.URL.Path)
		json.NewEncoder(w).Encode(map[string]string{"error": "AuthError", "message": msg})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestAuthHeadersAreSentAndNeverLeakIntoErrors(t *testing.T) {
	spec := vectorindex.Spec{Embedder: "e", Dimension: 4}
	tests := []struct {
		name       string
		opts       func(base string) Options
		header     string
		wantHeader string
		secret     string
	}{
		{
			name:       "bearer token",
			opts:       func(base string) Options { return Options{URL: base, Spec: spec, Token: "tok-123456"} },
			header:     "Authorization",
			wantHeader: "Bearer tok-123456",
			secret:     "tok-123456",
		},
		{
			name: "x-chroma-token",
			opts: func(base string) Options {
				return Options{URL: base, Spec: spec, Token: "tok-abcdef", TokenHeader: XChromaTokenHeader}
			},
			header:     "X-Chroma-Token",
			wantHeader: "tok-abcdef",
			secret:     "tok-abcdef",
		},
		{
			name: "basic auth from the URL",
			opts: func(base string) Options {
				u, _ := url.Parse(base)
				u.User = url.UserPassword("precept", "pa55word")
				return Options{URL: u.String(), Spec: spec}
			},
			header:     "Authorization",
			wantHeader: "Basic cHJlY2VwdDpwYTU1d29yZA==",
			secret:     "pa55word",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen := make(chan http.Header, 1)
			srv := fakeChroma(t, seen)
			_, _, err := Open(context.Background(), tt.opts(srv.URL))
			if err == nil {
				t.Fatal("open against a server that refuses: no error")
			}
			if got := (<-seen).Get(tt.header); got != tt.wantHeader {
				t.Errorf("%s header = %q, want %q", tt.header, got, tt.wantHeader)
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.Status != http.StatusForbidden || ce.Kind != "AuthError" {
				t.Errorf("error %v, want an *Error with HTTP 403 AuthError", err)
			}
			if msg := err.Error(); strings.Contains(msg, tt.secret) || strings.Contains(msg, "cHJlY2VwdDpwYTU1d29yZA") || strings.Contains(msg, "/api/v2/") {
				t.Errorf("error leaks credentials or request URLs: %s", msg)
			}
		})
	}
}

func TestUnreachableServerErrorNamesHostNotCredentials(t *testing.T) {
	l := httptest.NewServer(http.NotFoundHandler())
	addr := l.Listener.Addr().String()
	l.Close() // nothing listens there now
	_, _, err := Open(context.Background(), Options{URL: "http://precept:hunter2@" + addr, Spec: vectorindex.Spec{Embedder: "e", Dimension: 4}, Timeout: 2 * time.Second})
	if err == nil {
		t.Fatal("open against a closed port: no error")
	}
	if msg := err.Error(); strings.Contains(msg, "hunter2") || !strings.Contains(msg, addr) {
		t.Errorf("error %q: want the address and no password", msg)
	}
}

func TestTimeoutBoundsEachRequest(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
	}))
	defer srv.Close()
	defer close(release)
	start := time.Now()
	_, _, err := Open(context.Background(), Options{URL: srv.URL, Spec: vectorindex.Spec{Embedder: "e", Dimension: 4}, Timeout: 200 * time.Millisecond})
	if err == nil {
		t.Fatal("open against a hung server: no error")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("open took %s with a 200ms timeout", d)
	}
}

func TestOpenLeavesHTTPDefaultClientAlone(t *testing.T) {
	before := http.DefaultClient.Transport
	srv := fakeChroma(t, nil)
	Open(context.Background(), Options{URL: srv.URL, Spec: vectorindex.Spec{Embedder: "e", Dimension: 4}})
	if http.DefaultClient.Transport != before {
		t.Error("Open replaced http.DefaultClient.Transport")
	}
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", u, resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

func postJSON(t *testing.T, u string, body []byte) {
	t.Helper()
	resp, err := http.Post(u, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s: %d %s", u, resp.StatusCode, b)
	}
}
