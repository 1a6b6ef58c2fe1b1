package gitrepo

import (
	"bytes"
	"context"
	"encoding/base64"
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

// pushCLI pushes refspecs to remote (at url) with the git CLI, atomic
// when asked (all refs or none). git's push sends only the objects the
// remote lacks, found by walking back from the new tips to the ones it
// advertised; go-git's walks every object the remote's tips reach, which
// grows with the whole history (a second per push at a few hundred
// thousand decisions). go-git's file transport also runs
// git-receive-pack itself, and when the receive side stops reading (a
// hook, or an orphaned git unpack-objects holding the pipe) it waits for
// the pipe forever, whatever the context says, with the repository's lock
// held. The CLI runs in its own process group, killed whole when ctx
// ends (gitcli.KillGroupOnCancel). Credentials reach git through its
// environment, never its arguments. The caller holds the Repo's lock.
func pushCLI(ctx context.Context, gitDir, remote, url string, auth Auth, atomic bool, leases []lease, refspecs []string) error {
	// A push of up to 256 MiB goes with its length rather than in chunks
	// (git chunks above http.postBuffer, 1 MiB by default): a server
	// that refuses chunked requests answered a merge of several batches
	// of decisions with HTTP 400, and ordering stalled
	// (docs/decisions/0009-replicas.md, "Per-node branches").
	args := []string{"-c", "http.postBuffer=268435456", "--git-dir=" + gitDir, "push", "--porcelain"}
	if atomic {
		args = append(args, "--atomic")
	}
	for _, l := range leases {
		args = append(args, l.flag())
	}
	args = append(append(args, "--", remote), refspecs...)
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Env = append(cmd.Environ(), "GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
	cmd.Env = append(cmd.Env, cliAuthEnv(url, auth)...)
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
		// A ref moved since the push read it: "fetch first" when the
		// client saw it, "failed to update ref" / "cannot lock ref" when
		// another push won the race inside the server.
		if containsAny(line, "non-fast-forward", "fetch first", "stale info", "failed to update ref", "cannot lock ref") {
			return fmt.Errorf("push %s: %w", remote, ErrRefChanged)
		}
		// An atomic push the server gave up whole names the ref that
		// had moved only in its messages: "cannot lock ref '…': is at
		// X but expected Y".
		if strings.Contains(line, "atomic transaction failed") && containsAny(stderr.String(), "cannot lock ref", "but expected") {
			return fmt.Errorf("push %s: %w", remote, ErrRefChanged)
		}
	}
	msg := strings.TrimSpace(stderr.String() + "\n" + stdout.String())
	return fmt.Errorf("push %s: %s", remote, redact(errors.New(msg)))
}

// lease is PushSpec.Expect for one remote ref.
type lease struct {
	ref string
	at  Hash
}

// flag is git's --force-with-lease for the lease; an empty expectation
// means the ref must not exist.
func (l lease) flag() string {
	if l.at.IsZero() {
		return "--force-with-lease=" + l.ref + ":"
	}
	return "--force-with-lease=" + l.ref + ":" + l.at.String()
}

// cliAuthEnv passes auth to the git CLI: HTTP basic credentials as an
// extra header given through git's environment configuration, an SSH key
// through GIT_SSH_COMMAND. Neither appears in the process's arguments.
// It also bounds how long a stalled transfer may hang.
func cliAuthEnv(url string, auth Auth) []string {
	// A transfer that stalls is given up (under 1 KB/s for 30 s), and a
	// redirect is not followed, so the credentials go to the host named
	// and to no other.
	cfg := [][2]string{{"http.lowSpeedLimit", "1000"}, {"http.lowSpeedTime", "30"}, {"http.followRedirects", "false"}}
	var env []string
	switch {
	case auth.Password != "" && !localRemote(url):
		user := auth.Username
		if user == "" {
			user = "precept"
		}
		basic := base64.StdEncoding.EncodeToString([]byte(user + ":" + auth.Password))
		// No helper may answer for, or store, these credentials.
		cfg = append(cfg, [2]string{"http.extraHeader", "Authorization: Basic " + basic}, [2]string{"credential.helper", ""})
	case auth.SSHKeyPath != "":
		env = append(env, "GIT_SSH_COMMAND=ssh -i "+shellQuote(auth.SSHKeyPath)+
			" -o IdentitiesOnly=yes -o BatchMode=yes -o ConnectTimeout=30 -o ServerAliveInterval=15 -o ServerAliveCountMax=4")
	}
	env = append(env, fmt.Sprintf("GIT_CONFIG_COUNT=%d", len(cfg)))
	for i, kv := range cfg {
		env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i, kv[0]), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, kv[1]))
	}
	return env
}

// shellQuote quotes s for the shell git runs GIT_SSH_COMMAND with.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
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

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
