package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/internal/api"
)

// signinCookie carries the sign-in form's CSRF token (double submit): a
// page on another site cannot sign a browser in under its own token.
const signinCookie = "precept_signin"

// handlerFunc is a page handler; an error it returns is rendered as an
// error page with the status the error calls for.
type handlerFunc func(w http.ResponseWriter, r *http.Request, q *request) error

// page serves a GET: the visitor must have a session (or the server has
// no tokens) and the role need.
func (c *Console) page(need precept.Role, fn handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, ok := c.acc.visitor(w, r, false)
		if !ok {
			return
		}
		if err := validUTF8(r); err != nil {
			c.fail(w, r, q, err)
			return
		}
		c.serve(w, r, q, need, fn)
	})
}

// validUTF8 refuses a path, query or form that is not UTF-8: ids and
// filters become protobuf strings, which must be.
func validUTF8(r *http.Request) error {
	ok := utf8.ValidString(r.URL.Path)
	for _, vals := range []url.Values{r.URL.Query(), r.PostForm} {
		for k, vs := range vals {
			ok = ok && utf8.ValidString(k)
			for _, v := range vs {
				ok = ok && utf8.ValidString(v)
			}
		}
	}
	if !ok {
		return invalidArgument("the request is not valid UTF-8")
	}
	return nil
}

// action serves a POST: as page, and the form must carry the session's
// CSRF token and come from the console's own pages.
func (c *Console) action(need precept.Role, fn handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		q, ok := c.acc.visitor(w, r, true)
		if !ok {
			return
		}
		if err := checkOrigin(r); err != nil {
			c.fail(w, r, q, err)
			return
		}
		if err := r.ParseForm(); err != nil {
			c.fail(w, r, q, invalidArgument("the form could not be read: %v", err))
			return
		}
		if !sameToken(r.PostForm.Get("csrf"), q.session.CSRF) {
			c.fail(w, r, q, forbidden("this form has no valid CSRF token; reload the page and try again"))
			return
		}
		if err := validUTF8(r); err != nil {
			c.fail(w, r, q, err)
			return
		}
		c.serve(w, r, q, need, fn)
	})
}

// maxFormBytes bounds a console form: a note or a reason.
const maxFormBytes = 64 << 10

func (c *Console) serve(w http.ResponseWriter, r *http.Request, q *request, need precept.Role, fn handlerFunc) {
	if !q.id.Allows(need) {
		c.fail(w, r, q, forbidden("%s has role %s; this needs %s", q.id.Name, q.id.Role, need))
		return
	}
	if err := fn(w, r, q); err != nil {
		c.fail(w, r, q, err)
	}
}

// visitor finds the request's session. Without one it sends a browser
// to sign in (GET) or refuses (POST). A server without tokens stores no
// sessions: the local admin's browser gets a random cookie on its first
// GET, and its CSRF token is derived from that cookie (localSession).
func (c *accounts) visitor(w http.ResponseWriter, r *http.Request, post bool) (*request, bool) {
	ctx := r.Context()
	value := c.cookies.value(r, sessionCookie)
	if c.auth.Open() {
		if !validID(value) {
			if post {
				c.fail(w, r, nil, forbidden("this form has no valid CSRF token; reload the page and try again"))
				return nil, false
			}
			value = randomToken()
			c.cookies.set(w, r, sessionCookie, value, c.sessionMax)
		}
		id := api.LocalIdentity
		return &request{ctx: api.InProcess(ctx, id), id: id, session: c.localSession(value)}, true
	}
	sess, err := c.sessions.get(ctx, value)
	if err != nil && !errors.Is(err, errNoSession) {
		c.fail(w, r, nil, unavailable("sessions cannot be read: %v", err))
		return nil, false
	}
	var id precept.Identity
	if sess != nil {
		var ok bool
		if id, ok = c.identity(sess); !ok {
			c.sessions.revoke(ctx, sess.Key)
			sess = nil
		}
	}
	if sess == nil {
		if post || r.URL.Path == Prefix+"events" {
			c.fail(w, r, nil, unauthenticated("your session has expired or was revoked; sign in again"))
		} else {
			http.Redirect(w, r, Prefix+"signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		}
		return nil, false
	}
	return &request{ctx: api.InProcess(ctx, id), id: id, session: sess}, true
}

// localSession is the local admin's session on a server without tokens:
// nothing is stored, and the CSRF token is an HMAC of the cookie under a
// key of this process (a restart asks for a page reload before a form).
func (c *accounts) localSession(cookie string) *session {
	mac := hmac.New(sha256.New, c.localKey)
	mac.Write([]byte(cookie))
	return &session{Key: digest(cookie), Name: api.LocalIdentity.Name, CSRF: base64.RawURLEncoding.EncodeToString(mac.Sum(nil)), local: true}
}

// validID reports whether s looks like a session id randomToken made.
func validID(s string) bool {
	if len(s) != 43 {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(s)
	return err == nil
}

// cookies sets and reads the console's cookies: HttpOnly, SameSite=Strict,
// Secure over TLS or when configured.
type cookies struct {
	// secureAlways marks cookies Secure on plain HTTP too (ui.secure_cookies).
	secureAlways bool
}

// name is a cookie's name: with the __Secure- prefix when the cookie is
// Secure, so a sibling host on plain HTTP cannot plant one.
func (k cookies) name(r *http.Request, name string) string {
	if k.secure(r) {
		return "__Secure-" + name
	}
	return name
}

func (k cookies) secure(r *http.Request) bool { return r.TLS != nil || k.secureAlways }

// value is the value of the request's cookie name, "" without one.
func (k cookies) value(r *http.Request, name string) string {
	ck, err := r.Cookie(k.name(r, name))
	if err != nil {
		return ""
	}
	return ck.Value
}

// identity is who a session is now: its token's current identity.
func (c *accounts) identity(s *session) (precept.Identity, bool) {
	if s.Digest == "" {
		return api.LocalIdentity, c.auth.Open()
	}
	id, ok := c.auth.IdentifyDigest(s.Digest)
	return id, ok && id.Name == s.Name
}

// checkOrigin refuses a state change a browser says came from another
// site. SameSite=Strict already keeps the cookie off such requests; this
// also covers the local admin of a server without tokens.
func checkOrigin(r *http.Request) error {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin":
		// The browser says so; a proxy that rewrites Host must not make
		// the Origin comparison below refuse it.
		return nil
	case "", "none":
	default:
		return forbidden("cross-site form submissions are refused")
	}
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return forbidden("cross-origin form submissions are refused")
		}
	}
	return nil
}

func sameToken(got, want string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

func (k cookies) set(w http.ResponseWriter, r *http.Request, name, value string, age time.Duration) {
	http.SetCookie(w, &http.Cookie{
		Name: k.name(r, name), Value: value, Path: Prefix,
		MaxAge:   int(age / time.Second),
		HttpOnly: true,
		Secure:   k.secure(r),
		SameSite: http.SameSiteStrictMode,
	})
}

// accounts knows who a visitor is: it signs people in and out with their
// API token, keeps their sessions and their cookies, and serves the
// sessions page. It holds only what that takes.
type accounts struct {
	auth       *api.Authenticator
	sessions   *sessions
	cookies    cookies
	throttle   *throttle
	sessionMax time.Duration
	// localKey derives the local admin's CSRF tokens on a server
	// without tokens.
	localKey []byte
	log      *slog.Logger
	renderer
}

// signinData is the sign-in form.
type signinData struct {
	CSRF  string
	Next  string
	Error string
}

func (c *accounts) signinPage(w http.ResponseWriter, r *http.Request) {
	if c.auth.Open() {
		http.Redirect(w, r, Prefix+"queue", http.StatusSeeOther)
		return
	}
	c.renderSignin(w, r, http.StatusOK, "")
}

func (c *accounts) renderSignin(w http.ResponseWriter, r *http.Request, status int, msg string) {
	token := randomToken()
	c.cookies.set(w, r, signinCookie, token, 15*time.Minute)
	c.render(w, r, status, "signin", &view{Title: "Sign in", Data: signinData{CSRF: token, Next: safeNext(r.FormValue("next")), Error: msg}})
}

// signin exchanges a token for a session.
func (c *accounts) signin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := checkOrigin(r); err != nil {
		c.fail(w, r, nil, err)
		return
	}
	if err := r.ParseForm(); err != nil {
		c.fail(w, r, nil, invalidArgument("the form could not be read: %v", err))
		return
	}
	if !sameToken(r.PostForm.Get("csrf"), c.cookies.value(r, signinCookie)) {
		c.renderSignin(w, r, http.StatusForbidden, "The sign-in form expired; try again.")
		return
	}
	if c.auth.Open() {
		http.Redirect(w, r, Prefix+"queue", http.StatusSeeOther)
		return
	}
	// A valid token is accepted whatever the throttle says: people behind
	// one NAT or proxy must not lock each other out.
	id, tokenDigest, err := c.auth.IdentifyToken(strings.TrimSpace(r.PostForm.Get("token")))
	if err != nil {
		addr := client(r)
		if !c.throttle.allowed(addr) {
			w.Header().Set("Retry-After", strconv.Itoa(int(failureWindow/time.Second)))
			c.renderSignin(w, r, http.StatusTooManyRequests, "Too many failed sign-ins from your address; wait a few minutes.")
			return
		}
		c.throttle.failed(addr)
		c.log.Info("console sign-in refused", "reason", precept.ErrorMessage(err), "remote", r.RemoteAddr)
		c.renderSignin(w, r, http.StatusUnauthorized, "That token is not known.")
		return
	}
	sid, _, err := c.sessions.create(r.Context(), id.Name, tokenDigest, r.UserAgent())
	if err != nil {
		c.fail(w, r, nil, unavailable("%v", err))
		return
	}
	c.log.Info("console sign-in", "identity", id.Name, "role", id.Role.String())
	c.cookies.set(w, r, signinCookie, "", -time.Second)
	c.cookies.set(w, r, sessionCookie, sid, c.sessionMax)
	http.Redirect(w, r, safeNext(r.PostForm.Get("next")), http.StatusSeeOther)
}

// safeNext keeps a post-sign-in redirect inside the console: next is
// parsed, its path decoded and its dot segments resolved (a browser
// resolves "/ui/%2e%2e/x" to "/x"), and only a path under /ui/ with no
// scheme or host is kept, rewritten as that resolved path and its query.
// Anything else sends the visitor to the queue.
func safeNext(next string) string {
	const fallback = Prefix + "queue"
	if !strings.HasPrefix(next, Prefix) || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n\t") {
		return fallback
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" || strings.Contains(u.Path, "\\") {
		return fallback
	}
	clean := path.Clean(u.Path)
	if strings.HasSuffix(u.Path, "/") && clean != "/" {
		clean += "/"
	}
	if !strings.HasPrefix(clean, Prefix) {
		return fallback
	}
	return (&url.URL{Path: clean, RawQuery: u.RawQuery}).String()
}

func (c *accounts) signout(w http.ResponseWriter, r *http.Request, q *request) error {
	if !q.session.local {
		if err := c.sessions.revoke(r.Context(), q.session.Key); err != nil {
			return unavailable("%v", err)
		}
	}
	c.cookies.set(w, r, sessionCookie, "", -time.Second)
	if c.auth.Open() {
		http.Redirect(w, r, Prefix+"queue", http.StatusSeeOther)
		return nil
	}
	http.Redirect(w, r, Prefix+"signin", http.StatusSeeOther)
	return nil
}

// sessionRow is one session on the sessions page.
type sessionRow struct {
	*session
	Role    string
	Current bool
}

// sessionsPerPage is how many sessions the sessions page lists at once.
const sessionsPerPage = 50

// sessionsData is the sessions page.
type sessionsData struct {
	Rows []sessionRow
	// Total is how many sessions match the filter; From and To number
	// the rows shown (1-based).
	Total, From, To int
	// Identity and Role filter the list; Roles are the choices.
	Identity, Role string
	Roles          []string
	Pager          pager
	// Open is true on a server without tokens, which keeps no sessions.
	Open bool
}

func (c *accounts) sessionsPage(w http.ResponseWriter, r *http.Request, q *request) error {
	qs := r.URL.Query()
	d := sessionsData{Open: c.auth.Open(), Identity: strings.TrimSpace(qs.Get("identity")), Role: qs.Get("role"), Roles: []string{"reader", "approver", "admin"}}
	page, err := pageNumber(r)
	if err != nil {
		return err
	}
	if d.Role != "" {
		if _, err := precept.ParseRole(d.Role); err != nil {
			return invalidArgument("role: %q is not a role", clip(d.Role))
		}
	}
	if !d.Open {
		list, err := c.sessions.list(r.Context())
		if err != nil {
			return unavailable("%v", err)
		}
		var rows []sessionRow
		for _, s := range list {
			row := sessionRow{session: s, Current: s.Key == q.session.Key, Role: "none"}
			if id, ok := c.identity(s); ok {
				row.Role = id.Role.String()
			}
			if (d.Identity == "" || s.Name == d.Identity) && (d.Role == "" || row.Role == d.Role) {
				rows = append(rows, row)
			}
		}
		d.Total = len(rows)
		lo := min((page-1)*sessionsPerPage, len(rows))
		hi := min(lo+sessionsPerPage, len(rows))
		d.Rows, d.From, d.To = rows[lo:hi], lo+1, hi
		link := func(n int) string {
			v := url.Values{}
			if d.Identity != "" {
				v.Set("identity", d.Identity)
			}
			if d.Role != "" {
				v.Set("role", d.Role)
			}
			if n > 1 {
				v.Set("page", strconv.Itoa(n))
			}
			if len(v) == 0 {
				return Prefix + "sessions"
			}
			return Prefix + "sessions?" + v.Encode()
		}
		if page > 1 {
			d.Pager.Prev = link(min(page-1, max(1, (len(rows)+sessionsPerPage-1)/sessionsPerPage)))
		}
		if hi < len(rows) {
			d.Pager.Next = link(page + 1)
		}
	}
	c.render(w, r, http.StatusOK, "sessions", &view{Title: "Sessions", Nav: "sessions", Data: d, q: q})
	return nil
}

func (c *accounts) revokeSession(w http.ResponseWriter, r *http.Request, q *request) error {
	key := r.PostForm.Get("session")
	if len(key) != sha256HexLen {
		return invalidArgument("no session named")
	}
	if err := c.sessions.revoke(r.Context(), key); err != nil {
		return unavailable("%v", err)
	}
	c.log.Info("console session revoked", "by", q.id.Name)
	http.Redirect(w, r, Prefix+"sessions?done=revoked", http.StatusSeeOther)
	return nil
}

const sha256HexLen = 64
