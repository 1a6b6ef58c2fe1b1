package instructions

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/precept-dev/precept/lib/gitcli"
)

// Remote is the target repository a sync writes to, as Sync uses it;
// lib/gitcli's Clone satisfies it. Branches are fetched before Sync runs.
type Remote interface {
	// Tip is the commit branch pointed to when fetched; "" when absent.
	Tip(branch string) string
	// ReadFile returns path at commit with its git mode; an error for
	// which IsNotFound is true when the path is absent.
	ReadFile(ctx context.Context, commit, path string) (mode string, content []byte, err error)
	// Tree returns the tree id of commit.
	Tree(ctx context.Context, commit string) (string, error)
	// Commit writes files on top of parent without pushing.
	Commit(ctx context.Context, parent string, files map[string][]byte, message string) (commit, tree string, err error)
	// Push moves branch to commit if it still is at expected ("": absent).
	Push(ctx context.Context, commit, branch, expected string) error
	// IsNotFound reports whether err from ReadFile means the path is absent.
	IsNotFound(err error) bool
	// Commits lists the non-merge commits reachable from include and not
	// from exclude.
	Commits(ctx context.Context, exclude, include string) ([]gitcli.CommitInfo, error)
}

// Trailers the sync commit carries, so the target repository's history
// says which agent and prompt version each change came from.
const (
	TrailerAgent         = "Precept-Agent"
	TrailerStage         = "Precept-Stage"
	TrailerPromptVersion = "Precept-Prompt-Version"
)

// BranchPrefix starts the branch each agent's sync is pushed to.
const BranchPrefix = "precept/instructions/"

// Branch is the branch an agent's sync is pushed to.
func Branch(agent string) string { return BranchPrefix + agent }

// Request is one sync of one agent's rules.
type Request struct {
	Block Block
	// Formats default to AllFormats.
	Formats []Format
	// Base is the branch the sync starts from (the target's default
	// branch); Branch is pushed, default Branch(agent).
	Base   string
	Branch string
	// Overwrite discards hand edits between the markers, and commits on
	// the sync branch that precept did not make.
	Overwrite bool
}

// FileResult is what the sync did to one file.
type FileResult struct {
	Path    string  `json:"path"`
	Outcome Outcome `json:"outcome,omitempty"`
	// Skipped says why the file was left alone (a symbolic link, say).
	Skipped string `json:"skipped,omitempty"`
}

// Result is the outcome of a sync.
type Result struct {
	Branch string `json:"branch"`
	Base   string `json:"base"`
	// BaseCommit is the base branch's tip the commit is built on.
	BaseCommit string `json:"base_commit"`
	// Commit is the pushed commit; empty when nothing was pushed.
	Commit string `json:"commit,omitempty"`
	// UpToDate: the base already holds these rules, or the branch
	// already holds this commit's tree; nothing was committed.
	UpToDate bool `json:"up_to_date"`
	// Reset: the base already holds these rules but the sync branch held
	// others (a rule since rolled back); the branch was reset to the base
	// tip, so its pull request shows no change.
	Reset bool         `json:"reset,omitempty"`
	Files []FileResult `json:"files"`
}

// Sync writes the block into each format's file as the base branch has
// it, commits the result on top of the base tip and pushes it to the
// sync branch, replacing what an earlier sync put there. Any hand edit
// (on the base or on the sync branch) or unreadable marker refuses the
// whole sync before anything is written, so a pull request never mixes
// versions.
func Sync(ctx context.Context, r Remote, req Request) (Result, error) {
	if err := req.Block.Validate(); err != nil {
		return Result{}, err
	}
	if len(req.Formats) == 0 {
		req.Formats = AllFormats()
	}
	if req.Branch == "" {
		req.Branch = Branch(req.Block.Agent)
	}
	res := Result{Branch: req.Branch, Base: req.Base, BaseCommit: r.Tip(req.Base)}
	if res.BaseCommit == "" {
		return res, fmt.Errorf("%w: the target has no branch %q", ErrInvalid, req.Base)
	}
	branchTip := r.Tip(req.Branch)
	files := map[string][]byte{}
	var refusals []error
	for _, f := range req.Formats {
		path := f.Path(req.Block.Agent)
		fr, content, err := applyAt(ctx, r, res.BaseCommit, f, path, req)
		if err != nil {
			err = fmt.Errorf("%s: %w", req.Base, err)
		} else if branchTip != "" && fr.Skipped == "" {
			// A hand edit pushed to the open pull request counts too.
			if _, _, err = applyAt(ctx, r, branchTip, f, path, req); err != nil {
				err = fmt.Errorf("%s: %w", req.Branch, err)
			}
		}
		if err != nil {
			if errors.Is(err, ErrHandEdited) || errors.Is(err, ErrMalformed) || errors.Is(err, ErrTooLarge) {
				refusals = append(refusals, err)
				continue
			}
			return res, err
		}
		res.Files = append(res.Files, fr)
		if fr.Skipped == "" && fr.Outcome != Unchanged {
			files[path] = content
		}
	}
	if branchTip != "" && !req.Overwrite {
		if err := checkOwnCommits(ctx, r, res.BaseCommit, branchTip, req); err != nil {
			if !errors.Is(err, ErrForeignCommit) {
				return res, err
			}
			refusals = append(refusals, err)
		}
	}
	if len(refusals) > 0 {
		return res, fmt.Errorf("sync refused, nothing written: %w", errors.Join(refusals...))
	}
	if len(files) == 0 {
		res.UpToDate = true
		return res, resetBranch(ctx, r, &res, branchTip)
	}
	commit, tree, err := r.Commit(ctx, res.BaseCommit, files, commitMessage(req, res.Files))
	if err != nil {
		return res, fmt.Errorf("commit instruction files: %w", err)
	}
	if branchTip != "" {
		old, err := r.Tree(ctx, branchTip)
		if err != nil {
			return res, fmt.Errorf("read %s: %w", req.Branch, err)
		}
		if old == tree {
			res.UpToDate = true
			return res, nil
		}
	}
	if err := r.Push(ctx, commit, req.Branch, branchTip); err != nil {
		return res, fmt.Errorf("push %s: %w", req.Branch, err)
	}
	res.Commit = commit
	return res, nil
}

// checkOwnCommits refuses (ErrForeignCommit) when the sync branch holds
// a commit since the base that precept did not make for this agent: a
// push would discard it.
func checkOwnCommits(ctx context.Context, r Remote, base, tip string, req Request) error {
	commits, err := r.Commits(ctx, base, tip)
	if err != nil {
		return fmt.Errorf("read %s: %w", req.Branch, err)
	}
	trailer := TrailerAgent + ": " + req.Block.Agent
	var foreign []gitcli.CommitInfo
	for _, c := range commits {
		if !hasLine(c.Message, trailer) {
			foreign = append(foreign, c)
		}
	}
	if len(foreign) == 0 {
		return nil
	}
	last := foreign[len(foreign)-1] // the oldest
	subject, _, _ := strings.Cut(last.Message, "\n")
	return fmt.Errorf("%s: %w: %d commit(s) without the trailer %q, the first %.12s (%q); "+
		"merge them into the base or move them to another branch and sync again, or sync with overwrite to discard them",
		req.Branch, ErrForeignCommit, len(foreign), trailer, last.Hash, clip(subject))
}

func hasLine(text, line string) bool {
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}

// resetBranch moves the sync branch back to the base tip when the base
// already holds the rules but the branch holds a different tree (older
// rules, say, after a rollback), so merging its pull request cannot bring
// them back. The push is under the lease on the fetched tip.
func resetBranch(ctx context.Context, r Remote, res *Result, branchTip string) error {
	if branchTip == "" || branchTip == res.BaseCommit {
		return nil
	}
	branchTree, err := r.Tree(ctx, branchTip)
	if err != nil {
		return fmt.Errorf("read %s: %w", res.Branch, err)
	}
	baseTree, err := r.Tree(ctx, res.BaseCommit)
	if err != nil {
		return fmt.Errorf("read %s: %w", res.Base, err)
	}
	if branchTree == baseTree {
		return nil
	}
	if err := r.Push(ctx, res.BaseCommit, res.Branch, branchTip); err != nil {
		return fmt.Errorf("reset %s to %s: %w", res.Branch, res.Base, err)
	}
	res.Reset = true
	return nil
}

// applyAt applies the block to path as commit holds it.
func applyAt(ctx context.Context, r Remote, commit string, f Format, path string, req Request) (FileResult, []byte, error) {
	mode, old, err := r.ReadFile(ctx, commit, path)
	exists := err == nil
	if err != nil && !r.IsNotFound(err) {
		return FileResult{}, nil, fmt.Errorf("read %s: %w", path, err)
	}
	if exists && mode != "100644" && mode != "100755" {
		return FileResult{Path: path, Skipped: fmt.Sprintf("not a regular file (git mode %s, a symbolic link or a directory); sync the file it points to", mode)}, nil, nil
	}
	if !exists {
		if skip, err := parentNotAFolder(ctx, r, commit, path); err != nil || skip != "" {
			return FileResult{Path: path, Skipped: skip}, nil, err
		}
	}
	content, outcome, err := Apply(f, path, old, exists, req.Block, req.Overwrite)
	if err != nil {
		return FileResult{}, nil, err
	}
	return FileResult{Path: path, Outcome: outcome}, content, nil
}

// parentNotAFolder says why path cannot be created at commit when one of
// its parent folders is a symbolic link or a file there; "" when all are
// folders or absent.
func parentNotAFolder(ctx context.Context, r Remote, commit, path string) (string, error) {
	for i := strings.IndexByte(path, '/'); i >= 0; i = nextSlash(path, i) {
		dir := path[:i]
		mode, _, err := r.ReadFile(ctx, commit, dir)
		switch {
		case r.IsNotFound(err):
			return "", nil // nothing deeper exists either
		case err != nil:
			return "", fmt.Errorf("read %s: %w", dir, err)
		case mode != "040000":
			return fmt.Sprintf("its folder %s is not a folder (git mode %s, a symbolic link or a file); sync the file it points to", dir, mode), nil
		}
	}
	return "", nil
}

func nextSlash(path string, i int) int {
	j := strings.IndexByte(path[i+1:], '/')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

func commitMessage(req Request, files []FileResult) string {
	var paths []string
	for _, f := range files {
		if f.Skipped == "" && f.Outcome != Unchanged {
			paths = append(paths, f.Path)
		}
	}
	b := req.Block
	return fmt.Sprintf("precept: rules for agent %s in %s\n\n"+
		"The rules precept's reviewers approved for agent %s, stage %s, as prompt\n"+
		"version %s. Decisions made with these files record that version as\n"+
		"their prompt_version. Text outside the precept markers is unchanged.\n\n"+
		"%s: %s\n%s: %s\n%s: %s\n",
		b.Agent, strings.Join(paths, ", "), b.Agent, b.Stage, b.Version,
		TrailerAgent, b.Agent, TrailerStage, b.Stage, TrailerPromptVersion, b.Version)
}
