package gitcli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
)

// ErrNotFound: the branch or path does not exist.
var ErrNotFound = errors.New("not found")

// ErrRefChanged: the remote branch moved since it was fetched.
var ErrRefChanged = errors.New("remote branch changed concurrently")

// Auth holds credentials for a remote. The zero value uses none beyond
// what the user's git configuration and SSH agent supply.
type Auth struct {
	// Username and Password (or token) for HTTP(S) remotes; the username
	// defaults to "precept".
	Username string
	Password string
	// SSHKeyPath is a private key file for SSH remotes (without a
	// passphrase, or held by the SSH agent).
	SSHKeyPath string
}

// Signature is a commit's author and committer.
type Signature struct{ Name, Email string }

// Clone is a bare clone of some branches of a remote, in a temporary
// directory removed by Close.
type Clone struct {
	url  string
	dir  string
	auth Auth
	env  []string
	tips map[string]string
	// scope is the protocol and host the credentials are given to.
	scope [2]string
}

// Options configure Open. The zero value means the defaults.
type Options struct {
	// Committer signs commits; default "precept <precept@localhost>".
	Committer Signature
	// Env is added to every git command's environment (tests set HOME).
	Env []string
}

// Open fetches branches of url (those that exist; the others are absent
// from Tip) into a new bare repository under os.TempDir.
func Open(ctx context.Context, url string, auth Auth, opts Options, branches ...string) (*Clone, error) {
	if url == "" {
		return nil, fmt.Errorf("open remote: no URL")
	}
	if err := CheckURL(url, auth.Password != ""); err != nil {
		return nil, err
	}
	if opts.Committer.Name == "" {
		opts.Committer = Signature{Name: "precept", Email: "precept@localhost"}
	}
	dir, err := os.MkdirTemp("", "precept-gitcli-")
	if err != nil {
		return nil, fmt.Errorf("open remote: %w", err)
	}
	c := &Clone{url: url, dir: dir, auth: auth, tips: map[string]string{}, scope: credentialScope(url)}
	c.env = append(c.env, opts.Env...)
	c.env = append(c.env, "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME="+opts.Committer.Name, "GIT_AUTHOR_EMAIL="+opts.Committer.Email,
		"GIT_COMMITTER_NAME="+opts.Committer.Name, "GIT_COMMITTER_EMAIL="+opts.Committer.Email)
	if _, err := c.git(ctx, nil, "init", "--quiet", "--bare"); err != nil {
		_ = c.Close()
		return nil, err
	}
	if err := c.Fetch(ctx, branches...); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// Close removes the clone.
func (c *Clone) Close() error { return os.RemoveAll(c.dir) }

// DefaultBranch asks the remote which branch its HEAD names.
func (c *Clone) DefaultBranch(ctx context.Context) (string, error) {
	out, err := c.remote(ctx, "ls-remote", "--symref", "--", c.url, "HEAD")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(out, "\n") {
		if ref, ok := strings.CutPrefix(line, "ref: refs/heads/"); ok {
			name, _, _ := strings.Cut(ref, "\t")
			return name, nil
		}
	}
	return "", fmt.Errorf("default branch of %s: the remote names none", RedactURL(c.url))
}

// Fetch fetches branches of the remote (those that exist; the others
// are absent from Tip).
func (c *Clone) Fetch(ctx context.Context, branches ...string) error {
	if len(branches) == 0 {
		return nil
	}
	args := []string{"ls-remote", "--heads", "--", c.url}
	for _, b := range branches {
		args = append(args, "refs/heads/"+b)
	}
	out, err := c.remote(ctx, args...)
	if err != nil {
		return err
	}
	fetch := []string{"fetch", "--quiet", "--no-tags", "--", c.url}
	for _, line := range strings.Split(out, "\n") {
		hash, ref, ok := strings.Cut(line, "\t")
		name, isHead := strings.CutPrefix(ref, "refs/heads/")
		if !ok || !isHead {
			continue
		}
		c.tips[name] = hash
		fetch = append(fetch, "+refs/heads/"+name+":refs/remotes/origin/"+name)
	}
	if len(fetch) == 5 {
		return nil
	}
	_, err = c.remote(ctx, fetch...)
	return err
}

// Tip is the commit branch pointed to when it was fetched, "" when the
// remote has no such branch.
func (c *Clone) Tip(branch string) string { return c.tips[branch] }

// ReadFile returns path at commit, byte for byte, with its git mode
// (100644, 100755, 120000 for a symbolic link, …; a directory has no
// content); ErrNotFound when the commit's tree has no such path.
func (c *Clone) ReadFile(ctx context.Context, commit, path string) (mode string, content []byte, err error) {
	out, err := c.git(ctx, nil, "ls-tree", "-z", "--full-tree", commit, "--", path)
	if err != nil {
		return "", nil, err
	}
	entry := strings.TrimSuffix(out, "\x00")
	meta, name, ok := strings.Cut(entry, "\t")
	fields := strings.Fields(meta)
	if !ok || name != path || len(fields) != 3 {
		return "", nil, fmt.Errorf("read %s: %w", path, ErrNotFound)
	}
	if fields[1] != "blob" {
		return fields[0], nil, nil
	}
	blob, err := c.git(ctx, nil, "cat-file", "blob", fields[2])
	if err != nil {
		return "", nil, err
	}
	return fields[0], []byte(blob), nil
}

// IsNotFound reports whether err says a branch or path does not exist.
func (c *Clone) IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// Tree returns the tree a commit points to.
func (c *Clone) Tree(ctx context.Context, commit string) (string, error) {
	out, err := c.git(ctx, nil, "rev-parse", "--verify", "--quiet", commit+"^{tree}")
	return strings.TrimSpace(out), err
}

// CommitInfo is one commit's id and full message.
type CommitInfo struct{ Hash, Message string }

// Commits lists the commits reachable from include and not from exclude,
// newest first, leaving out merge commits (their parents are listed).
func (c *Clone) Commits(ctx context.Context, exclude, include string) ([]CommitInfo, error) {
	out, err := c.git(ctx, nil, "log", "-z", "--no-merges", "--format=%H%n%B", exclude+".."+include, "--")
	if err != nil {
		return nil, err
	}
	var list []CommitInfo
	for _, rec := range strings.Split(out, "\x00") {
		rec = strings.TrimLeft(rec, "\n")
		if rec == "" {
			continue
		}
		hash, msg, _ := strings.Cut(rec, "\n")
		list = append(list, CommitInfo{Hash: hash, Message: msg})
	}
	return list, nil
}

// Commit writes files (path → content, mode 100644 unless the parent
// holds the path as 100755) on top of parent and returns the new commit
// and its tree. Nothing is pushed.
func (c *Clone) Commit(ctx context.Context, parent string, files map[string][]byte, message string) (commit, tree string, err error) {
	index := []string{"GIT_INDEX_FILE=" + c.dir + "/precept-index"}
	defer os.Remove(c.dir + "/precept-index")
	if _, err := c.gitEnv(ctx, index, nil, "read-tree", parent); err != nil {
		return "", "", err
	}
	for path, content := range files {
		blob, err := c.git(ctx, content, "hash-object", "-w", "--no-filters", "--stdin")
		if err != nil {
			return "", "", err
		}
		mode := "100644"
		if m, _, err := c.ReadFile(ctx, parent, path); err == nil && m == "100755" {
			mode = m
		}
		info := mode + "," + strings.TrimSpace(blob) + "," + path
		if _, err := c.gitEnv(ctx, index, nil, "update-index", "--add", "--cacheinfo", info); err != nil {
			return "", "", err
		}
	}
	out, err := c.gitEnv(ctx, index, nil, "write-tree")
	if err != nil {
		return "", "", err
	}
	tree = strings.TrimSpace(out)
	out, err = c.git(ctx, []byte(message), "commit-tree", tree, "-p", parent, "-F", "-")
	if err != nil {
		return "", "", err
	}
	return strings.TrimSpace(out), tree, nil
}

// Push sets branch on the remote to commit, provided the remote branch
// still is at expected ("" meaning it must not exist); otherwise
// ErrRefChanged.
func (c *Clone) Push(ctx context.Context, commit, branch, expected string) error {
	lease := "--force-with-lease=refs/heads/" + branch + ":" + expected
	_, err := c.remote(ctx, "push", "--quiet", "--porcelain", lease, "--", c.url, commit+":refs/heads/"+branch)
	var ge *gitError
	if errors.As(err, &ge) && (strings.Contains(ge.stderr, "stale info") || strings.Contains(ge.stdout, "stale info") ||
		strings.Contains(ge.stderr, "fetch first") || strings.Contains(ge.stdout, "fetch first")) {
		return fmt.Errorf("push %s: %w", branch, ErrRefChanged)
	}
	return err
}

// gitError is a failed git command, its output redacted.
type gitError struct {
	args           string
	stdout, stderr string
	err            error
}

func (e *gitError) Error() string {
	msg := strings.TrimSpace(e.stderr)
	if msg == "" {
		msg = strings.TrimSpace(e.stdout)
	}
	return fmt.Sprintf("git %s: %v: %s", e.args, e.err, msg)
}

func (c *Clone) git(ctx context.Context, stdin []byte, args ...string) (string, error) {
	return c.gitEnv(ctx, nil, stdin, args...)
}

func (c *Clone) gitEnv(ctx context.Context, env []string, stdin []byte, args ...string) (string, error) {
	return c.run(ctx, false, env, stdin, args...)
}

// remote runs a git command that talks to the remote: only these get the
// credentials and the network settings (remote.go).
func (c *Clone) remote(ctx context.Context, args ...string) (string, error) {
	return c.run(ctx, true, nil, nil, args...)
}

func (c *Clone) run(ctx context.Context, remote bool, env []string, stdin []byte, args ...string) (string, error) {
	full := []string{"-c", "core.autocrlf=false"}
	cmdEnv := append(append(gitEnviron(), c.env...), env...)
	if remote {
		full = append(full, networkConfig...)
		cfg, vars := c.credentials()
		full = append(full, cfg...)
		cmdEnv = append(cmdEnv, vars...)
	}
	full = append(full, "--git-dir="+c.dir)
	full = append(full, args...)
	cmd := exec.CommandContext(ctx, "git", full...)
	cmd.Env = cmdEnv
	KillGroupOnCancel(cmd)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return "", fmt.Errorf("git is not installed: the instruction sync runs the git CLI")
		}
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return "", &gitError{args: c.redact(strings.Join(args, " ")), stdout: c.redact(stdout.String()),
			stderr: c.redact(stderr.String()), err: err}
	}
	return stdout.String(), nil
}

var urlCredentials = regexp.MustCompile(`://[^/@\s]+@`)

// redact removes credentials from text git printed: those embedded in a
// URL and the password given, wherever it appears.
func (c *Clone) redact(s string) string {
	s = urlCredentials.ReplaceAllString(s, "://***@")
	if c.auth.Password != "" {
		s = strings.ReplaceAll(s, c.auth.Password, "***")
	}
	return s
}

// RedactURL replaces the credentials a URL embeds (user:password@ or
// token@) with ***, for logs and errors. The credentials end at the last
// "@" before the path, so a password holding "@" is hidden whole.
func RedactURL(u string) string {
	i := strings.Index(u, "://")
	if i < 0 {
		return u
	}
	rest := u[i+3:]
	if slash := strings.IndexByte(rest, '/'); slash >= 0 {
		rest = rest[:slash]
	}
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		return u[:i+3] + "***" + u[i+3+at:]
	}
	return u
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
