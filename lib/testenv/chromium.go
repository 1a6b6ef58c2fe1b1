package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// ChromiumEnv names the environment variable that overrides the browser
// binary (by default Debian's chromium, found on PATH or at
// /usr/bin/chromium).
const ChromiumEnv = "PRECEPT_CHROMIUM"

// chromiumBinary is where Debian's chromium package installs the browser.
const chromiumBinary = "/usr/bin/chromium"

// chromiumInstallHint tells a developer how to get the browser.
const chromiumInstallHint = "run .ci/install-deps (apt-get install chromium)"

// chromiumStartTimeout bounds how long the browser may take to start and
// open its first tab.
const chromiumStartTimeout = 30 * time.Second

// Chromium starts Debian's chromium, headless, with a fresh profile in
// t.TempDir() and a window of width×height CSS pixels, and returns a
// chromedp context for it; the browser is closed when the test ends.
// Every chromedp.NewContext(ctx, chromedp.WithNewBrowserContext()) made
// from it is a tab with a cookie jar of its own, so one browser serves
// several visitors. Chromium keeps a window at least 500 px wide; a
// narrower page (a phone's 390 px) needs chromedp.EmulateViewport in the
// tab. Under -short the test is skipped; a missing or broken
// browser fails it.
func Chromium(t testing.TB, width, height int) context.Context {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs chromium")
	}
	bin, err := findChromium()
	if err != nil {
		t.Fatal(err)
	}
	browser, stop, err := startChromium(bin, t.TempDir(), width, height, t.Logf)
	t.Cleanup(stop)
	if err != nil {
		t.Fatal(err)
	}
	return browser
}

// startChromium starts bin with its profile in dir and opens its first
// tab; stop closes the browser, also after an error. A failure carries
// the browser's own output.
func startChromium(bin, dir string, width, height int, logf func(string, ...any)) (browser context.Context, stop func(), err error) {
	out := &SyncBuffer{}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.UserDataDir(dir),
		chromedp.WindowSize(width, height),
		chromedp.CombinedOutput(out),
		// No GPU in CI; software rendering draws the same pixels.
		chromedp.Flag("disable-gpu", true),
	)
	if os.Getuid() == 0 {
		// Chromium refuses to run as root inside its sandbox.
		opts = append(opts, chromedp.NoSandbox)
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	browser, cancelBrowser := chromedp.NewContext(alloc, chromedp.WithErrorf(func(format string, args ...any) {
		logf("chromium: "+format, args...)
	}))
	stop = func() {
		cancelBrowser()
		cancelAlloc()
	}
	// The first action starts the browser. A timeout on it would end the
	// browser with it, so the deadline is watched from outside.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(browser) }()
	select {
	case err = <-started:
	case <-time.After(chromiumStartTimeout):
		err = fmt.Errorf("no answer within %s", chromiumStartTimeout)
	}
	if err != nil {
		return nil, stop, fmt.Errorf("start %s: %w (%s)\nbrowser output:\n%s", bin, err, chromiumInstallHint, out.String())
	}
	return browser, stop, nil
}

// findChromium returns the browser binary: $PRECEPT_CHROMIUM, else
// chromium on PATH, else Debian's /usr/bin/chromium.
func findChromium() (string, error) {
	if bin := os.Getenv(ChromiumEnv); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("chromium from $%s: %w (unset it to use Debian's chromium: %s)", ChromiumEnv, err, chromiumInstallHint)
		}
		return bin, nil
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p, nil
	}
	if _, err := os.Stat(chromiumBinary); err == nil {
		return chromiumBinary, nil
	}
	return "", errors.New("chromium not found: " + chromiumInstallHint)
}
