package testenv

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

func TestChromiumTabsHaveTheirOwnCookiesAndTheWindowSize(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/set" {
			http.SetCookie(w, &http.Cookie{Name: "who", Value: "alice"})
		}
		w.Header().Set("Content-Type", "text/html")
		if c, err := r.Cookie("who"); err == nil {
			w.Write([]byte("<p id=who>" + c.Value + "</p>"))
			return
		}
		w.Write([]byte("<p id=who>nobody</p>"))
	}))
	defer srv.Close()

	browser := Chromium(t, 800, 600)
	alice, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	defer cancel()
	bob, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	defer cancel()

	if err := chromedp.Do(alice, chromedp.Navigate(srv.URL+"/set"), chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatal(err)
	}
	if got, err := chromedp.Run(alice, chromedp.Text(chromedp.ID("who"))); err != nil || got != "alice" {
		t.Fatalf("alice's tab after her cookie was set: %q, %v", got, err)
	}
	if err := chromedp.Do(bob, chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatal(err)
	}
	if got, err := chromedp.Run(bob, chromedp.Text(chromedp.ID("who"))); err != nil || got != "nobody" {
		t.Errorf("bob's tab sees %q (%v), want no cookie of alice's", got, err)
	}
	if w, err := chromedp.Run(bob, chromedp.Evaluate[int]("window.innerWidth")); err != nil || w != 800 {
		t.Errorf("window.innerWidth = %d (%v), want the window's 800", w, err)
	}
}

func TestChromiumOverrideMustExistAndNamesTheInstallScript(t *testing.T) {
	t.Setenv(ChromiumEnv, filepath.Join(t.TempDir(), "no-such-chromium"))
	_, err := findChromium()
	if err == nil || !strings.Contains(err.Error(), ChromiumEnv) || !strings.Contains(err.Error(), ".ci/install-deps") {
		t.Fatalf("findChromium with a missing override: %v, want an error naming $%s and .ci/install-deps", err, ChromiumEnv)
	}
}

func TestChromiumStartFailureCarriesTheBrowserOutput(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fake-chromium")
	script := "#!/bin/sh\necho 'fake chromium: no display libraries' >&2\nexit 3\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	_, stop, err := startChromium(bin, t.TempDir(), 800, 600, t.Logf)
	defer stop()
	if err == nil || !strings.Contains(err.Error(), "no display libraries") || !strings.Contains(err.Error(), ".ci/install-deps") {
		t.Fatalf("start a browser that exits: %v, want its output and the install hint in the error", err)
	}
}
