package console_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// screenshotsEnv names the folder the browser tests write their
// screenshots to; unset, they go to test-output/console under the module
// root (docs/console.md, "Tests in a real browser").
const screenshotsEnv = "PRECEPT_SCREENSHOTS"

// stepTimeout bounds one browser step: a navigation, a click, a query.
const stepTimeout = 15 * time.Second

// tab is one visitor's browser tab, in a browser context of its own: its
// own cookie jar, so each visitor has their own session.
type tab struct {
	name string
	ctx  context.Context
	base string
}

// newTab opens a tab for name in a fresh browser context of browser.
func (s *server) newTab(t *testing.T, browser context.Context, name string) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	// The first action opens the tab; it must not carry a step's timeout,
	// which would close the tab with it.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open a tab for %s: %v", name, err)
	}
	return &tab{name: name, ctx: ctx, base: s.url}
}

// do runs actions in the tab within stepTimeout; a failure fails the test.
func (b *tab) do(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %s: %v", b.name, what, err)
	}
}

// run runs one action that returns a value.
func run[T any](t *testing.T, b *tab, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %s: %v", b.name, what, err)
	}
	return v
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, b *tab, js string) T {
	t.Helper()
	return run(t, b, "evaluate "+js, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
}

// open navigates to a console path and returns the page's HTTP status.
func (b *tab) open(t *testing.T, path string) int64 {
	t.Helper()
	return run(t, b, "open "+path, chromedp.NavigateResponse(b.base+path)).Status
}

// follow runs an action that leads to another page (a click on a link,
// a form's submit button) and returns the new page's HTTP status.
func (b *tab) follow(t *testing.T, what string, a chromedp.Action[chromedp.Void]) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, a)
	if err != nil {
		t.Fatalf("%s: %s: %v", b.name, what, err)
	}
	return resp.Status
}

// followLink clicks a link and waits for the page it opens, clicking
// again (up to three times) when no page loads within 8 s: on a page that
// follows changes, the content holding the link may be swapped for a
// fresh copy just as it is clicked, and the click then lands on nothing.
// Only for links (GET): a form is never submitted twice.
func (b *tab) followLink(t *testing.T, what, sel string) int64 {
	t.Helper()
	var err error
	for range 3 {
		ctx, cancel := context.WithTimeout(b.ctx, 8*time.Second)
		var resp *network.Response
		resp, err = chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(sel)))
		cancel()
		if err == nil {
			return resp.Status
		}
		if b.ctx.Err() != nil {
			break
		}
	}
	t.Fatalf("%s: %s: %v", b.name, what, err)
	return 0
}

// path is the path of the page the tab shows.
func (b *tab) path(t *testing.T) string {
	t.Helper()
	return eval[string](t, b, "location.pathname + location.search")
}

// has reports whether the page has an element matching the CSS selector.
func (b *tab) has(t *testing.T, sel string) bool {
	t.Helper()
	return eval[bool](t, b, "document.querySelector("+strconv.Quote(sel)+") !== null")
}

// text is the visible text of the first element matching sel, empty when
// there is none.
func (b *tab) text(t *testing.T, sel string) string {
	t.Helper()
	return eval[string](t, b, "(document.querySelector("+strconv.Quote(sel)+") || {}).innerText || ''")
}

// csrf is the CSRF token of the page's sign-out form.
func (b *tab) csrf(t *testing.T) string {
	t.Helper()
	return eval[string](t, b, `(document.querySelector('form.who input[name="csrf"]') || {}).value || ''`)
}

// fetchPost POSTs form fields (a JavaScript object literal) to path with
// the page's fetch, as a script on the page could, and returns the status.
func (b *tab) fetchPost(t *testing.T, path, fields string) int {
	t.Helper()
	return eval[int](t, b, fmt.Sprintf(`fetch(%s, {method: 'POST', body: new URLSearchParams(%s)}).then(r => r.status)`, strconv.Quote(path), fields))
}

// eventually reloads the page until cond holds, or fails after timeout.
func (b *tab) eventually(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: timed out waiting for %s on %s", b.name, what, b.path(t))
		}
		time.Sleep(200 * time.Millisecond)
		b.do(t, "reload", chromedp.Reload())
	}
}

// signIn signs the tab in through the sign-in form, typing the token as
// a person would.
func (b *tab) signIn(t *testing.T, token string) {
	t.Helper()
	if status := b.open(t, "/ui/signin"); status != http.StatusOK {
		t.Fatalf("%s: sign-in page: %d", b.name, status)
	}
	b.do(t, "type the token", chromedp.SendKeys(chromedp.ID("token"), token))
	status := b.follow(t, "submit the sign-in form", chromedp.Click(chromedp.CSS(`form.signin button[type="submit"]`)))
	if p := b.path(t); p != "/ui/queue" || !b.has(t, "form.who") {
		t.Fatalf("%s: after sign-in the tab shows %s (%d), want the queue with a sign-out form", b.name, p, status)
	}
	if who := b.text(t, "form.who span"); !strings.HasPrefix(who, b.name) {
		t.Errorf("%s: the header names %q", b.name, who)
	}
}

// cookie is the tab's session cookie, as the browser keeps it (HttpOnly:
// no script on the page can read it).
func (b *tab) cookie(t *testing.T) *http.Cookie {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{b.base + "/ui/"}})
	if err != nil {
		t.Fatalf("%s: read cookies: %v", b.name, err)
	}
	for _, c := range res.Cookies {
		if c.Name == "precept_session" {
			return &http.Cookie{Name: c.Name, Value: c.Value}
		}
	}
	t.Fatalf("%s: the browser has no session cookie", b.name)
	return nil
}

// focused describes the element that has the keyboard focus.
type focused struct {
	Tag  string `json:"tag"`
	ID   string `json:"id"`
	Href string `json:"href"`
	Text string `json:"text"`
}

func (f focused) String() string {
	s := f.Tag
	if f.ID != "" {
		s += "#" + f.ID
	}
	if f.Href != "" {
		s += "[" + f.Href + "]"
	}
	return s
}

// focusedJS describes document.activeElement; "none" while a page is
// being replaced (a key press that followed a link).
const focusedJS = `(e => e ? {tag: e.tagName.toLowerCase(), id: e.id, href: e.getAttribute('href') || '', text: (e.innerText || '').trim().slice(0, 40)} : {tag: 'none'})(document.activeElement || document.body)`

// press sends one key to the page and returns what has the focus then.
func (b *tab) press(t *testing.T, key string) focused {
	t.Helper()
	b.do(t, "press "+strconv.Quote(key), chromedp.KeyEvent(key))
	return eval[focused](t, b, focusedJS)
}

// tabTo presses Tab until the focus is on an element matching sel, at
// most limit times, and returns the elements passed on the way.
func (b *tab) tabTo(t *testing.T, sel string, limit int) ([]focused, error) {
	t.Helper()
	var path []focused
	for range limit {
		f := b.press(t, kb.Tab)
		path = append(path, f)
		if eval[bool](t, b, "document.activeElement.matches("+strconv.Quote(sel)+")") {
			return path, nil
		}
	}
	return path, fmt.Errorf("%d presses of Tab never reached %s; focus went %v", limit, sel, path)
}

// screenshots is the folder screenshots go to, created if needed.
func screenshots(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(screenshotsEnv)
	if dir == "" {
		root, err := moduleRoot()
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, "test-output", "console")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("screenshot folder: %v", err)
	}
	t.Logf("console screenshots: %s", dir)
	return dir
}

// moduleRoot walks up from the package directory to go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the package directory")
		}
		dir = parent
	}
}

// screenshot writes a full-page PNG of the tab to dir/name-width.png.
func (b *tab) screenshot(t *testing.T, dir, name string, width int) {
	t.Helper()
	png := run(t, b, "screenshot "+name, chromedp.FullScreenshot(100))
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d.png", name, width)), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// viewport makes the tab width CSS pixels wide, as a phone or a desktop
// browser would be.
func (b *tab) viewport(t *testing.T, width int) {
	t.Helper()
	b.do(t, fmt.Sprintf("viewport %d px", width), chromedp.EmulateViewport(int64(width), 900))
}
