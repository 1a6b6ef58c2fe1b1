package gitrepo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/go-git/go-git/v5"

	"github.com/precept-dev/precept/lib/gitcli"
)

// localRemote reports whether a remote's URL names a repository on this
// machine: a path, or a file:// URL.
func localRemote(u string) bool {
	if strings.HasPrefix(u, "file://") {
		return true
	}
	if strings.Contains(u, "://") {
		return false
	}
	// scp-like "host:path" is SSH; a colon after a slash is part of a path.
	colon, slash := strings.IndexByte(u, ':'), strings.IndexByte(u, '/')
	return colon < 0 || slash >= 0 && slash < colon
}

// pushLocal pushes refspecs to remote, a repository on this machine, with
// the git CLI, atomic when asked (all refs or none). go-git's file transport runs git-receive-pack itself, and
// when the receive side stops reading (a hook, or an orphaned
// git unpack-objects holding the pipe) it waits for the pipe forever,
// whatever the context says, with the repository's lock held. The CLI
// runs in its own process group, killed whole when ctx ends
// (gitcli.KillGroupOnCancel). The caller holds the Repo's lock.
func pushLocal(ctx context.Context, gitDir, remote string, atomic bool, refspecs []string) error {
	args := []string{"--git-dir=" + gitDir, "push", "--porcelain"}
	if atomic {
		args = append(args, "--atomic")
	}
	args = append(append(args, "--", remote), refspecs...)
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Env = append(cmd.Environ(), "GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	gitcli.KillGroupOnCancel(cmd)
	err := cmd.Run()
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("push %s: %w", remote, ctx.Err())
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return fmt.Errorf("push %s: %w", remote, err)
	}
	// --porcelain: one "<flag>\t<from>:<to>\t<summary>" line per ref; "!"
	// is a refused update.
	for line := range strings.Lines(stdout.String()) {
		if !strings.HasPrefix(line, "!") {
			continue
		}
		if strings.Contains(line, "non-fast-forward") || strings.Contains(line, "fetch first") || strings.Contains(line, "stale info") {
			return fmt.Errorf("push %s: %w", remote, ErrRefChanged)
		}
	}
	msg := strings.TrimSpace(stderr.String() + "\n" + stdout.String())
	return fmt.Errorf("push %s: %s", remote, redact(errors.New(msg)))
}

// remoteURL is the first URL of a configured remote; the caller holds
// the Repo's lock.
func remoteURL(repo *git.Repository, name string) (string, error) {
	rem, err := repo.Remote(name)
	if err != nil {
		return "", fmt.Errorf("remote %s: %w", name, err)
	}
	urls := rem.Config().URLs
	if len(urls) == 0 {
		return "", fmt.Errorf("remote %s has no URL", name)
	}
	return urls[0], nil
}
