package console

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/precept-dev/precept"
)

//go:embed templates/*.html
var templateFS embed.FS

// pages are the parsed templates, one per page, each with the layout.
type pages map[string]*template.Template

func parsePages() (pages, error) {
	// The layout and the partials (files named _*.html) go with every page.
	layout, err := template.New("layout").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/_*.html")
	if err != nil {
		return nil, fmt.Errorf("console templates: %w", err)
	}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	p := pages{}
	for _, n := range names {
		name := strings.TrimSuffix(path.Base(n), ".html")
		if name == "layout" || strings.HasPrefix(name, "_") {
			continue
		}
		t, err := template.Must(layout.Clone()).ParseFS(templateFS, n)
		if err != nil {
			return nil, fmt.Errorf("console template %s: %w", name, err)
		}
		p[name] = t
	}
	return p, nil
}

// view is what every page's template gets.
type view struct {
	Title string
	// Nav names the menu entry to mark as current.
	Nav string
	// Live makes the page reload its content when precept reports a
	// change (docs/console.md, "Live updates").
	Live bool
	// Done is a message about the action that led here.
	Done string
	Data any

	q *request
}

// liveTopics are the change topics each menu entry's pages follow.
var liveTopics = map[string]string{
	"queue":       "rules",
	"rules":       "rules",
	"prompts":     "rules",
	"clusters":    "clusters rules",
	"review":      "clusters",
	"deadletters": "clusters",
}

// Topics are the changes that reload a Live page, "" for none.
func (v *view) Topics() string {
	if !v.Live {
		return ""
	}
	if t, ok := liveTopics[v.Nav]; ok {
		return t
	}
	return "rules clusters"
}

// Who is the signed-in identity's name, empty before sign-in.
func (v *view) Who() string {
	if v.q == nil {
		return ""
	}
	return v.q.id.Name
}

// Role is the signed-in identity's role.
func (v *view) Role() string {
	if v.q == nil {
		return ""
	}
	return v.q.id.Role.String()
}

// CSRF is the token forms carry.
func (v *view) CSRF() string {
	if v.q == nil || v.q.session == nil {
		return ""
	}
	return v.q.session.CSRF
}

// Can reports whether the visitor's role allows what needs role.
func (v *view) Can(role string) bool {
	need, err := precept.ParseRole(role)
	return v.q != nil && err == nil && v.q.id.Allows(need)
}

// doneMessages are the messages a redirect after an action may name:
// fixed texts, so a link cannot put words in the console's mouth.
var doneMessages = map[string]string{
	"approved":   "Your approval was recorded.",
	"rejected":   "The proposal was rejected.",
	"rolledback": "The rule was rolled back.",
	"corrected":  "The correction was recorded.",
	"revoked":    "The session was revoked.",
	"replayed":   "The dead letter was put back on the decision stream.",
	"dropped":    "The dead letter was dropped.",
}

// renderer writes pages and error pages from the parsed templates.
type renderer struct {
	pages pages
	log   *slog.Logger
}

// render writes a page. A template error after the first byte cannot
// change the status any more; rendering into a buffer first keeps a
// half page from being served as a whole one.
func (c renderer) render(w http.ResponseWriter, r *http.Request, status int, name string, v *view) {
	t, ok := c.pages[name]
	if !ok {
		c.log.Error("console page has no template", "page", name)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	if v.Done == "" {
		v.Done = doneMessages[r.URL.Query().Get("done")]
	}
	buf := pageBuffers.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledPage {
			buf.Reset()
			pageBuffers.Put(buf)
		}
	}()
	if err := t.ExecuteTemplate(buf, "layout.html", v); err != nil {
		c.log.Error("console page failed to render", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// pageBuffers are the buffers pages render into, reused: a page is
// rendered whole before it is sent (a template error must not send half
// a page), and an analytics page is a quarter of a MiB; growing a fresh
// buffer for each was garbage the collector paid for at 100k.
var pageBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledPage bounds the buffers kept for reuse.
const maxPooledPage = 1 << 20

// pageError is an error with the HTTP status it calls for and a message
// safe to show.
type pageError struct {
	status int
	msg    string
	// back, when set, is the page to go back to (a proposal to reload).
	back string
}

func (e *pageError) Error() string { return e.msg }

func newPageError(status int, format string, args ...any) error {
	return &pageError{status: status, msg: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return newPageError(http.StatusNotFound, format, args...)
}
func invalidArgument(format string, args ...any) error {
	return newPageError(http.StatusBadRequest, format, args...)
}
func forbidden(format string, args ...any) error {
	return newPageError(http.StatusForbidden, format, args...)
}
func unauthenticated(format string, args ...any) error {
	return newPageError(http.StatusUnauthorized, format, args...)
}
func unavailable(format string, args ...any) error {
	return newPageError(http.StatusServiceUnavailable, format, args...)
}

// statusOf maps an RPC's error code to the page status: the RPC's
// message is already written for clients.
var statusOf = map[connect.Code]int{
	connect.CodeInvalidArgument:    http.StatusBadRequest,
	connect.CodeNotFound:           http.StatusNotFound,
	connect.CodeAlreadyExists:      http.StatusConflict,
	connect.CodeFailedPrecondition: http.StatusConflict,
	connect.CodeAborted:            http.StatusConflict,
	connect.CodePermissionDenied:   http.StatusForbidden,
	connect.CodeUnauthenticated:    http.StatusUnauthorized,
	connect.CodeResourceExhausted:  http.StatusTooManyRequests,
	connect.CodeUnavailable:        http.StatusServiceUnavailable,
	connect.CodeDeadlineExceeded:   http.StatusGatewayTimeout,
	connect.CodeUnimplemented:      http.StatusNotImplemented,
}

// errorData is the error page.
type errorData struct {
	Status  int
	Heading string
	Message string
	Back    string
}

// fail renders err as an error page. Errors of unknown kind are logged
// and shown as an internal error, without their text.
func (c renderer) fail(w http.ResponseWriter, r *http.Request, q *request, err error) {
	status, msg := http.StatusInternalServerError, "Something went wrong on the server; it has been logged."
	var pe *pageError
	var ce *connect.Error
	switch {
	case errors.As(err, &pe):
		status, msg = pe.status, pe.msg
	case errors.As(err, &ce):
		if s, ok := statusOf[ce.Code()]; ok {
			status, msg = s, ce.Message()
		} else {
			c.log.Error("console RPC failed", "path", r.URL.Path, "err", err)
		}
	default:
		c.log.Error("console page failed", "path", r.URL.Path, "err", err)
	}
	// Back goes to the page the visitor came from, on this console only.
	back := r.Referer()
	if u, err := url.Parse(back); err != nil || u.Host != r.Host || !strings.HasPrefix(u.Path, Prefix) {
		back = ""
	}
	var pe2 *pageError
	if errors.As(err, &pe2) && pe2.back != "" {
		back = pe2.back
	}
	c.render(w, r, status, "error", &view{Title: http.StatusText(status), q: q,
		Data: errorData{Status: status, Heading: http.StatusText(status), Message: msg, Back: back}})
}

// funcs are the helpers templates use.
var funcs = template.FuncMap{
	"when": func(v any) string {
		t := asTime(v)
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04 UTC")
	},
	"iso":  func(v any) string { return asTime(v).UTC().Format(time.RFC3339) },
	"ago":  func(v any) string { return ago(asTime(v)) },
	"word": word,
	"pct":  func(f float64) string { return fmt.Sprintf("%.1f%%", f*100) },
	"short": func(s string) string {
		if len(s) > 10 {
			return s[:10]
		}
		return s
	},
	"join":      strings.Join,
	"hasPrefix": strings.HasPrefix,
	"add":       func(a, b int) int { return a + b },
	// seconds shows a duration given in seconds, rounded to the second
	// ("1h0m0s", "42s").
	"seconds": func(s float64) string { return (time.Duration(math.Round(s)) * time.Second).String() },
}

// asTime accepts a time.Time or a protobuf timestamp (nil is zero).
func asTime(v any) time.Time {
	switch t := v.(type) {
	case time.Time:
		return t
	case *timestamppb.Timestamp:
		if t == nil {
			return time.Time{}
		}
		return t.AsTime()
	}
	return time.Time{}
}

// word names an enum value as people read it: PROPOSAL_STATUS_PENDING is
// "PENDING", RULE_STATUS_ROLLED_BACK "ROLLED BACK".
func word(e protoreflect.Enum) string {
	d := e.Descriptor()
	v := d.Values().ByNumber(e.Number())
	if v == nil {
		return fmt.Sprint(e.Number())
	}
	return strings.ReplaceAll(strings.TrimPrefix(string(v.Name()), screaming(string(d.Name()))+"_"), "_", " ")
}

// screaming turns a Go-style name into SCREAMING_SNAKE: ProposalStatus
// is PROPOSAL_STATUS.
func screaming(name string) string {
	var b strings.Builder
	for i, r := range name {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String())
}

// ago says how long ago t was, in the largest whole unit.
func ago(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h ago", int(d/time.Hour))
	default:
		return fmt.Sprintf("%d days ago", int(d/(24*time.Hour)))
	}
}
