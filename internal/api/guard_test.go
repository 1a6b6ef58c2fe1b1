package api

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
)

// value reads a counter's or a gauge's value.
func value(m prometheus.Metric) float64 {
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		return -1
	}
	return out.GetCounter().GetValue() + out.GetGauge().GetValue()
}

func TestLoopbackHostNames(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "localhost:8080": true, "LOCALHOST:1": true,
		"127.0.0.1": true, "127.0.0.1:8080": true, "127.9.8.7:80": true,
		"[::1]": true, "[::1]:8080": true, "::1": true,
		"": false, "attacker.example": false, "attacker.example:8080": false,
		"localhost.attacker.example": false, "127.0.0.1.nip.io:8080": false,
		"0.0.0.0:8080": false, "[::]:8080": false, "10.0.0.1": false, "localhost:8080@attacker.example": false, "localhost:": false, "localhost:99999": false,
	} {
		if got := LoopbackHost(host); got != want {
			t.Errorf("LoopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}

// untouchable is a request body that fails the test if anything reads it.
type untouchable struct{ t *testing.T }

func (u untouchable) Read([]byte) (int, error) {
	u.t.Error("the guard read the body of a request it refuses")
	return 0, io.EOF
}

func (untouchable) Close() error { return nil }

// credential is a token as the authenticator keeps it.
func credential(name string, role precept.Role, token string) precept.Credential {
	return precept.Credential{Identity: precept.Identity{Name: name, Role: role}, Digest: precept.TokenDigest(token)}
}

func testGuard(t *testing.T, opts GuardOptions) *Guard {
	t.Helper()
	auth, err := NewAuthenticator([]precept.Credential{
		credential("dashboard", precept.RoleReader, "reader-token-0123456789"),
		credential("pipeline", precept.RoleRecorder, "recorder-token-0123456789"),
	})
	if err != nil {
		t.Fatal(err)
	}
	return NewGuard(auth, opts)
}

// TestRefusalsTakeTheFormOfTheCallersProtocol: Connect clients get a JSON
// error with the HTTP status of its code, gRPC and gRPC-Web clients a
// grpc-status, anyone else plain HTTP; the body is never read and the
// handler never runs.
func TestRefusalsTakeTheFormOfTheCallersProtocol(t *testing.T) {
	g := testGuard(t, GuardOptions{})
	h := g.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("the handler ran") }))
	tests := []struct {
		name, contentType, token string
		status                   int
		grpcStatus, body         string
	}{
		{"connect without a token", "application/json", "", 401, "", `"code":"unauthenticated"`},
		{"connect with an unknown token", "application/proto", "nobody-0123456789", 401, "", `"message":"unknown token"`},
		{"connect as a reader", "application/json", "reader-token-0123456789", 403, "", `"message":"dashboard has role reader; RecordFeedback needs recorder"`},
		{"gRPC without a token", "application/grpc", "", 200, "16", ""},
		{"gRPC as a reader", "application/grpc+proto", "reader-token-0123456789", 200, "7", ""},
		{"gRPC-Web without a token", "application/grpc-web+proto", "", 200, "16", ""},
		{"plain HTTP without a token", "text/plain", "", 401, "", "missing bearer token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, preceptv1connect.FeedbackServiceRecordFeedbackProcedure, untouchable{t})
			req.ContentLength = 8 << 20
			req.Header.Set("Content-Type", tt.contentType)
			if tt.token != "" {
				req.Header.Set("Authorization", "Bearer "+tt.token)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			res := rec.Result()
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != tt.status || !strings.Contains(string(body), tt.body) {
				t.Fatalf("answer %d %s, want %d with %s", res.StatusCode, body, tt.status, tt.body)
			}
			if got := res.Header.Get("Grpc-Status") + res.Trailer.Get("Grpc-Status"); got != tt.grpcStatus {
				t.Fatalf("grpc-status %q, want %q", got, tt.grpcStatus)
			}
			if res.Header.Get("Connection") != "close" {
				t.Errorf("a refused HTTP/1.1 request with a body pending is kept open")
			}
			if tt.status == 401 && res.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("401 without WWW-Authenticate")
			}
		})
	}
	if got := value(g.refused.WithLabelValues("unauthenticated")); got != 5 {
		t.Errorf("counted %v unauthenticated refusals, want 5", got)
	}
}

// TestOnlyPreceptRPCsNeedATokenButEveryBodyIsBounded: health, reflection,
// /metrics and Slack's endpoints are passed on without a token, as
// before; a body declared larger than the limit is refused on any path.
func TestOnlyPreceptRPCsNeedATokenButEveryBodyIsBounded(t *testing.T) {
	g := testGuard(t, GuardOptions{MaxBodyBytes: 1 << 20})
	served := 0
	h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served++ }))
	for _, path := range []string{"/metrics", "/healthz", "/grpc.health.v1.Health/Check", "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", "/slack/interactions"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader("x")))
		if rec.Code != http.StatusOK {
			t.Errorf("%s without a token: %d %s", path, rec.Code, rec.Body)
		}
	}
	if served != 5 {
		t.Fatalf("served %d of 5", served)
	}
	for path, want := range map[string]int{"/slack/interactions": http.StatusRequestEntityTooLarge, "/grpc.health.v1.Health/Check": http.StatusTooManyRequests} {
		req := httptest.NewRequest(http.MethodPost, path, untouchable{t})
		req.ContentLength = 2 << 20
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want || !strings.Contains(rec.Body.String(), "server.max_body_bytes") {
			t.Errorf("%s with a 2 MiB body: %d %s, want %d", path, rec.Code, rec.Body, want)
		}
	}
}

// blockingBody is a request body whose bytes are released by the test.
type blockingBody struct {
	*io.PipeReader
	w *io.PipeWriter
}

func newBlockingBody() blockingBody {
	r, w := io.Pipe()
	return blockingBody{r, w}
}

// TestTheInFlightBoundMakesBodiesWaitThenRefusesThem: declared bodies
// hold their length until the handler returns; one that finds no room
// within InFlightWait is refused without being read; room that is given
// back is taken by the next.
func TestTheInFlightBoundMakesBodiesWaitThenRefusesThem(t *testing.T) {
	const wait = 100 * time.Millisecond
	g := testGuard(t, GuardOptions{MaxInFlightBodyBytes: 100, InFlightWait: wait})
	h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
	}))
	post := func(length int64, body io.ReadCloser) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/healthz", body)
		req.ContentLength = length
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	holder := newBlockingBody()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); post(80, holder) }()
	deadline := time.Now().Add(5 * time.Second)
	for value(g.held) != 80 {
		if time.Now().After(deadline) {
			t.Fatal("the first body never held its length")
		}
		time.Sleep(time.Millisecond)
	}

	began := time.Now()
	if rec := post(30, untouchable{t}); rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("a body beyond the bound: %d %s", rec.Code, rec.Body)
	}
	if took := time.Since(began); took < wait {
		t.Errorf("refused after %s, before waiting %s", took, wait)
	}

	waiting := make(chan int)
	go func() { waiting <- post(30, io.NopCloser(strings.NewReader(strings.Repeat("x", 30)))).Code }()
	time.Sleep(wait / 4)
	holder.w.Write([]byte(strings.Repeat("x", 80)))
	holder.w.Close()
	wg.Wait()
	if code := <-waiting; code != http.StatusOK {
		t.Fatalf("a body that waited for room: %d", code)
	}
	if held := value(g.held); held != 0 {
		t.Fatalf("%v bytes still held after every handler returned", held)
	}
}

// TestBodiesOfUnknownLengthTakeRoomAsTheyArrive: without a Content-Length
// (HTTP/2, chunked) a body takes the bound in steps while it is read,
// gives back what it did not use at its end, and fails with
// resource_exhausted when no room is left.
func TestBodiesOfUnknownLengthTakeRoomAsTheyArrive(t *testing.T) {
	g := testGuard(t, GuardOptions{MaxInFlightBodyBytes: 3 * growStep, InFlightWait: 50 * time.Millisecond})
	var atEnd float64
	var readErr error
	h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, readErr = io.ReadAll(r.Body)
		atEnd = value(g.held)
	}))
	post := func(n int) {
		req := httptest.NewRequest(http.MethodPost, "/healthz", io.NopCloser(strings.NewReader(strings.Repeat("x", n))))
		req.ContentLength = -1
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	post(2*growStep + 100)
	if readErr != nil || atEnd != 2*growStep+100 {
		t.Fatalf("a body of %d bytes held %v at its end (err %v)", 2*growStep+100, atEnd, readErr)
	}
	post(4 * growStep)
	if connect.CodeOf(readErr) != connect.CodeResourceExhausted || !strings.Contains(readErr.Error(), "server.max_in_flight_body_bytes") {
		t.Fatalf("a body beyond the bound: %v", readErr)
	}
	if held := value(g.held); held != 0 {
		t.Fatalf("%v bytes held after the handlers returned", held)
	}
}

// TestABodyThatStopsArrivingFailsWithDeadlineExceeded: over a real
// connection, a body that stalls fails at BodyTimeout with an error that
// names the setting.
func TestABodyThatStopsArrivingFailsWithDeadlineExceeded(t *testing.T) {
	g := testGuard(t, GuardOptions{BodyTimeout: 100 * time.Millisecond})
	got := make(chan error, 1)
	srv := httptest.NewServer(g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		got <- err
	})))
	defer srv.Close()
	body := newBlockingBody()
	defer body.w.Close()
	go body.w.Write([]byte("the first part"))
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/healthz", body)
	req.ContentLength = 1000
	go func() {
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case err := <-got:
		var ce *connect.Error
		if !errors.As(err, &ce) || ce.Code() != connect.CodeDeadlineExceeded || !strings.Contains(err.Error(), "server.body_timeout") {
			t.Fatalf("stalled body: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a stalled body was still being read after 5s")
	}
}

// TestTheConnectErrorBodyIsJSON pins the shape Connect clients parse.
func TestTheConnectErrorBodyIsJSON(t *testing.T) {
	g := testGuard(t, GuardOptions{})
	req := httptest.NewRequest(http.MethodPost, preceptv1connect.PingServicePingProcedure, strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	g.Wrap(http.NotFoundHandler()).ServeHTTP(rec, req)
	var e struct{ Code, Message string }
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Code != "unauthenticated" || !strings.Contains(e.Message, "Authorization: Bearer") {
		t.Fatalf("error body %s (%v)", rec.Body, err)
	}
}

// TestUnauthenticatedBodiesCannotTakeTheRoomOfRPCs (review finding):
// requests the guard does not authenticate could hold the whole in-flight
// bound with stalled bodies, and authenticated uploads were then refused
// as busy. They now have their own small pool and a 1 MiB cap.
func TestUnauthenticatedBodiesCannotTakeTheRoomOfRPCs(t *testing.T) {
	const wait = 100 * time.Millisecond
	g := testGuard(t, GuardOptions{MaxBodyBytes: 8 << 20, MaxInFlightBodyBytes: 16 << 20, InFlightWait: wait})
	h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
	}))
	post := func(path string, length int64, body io.ReadCloser, token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, path, body)
		req.ContentLength = length
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	if rec := post("/healthz", 2<<20, untouchable{t}, ""); rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a 2 MiB body to an unauthenticated path: %d %s", rec.Code, rec.Body)
	}
	// Eight stalled 1 MiB uploads without a token fill their pool…
	var holders []blockingBody
	var wg sync.WaitGroup
	for range 8 {
		b := newBlockingBody()
		holders = append(holders, b)
		wg.Add(1)
		go func() { defer wg.Done(); post("/grpc.health.v1.Health/Check", 1<<20, b, "") }()
	}
	deadline := time.Now().Add(5 * time.Second)
	for value(g.held) != 8<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("held %v bytes, want 8 MiB", value(g.held))
		}
		time.Sleep(time.Millisecond)
	}
	if rec := post("/healthz", 1<<20, untouchable{t}, ""); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("a ninth unauthenticated upload: %d", rec.Code)
	}
	// …and an authenticated RPC still finds room.
	body := io.NopCloser(strings.NewReader(strings.Repeat("x", 4<<20)))
	if rec := post("/precept.v1.FeedbackService/RecordFeedback", 4<<20, body, "recorder-token-0123456789"); rec.Code != http.StatusOK {
		t.Fatalf("an authenticated 4 MiB upload beside them: %d %s", rec.Code, rec.Body)
	}
	for _, b := range holders {
		b.w.CloseWithError(io.ErrUnexpectedEOF)
	}
	wg.Wait()
	if held := value(g.held); held != 0 {
		t.Fatalf("%v bytes still held", held)
	}
}
