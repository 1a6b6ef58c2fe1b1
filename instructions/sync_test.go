package instructions_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/precept-dev/precept/instructions"
	"github.com/precept-dev/precept/lib/gitcli"
	"github.com/precept-dev/precept/lib/testenv"
)

var _ instructions.Remote = (*gitcli.Clone)(nil)

// The target repository's own text, with what editors and people leave:
// CRLF endings, no final newline, trailing blanks, a quoted marker.
var targetFiles = map[string]string{
	"AGENTS.md":                       "# Team guide\r\n\r\nUse tabs.  \r\nNo final newline",
	"CLAUDE.md":                       "Read AGENTS.md first.\n\nSee `<!-- precept:end -->` in docs.\n",
	".github/copilot-instructions.md": "",
	"src/main.go":                     "package main\n",
}

func sync(t *testing.T, url string, auth gitcli.Auth, req instructions.Request) (instructions.Result, error) {
	t.Helper()
	ctx := context.Background()
	clone, err := gitcli.Open(ctx, url, auth, gitcli.Options{Env: []string{"HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1"}},
		req.Base, instructions.Branch(req.Block.Agent))
	if err != nil {
		t.Fatal(err)
	}
	defer clone.Close()
	return instructions.Sync(ctx, clone, req)
}

func request(version, text string) instructions.Request {
	return instructions.Request{
		Base:  "trunk",
		Block: instructions.Block{Agent: "code-writer", Stage: "review", Version: version, Text: text},
	}
}

func TestSyncPushesABranchThatKeepsEveryByteOutsideTheMarkers(t *testing.T) {
	srv := testenv.StartGitServerWithAuth(t, "bot", "tok-s3cret")
	url := srv.CreateRepo(t, "target", "trunk", targetFiles)
	auth := gitcli.Auth{Username: "bot", Password: "tok-s3cret"}
	branch := "precept/instructions/code-writer"

	res, err := sync(t, url, auth, request("v1:aaa111", "Always run the tests.\n"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit == "" || res.UpToDate || res.Branch != branch {
		t.Fatalf("result %+v", res)
	}
	for path, old := range targetFiles {
		got, ok := srv.ReadFile(t, "target", branch, path)
		if !ok {
			t.Fatalf("%s missing on %s", path, branch)
		}
		if path == "src/main.go" {
			if got != old {
				t.Fatalf("src/main.go changed: %q", got)
			}
			continue
		}
		if !strings.HasPrefix(got, old) {
			t.Fatalf("%s: the target's text is not kept byte for byte:\n%q", path, got)
		}
		if v, err := instructions.Recorded([]byte(got), "code-writer"); err != nil || v != "v1:aaa111" {
			t.Fatalf("%s: recorded version %q, %v", path, v, err)
		}
	}
	if got, _ := srv.ReadFile(t, "target", branch, "AGENTS.md"); !strings.Contains(got, "Always run the tests.\r\n<!-- precept:end -->\r\n") {
		t.Fatalf("AGENTS.md block does not use the file's CRLF: %q", got)
	}
	mdc, ok := srv.ReadFile(t, "target", branch, ".cursor/rules/precept-code-writer.mdc")
	if !ok || !strings.HasPrefix(mdc, "---\ndescription: ") || !strings.Contains(mdc, "alwaysApply: true\n") {
		t.Fatalf("cursor rule: %q", mdc)
	}
	if _, ok := srv.ReadFile(t, "target", "trunk", "AGENTS.md"); !ok {
		t.Fatal("trunk lost AGENTS.md")
	}
	if got, _ := srv.ReadFile(t, "target", "trunk", "AGENTS.md"); got != targetFiles["AGENTS.md"] {
		t.Fatalf("the base branch was changed: %q", got)
	}

	msg := testenv.Git(t, srv.Dir("target"), "log", "-1", "--format=%B", branch)
	for _, want := range []string{"Precept-Agent: code-writer", "Precept-Stage: review", "Precept-Prompt-Version: v1:aaa111"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("commit message lacks %q:\n%s", want, msg)
		}
	}
	if trailers := testenv.Git(t, srv.Dir("target"), "log", "-1", "--format=%(trailers:key=Precept-Prompt-Version,valueonly)", branch); trailers != "v1:aaa111" {
		t.Fatalf("git reads the version trailer as %q", trailers)
	}
	if parent := testenv.Git(t, srv.Dir("target"), "rev-parse", branch+"^"); parent != testenv.Git(t, srv.Dir("target"), "rev-parse", "trunk") {
		t.Fatal("the sync commit is not based on the base branch's tip")
	}
	all := testenv.Git(t, srv.Dir("target"), "log", "--all", "-p")
	if strings.Contains(all, "tok-s3cret") {
		t.Fatal("the token reached the repository")
	}

	// The same rules again: no commit.
	tip := testenv.Git(t, srv.Dir("target"), "rev-parse", branch)
	res, err = sync(t, url, auth, request("v1:aaa111", "Always run the tests.\n"))
	if err != nil || !res.UpToDate || res.Commit != "" {
		t.Fatalf("second sync: %+v %v", res, err)
	}
	if now := testenv.Git(t, srv.Dir("target"), "rev-parse", branch); now != tip {
		t.Fatal("a sync with nothing changed moved the branch")
	}

	// New rules replace the block on the branch, still on the base's tip.
	res, err = sync(t, url, auth, request("v1:bbb222", "Always run the tests.\nName errors well.\n"))
	if err != nil || res.Commit == "" {
		t.Fatalf("third sync: %+v %v", res, err)
	}
	got, _ := srv.ReadFile(t, "target", branch, "CLAUDE.md")
	if !strings.HasPrefix(got, targetFiles["CLAUDE.md"]) || !strings.Contains(got, "version=v1:bbb222") || strings.Contains(got, "v1:aaa111") {
		t.Fatalf("CLAUDE.md after the third sync: %q", got)
	}
}

func TestSyncReportsAHandEditAndOverwritesItOnlyWhenTold(t *testing.T) {
	srv := testenv.StartGitServer(t)
	url := srv.CreateRepo(t, "target", "trunk", map[string]string{"AGENTS.md": "# Guide\n"})
	if _, err := sync(t, url, gitcli.Auth{}, request("v1:aaa111", "Rule one.\n")); err != nil {
		t.Fatal(err)
	}
	branch := "precept/instructions/code-writer"

	// Someone merges the pull request, then edits the rules by hand on trunk.
	work := t.TempDir()
	testenv.Git(t, work, "clone", "--quiet", "--branch", branch, url, "c")
	clone := work + "/c"
	agents, err := os.ReadFile(clone + "/AGENTS.md")
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(agents), "Rule one.", "Rule one, as I prefer it.", 1)
	if err := os.WriteFile(clone+"/AGENTS.md", []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.GitAs(t, clone, "Dev", "dev@example.com", "commit", "--quiet", "-am", "tweak the rules")
	testenv.Git(t, clone, "push", "--quiet", "origin", "HEAD:trunk")
	tip := testenv.Git(t, srv.Dir("target"), "rev-parse", branch)

	req := request("v1:bbb222", "Rule two.\n")
	req.Formats = []instructions.Format{instructions.AgentsMD, instructions.ClaudeMD}
	_, err = sync(t, url, gitcli.Auth{}, req)
	if !errors.Is(err, instructions.ErrHandEdited) || !strings.Contains(err.Error(), "trunk: AGENTS.md: ") || !strings.Contains(err.Error(), "edited by hand") {
		t.Fatalf("err = %v", err)
	}
	if now := testenv.Git(t, srv.Dir("target"), "rev-parse", branch); now != tip {
		t.Fatal("a refused sync pushed")
	}
	if got, _ := srv.ReadFile(t, "target", "trunk", "AGENTS.md"); got != edited {
		t.Fatal("the hand edit on trunk changed")
	}

	req.Overwrite = true
	res, err := sync(t, url, gitcli.Auth{}, req)
	if err != nil || res.Commit == "" {
		t.Fatalf("overwrite: %+v %v", res, err)
	}
	got, _ := srv.ReadFile(t, "target", branch, "AGENTS.md")
	if !strings.HasPrefix(got, "# Guide\n") || !strings.Contains(got, "Rule two.") || strings.Contains(got, "as I prefer it") {
		t.Fatalf("AGENTS.md after overwrite: %q", got)
	}
}

func TestSyncLeavesASymlinkedInstructionFileAlone(t *testing.T) {
	srv := testenv.StartGitServer(t)
	url := srv.CreateRepo(t, "target", "trunk", map[string]string{"AGENTS.md": "# Guide\n"})
	work := t.TempDir()
	testenv.Git(t, work, "clone", "--quiet", url, "c")
	if err := os.Symlink("AGENTS.md", work+"/c/CLAUDE.md"); err != nil {
		t.Fatal(err)
	}
	testenv.Git(t, work+"/c", "add", "CLAUDE.md")
	testenv.GitAs(t, work+"/c", "Dev", "dev@example.com", "commit", "--quiet", "-m", "link")
	testenv.Git(t, work+"/c", "push", "--quiet", "origin", "trunk")

	req := request("v1:aaa111", "Rule one.\n")
	req.Formats = []instructions.Format{instructions.AgentsMD, instructions.ClaudeMD}
	res, err := sync(t, url, gitcli.Auth{}, req)
	if err != nil || len(res.Files) != 2 || res.Files[1].Skipped == "" {
		t.Fatalf("%+v %v", res, err)
	}
	if mode := testenv.Git(t, srv.Dir("target"), "ls-tree", res.Branch, "CLAUDE.md"); !strings.HasPrefix(mode, "120000") {
		t.Fatalf("CLAUDE.md is no longer a link: %s", mode)
	}
}

func TestSyncWithWrongCredentialsFailsWithoutShowingThem(t *testing.T) {
	// The remote's refusal quotes the password, so git prints it.
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pw, ok := r.BasicAuth()
		if !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		pkt := func(s string) string { return fmt.Sprintf("%04x%s", len(s)+4, s) }
		w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
		_, _ = fmt.Fprint(w, pkt("# service=git-upload-pack\n")+"0000"+pkt("ERR wrong token "+pw+"\n"))
	}))
	defer remote.Close()
	_, err := instructions.SyncURL(context.Background(), remote.URL+"/target.git", gitcli.Auth{Username: "bot", Password: "wrong-token-xyz"},
		gitcli.Options{Env: []string{"HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1"}}, request("v1:aaa111", "Rule one.\n"))
	if err == nil {
		t.Fatal("wrong credentials were accepted")
	}
	if strings.Contains(err.Error(), "wrong-token-xyz") || !strings.Contains(err.Error(), "wrong token ***") {
		t.Fatalf("the error shows the token, or not the remote's refusal: %v", err)
	}
}

func TestSyncRefusesAHandEditPushedToTheOpenPullRequest(t *testing.T) {
	srv := testenv.StartGitServer(t)
	url := srv.CreateRepo(t, "target", "trunk", map[string]string{"AGENTS.md": "# Guide\n"})
	if _, err := sync(t, url, gitcli.Auth{}, request("v1:aaa111", "Rule one.\n")); err != nil {
		t.Fatal(err)
	}
	branch := "precept/instructions/code-writer"
	work := t.TempDir()
	testenv.Git(t, work, "clone", "--quiet", "--branch", branch, url, "c")
	agents, _ := os.ReadFile(work + "/c/AGENTS.md")
	if err := os.WriteFile(work+"/c/AGENTS.md", []byte(strings.Replace(string(agents), "Rule one.", "Rule one!", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.GitAs(t, work+"/c", "Reviewer", "r@example.com", "commit", "--quiet", "-am", "suggestion")
	testenv.Git(t, work+"/c", "push", "--quiet", "origin", branch)
	tip := testenv.Git(t, srv.Dir("target"), "rev-parse", branch)

	_, err := sync(t, url, gitcli.Auth{}, request("v1:bbb222", "Rule two.\n"))
	if !errors.Is(err, instructions.ErrHandEdited) || !strings.Contains(err.Error(), branch+": AGENTS.md: ") {
		t.Fatalf("err = %v", err)
	}
	if now := testenv.Git(t, srv.Dir("target"), "rev-parse", branch); now != tip {
		t.Fatal("the reviewer's commit was replaced")
	}
}

// pushAsAPerson commits edit (applied to the file's text) and extra files
// as a person would, on branch of the target, and returns the commit.
func pushAsAPerson(t *testing.T, url, branch, path string, edit func(string) string, extra map[string]string) string {
	t.Helper()
	work := t.TempDir()
	testenv.Git(t, work, "clone", "--quiet", "--branch", branch, url, "c")
	if path != "" {
		old, err := os.ReadFile(work + "/c/" + path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(work+"/c/"+path, []byte(edit(string(old))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for p, content := range extra {
		if err := os.WriteFile(work+"/c/"+p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		testenv.Git(t, work+"/c", "add", p)
	}
	testenv.GitAs(t, work+"/c", "Reviewer", "r@example.com", "commit", "--quiet", "-am", "reviewer fix")
	testenv.Git(t, work+"/c", "push", "--quiet", "origin", branch)
	return testenv.Git(t, work+"/c", "rev-parse", "HEAD")
}

func TestSyncRefusesToDiscardAPersonsCommitOnTheSyncBranch(t *testing.T) {
	srv := testenv.StartGitServer(t)
	url := srv.CreateRepo(t, "target", "trunk", map[string]string{"AGENTS.md": "# Guide\n"})
	if _, err := sync(t, url, gitcli.Auth{}, request("v1:aaa111", "Rule one.\n")); err != nil {
		t.Fatal(err)
	}
	branch := "precept/instructions/code-writer"
	theirs := pushAsAPerson(t, url, branch, "AGENTS.md", func(s string) string {
		return strings.Replace(s, "# Guide\n", "# Guide\n\nA note outside the markers.\n", 1)
	}, map[string]string{"NOTES.md": "reviewer file\n"})

	_, err := sync(t, url, gitcli.Auth{}, request("v1:bbb222", "Rule two.\n"))
	if !errors.Is(err, instructions.ErrForeignCommit) || !strings.Contains(err.Error(), branch) || !strings.Contains(err.Error(), theirs[:12]) {
		t.Fatalf("err = %v", err)
	}
	if now := testenv.Git(t, srv.Dir("target"), "rev-parse", branch); now != theirs {
		t.Fatal("the person's commit was replaced")
	}

	req := request("v1:bbb222", "Rule two.\n")
	req.Overwrite = true
	if res, err := sync(t, url, gitcli.Auth{}, req); err != nil || res.Commit == "" {
		t.Fatalf("overwrite: %+v %v", res, err)
	}
	if _, ok := srv.ReadFile(t, "target", branch, "NOTES.md"); ok {
		t.Fatal("overwrite kept the person's commit")
	}
}

func TestSyncResetsABranchHoldingRulesTheBaseNoLongerNeeds(t *testing.T) {
	srv := testenv.StartGitServer(t)
	url := srv.CreateRepo(t, "target", "trunk", map[string]string{"AGENTS.md": "# Guide\n"})
	branch := "precept/instructions/code-writer"
	// v1 is synced and merged.
	if _, err := sync(t, url, gitcli.Auth{}, request("v1:aaa111", "Rule one.\n")); err != nil {
		t.Fatal(err)
	}
	testenv.Git(t, srv.Dir("target"), "update-ref", "refs/heads/trunk", branch)
	trunk := testenv.Git(t, srv.Dir("target"), "rev-parse", "trunk")
	// v2 adds a rule; its pull request is open.
	if res, err := sync(t, url, gitcli.Auth{}, request("v1:bbb222", "Rule one.\nA rule later rolled back.\n")); err != nil || res.Commit == "" {
		t.Fatalf("v2: %+v %v", res, err)
	}
	// The rule is rolled back: the prompt is v1 again, which trunk holds.
	res, err := sync(t, url, gitcli.Auth{}, request("v1:aaa111", "Rule one.\n"))
	if err != nil || !res.UpToDate || !res.Reset {
		t.Fatalf("after the rollback: %+v %v", res, err)
	}
	if now := testenv.Git(t, srv.Dir("target"), "rev-parse", branch); now != trunk {
		t.Fatal("the sync branch still holds the rolled-back rule")
	}
	// Once reset, nothing more happens.
	res, err = sync(t, url, gitcli.Auth{}, request("v1:aaa111", "Rule one.\n"))
	if err != nil || !res.UpToDate || res.Reset {
		t.Fatalf("again: %+v %v", res, err)
	}
}

func TestSyncSkipsAFileWhoseFolderIsALinkOrAFile(t *testing.T) {
	srv := testenv.StartGitServer(t)
	url := srv.CreateRepo(t, "target", "trunk", map[string]string{"AGENTS.md": "# Guide\n", "docs/x.md": "x\n", ".cursor/rules": "not a folder\n"})
	work := t.TempDir()
	testenv.Git(t, work, "clone", "--quiet", url, "c")
	if err := os.Symlink("docs", work+"/c/.github"); err != nil {
		t.Fatal(err)
	}
	testenv.Git(t, work+"/c", "add", ".github")
	testenv.GitAs(t, work+"/c", "Dev", "dev@example.com", "commit", "--quiet", "-m", "link")
	testenv.Git(t, work+"/c", "push", "--quiet", "origin", "trunk")

	res, err := sync(t, url, gitcli.Auth{}, request("v1:aaa111", "Rule one.\n"))
	if err != nil || res.Commit == "" {
		t.Fatalf("%+v %v", res, err)
	}
	skipped := map[string]string{}
	for _, f := range res.Files {
		if f.Skipped != "" {
			skipped[f.Path] = f.Skipped
		}
	}
	if len(skipped) != 2 || !strings.Contains(skipped[".github/copilot-instructions.md"], ".github") ||
		!strings.Contains(skipped[".cursor/rules/precept-code-writer.mdc"], ".cursor/rules") {
		t.Fatalf("skipped: %v", skipped)
	}
	if got, ok := srv.ReadFile(t, "target", res.Branch, "AGENTS.md"); !ok || !strings.Contains(got, "Rule one.") {
		t.Fatalf("AGENTS.md: %q", got)
	}
}
