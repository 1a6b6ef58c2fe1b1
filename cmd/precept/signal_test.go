package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
)

// cliEnv, set to 1, makes the test binary run the CLI instead of the
// tests: tests that need the CLI in a process of its own (to signal it)
// run the test binary with it.
const cliEnv = "PRECEPT_TEST_RUN_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(cliEnv) == "1" {
		os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// stallingExport sends a few records, then neither more nor the summary
// until the client goes away: an export the user gives up on.
type stallingExport struct {
	preceptv1connect.UnimplementedExportServiceHandler
}

func (stallingExport) Export(ctx context.Context, _ *connect.Request[preceptv1.ExportRequest], s *connect.ServerStream[preceptv1.ExportRecord]) error {
	for _, id := range []string{"d1", "d2", "d3"} {
		rec := &preceptv1.ExportRecord{Record: &preceptv1.ExportRecord_Decision{Decision: &preceptv1.Feedback{
			Decision: &preceptv1.HITLDecision{DecisionId: id, ReviewerId: "erin", ReviewerComment: "use the retry helper"}}}}
		if err := s.Send(rec); err != nil {
			return err
		}
	}
	<-ctx.Done()
	return nil
}

// TestSignalledExportLeavesNoTemporaryFile interrupts exports to a
// directory while the server stalls, once with SIGINT and once with
// SIGTERM: the CLI must remove its temporary files, leave the earlier
// export as it was and exit with 128 + the signal's number.
func TestSignalledExportLeavesNoTemporaryFile(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle(preceptv1connect.NewExportServiceHandler(stallingExport{}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	for _, tt := range []struct {
		format string
		sig    syscall.Signal
		code   int
	}{
		{"csv", syscall.SIGINT, 130},
		{"parquet", syscall.SIGTERM, 143},
	} {
		t.Run(tt.sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			earlier := filepath.Join(dir, "decisions."+tt.format)
			if err := os.WriteFile(earlier, []byte("an earlier export"), 0o600); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(os.Args[0], "--addr", srv.URL, "export", "--format", tt.format, "--out", dir)
			cmd.Env = append(os.Environ(), cliEnv+"=1")
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// The export is under way once its three temporary files exist.
			deadline := time.Now().Add(20 * time.Second)
			for len(tempFiles(t, dir)) < 3 {
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatalf("no temporary files after 20 s; stderr %q", stderr.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err := cmd.Process.Signal(tt.sig); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				<-done
				t.Fatalf("still running 20 s after %s", tt.sig)
			}
			if code := cmd.ProcessState.ExitCode(); code != tt.code || !strings.Contains(stderr.String(), "export cut short, nothing written") {
				t.Errorf("exit %d (%v), stderr %q; want exit %d, export cut short", code, cmd.ProcessState, stderr.String(), tt.code)
			}
			if left := tempFiles(t, dir); len(left) != 0 {
				t.Errorf("temporary files left after %s: %q", tt.sig, left)
			}
			entries, _ := os.ReadDir(dir)
			got, _ := os.ReadFile(earlier)
			if len(entries) != 1 || string(got) != "an earlier export" {
				t.Errorf("the earlier export changed: %d files, decisions %q", len(entries), got)
			}
		})
	}
}

// tempFiles lists the export's temporary files in dir.
func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, ".*.tmp"))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestSignalsStillStopACommandDeafToItsContext reads an event from a
// stdin that never ends: the first SIGINT only cancels the context, which
// a read does not heed, so the default behaviour must be back for the
// next one.
func TestSignalsStillStopACommandDeafToItsContext(t *testing.T) {
	cmd := exec.Command(os.Args[0], "--addr", "http://127.0.0.1:1", "feedback", "record", "-f", "-")
	cmd.Env = append(os.Environ(), cliEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Writing more than a pipe holds returns only once the CLI is
	// reading: past setting up its signals.
	if _, err := stdin.Write(bytes.Repeat([]byte(" "), 1<<20)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.After(20 * time.Second)
	for {
		cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-done:
			if cmd.ProcessState.ExitCode() != -1 {
				t.Fatalf("%v: want killed by the signal", cmd.ProcessState)
			}
			return
		case <-deadline:
			cmd.Process.Kill()
			<-done
			t.Fatal("SIGINT, again and again, did not stop a command reading stdin")
		case <-time.After(100 * time.Millisecond):
		}
	}
}
