package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	"github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/plumbing/transport/ssh"

	"github.com/precept-dev/precept/lib/gitcli"
)

// Auth holds credentials for a remote. Empty means none (a local path or
// an unauthenticated URL).
type Auth struct {
	// Username and Password (or token) for HTTP(S) remotes.
	Username string
	Password string
	// SSHKeyPath is a private key file for SSH remotes.
	SSHKeyPath string
	// SSHKeyPassphrase unlocks SSHKeyPath.
	SSHKeyPassphrase string
}

func (a Auth) method(user string) (transport.AuthMethod, error) {
	switch {
	case a.SSHKeyPath != "":
		if user == "" {
			user = "git"
		}
		k, err := ssh.NewPublicKeysFromFile(user, a.SSHKeyPath, a.SSHKeyPassphrase)
		if err != nil {
			return nil, fmt.Errorf("load ssh key: %w", err)
		}
		return k, nil
	case a.Password != "":
		u := a.Username
		if u == "" {
			u = "precept"
		}
		return &http.BasicAuth{Username: u, Password: a.Password}, nil
	}
	return nil, nil
}

// Fetch updates the remote-tracking branches of remote (all of
// refs/heads/*, pruning deleted ones). It returns whether any of them
// moved, appeared or disappeared.
func (r *Repo) Fetch(ctx context.Context, remote string, auth Auth) (bool, error) {
	m, err := auth.method("")
	if err != nil {
		return false, err
	}
	before, err := r.RemoteBranches(remote, "")
	if err != nil {
		return false, err
	}
	r.mu.Lock()
	r.syncStorage()
	err = r.repo.FetchContext(ctx, &git.FetchOptions{
		RemoteName: remote,
		RefSpecs:   []config.RefSpec{config.RefSpec(fmt.Sprintf("+refs/heads/*:refs/remotes/%s/*", remote))},
		Auth:       m,
		Force:      true,
		Prune:      true,
	})
	if _, rerr := r.packs.refresh(); rerr != nil && err == nil {
		err = rerr
	}
	r.mu.Unlock()
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return false, fmt.Errorf("fetch %s: %s", remote, redact(err))
	}
	after, err := r.RemoteBranches(remote, "")
	if err != nil {
		return false, err
	}
	return !sameBranches(before, after), nil
}

func sameBranches(a, b []Branch) bool {
	if len(a) != len(b) {
		return false
	}
	m := make(map[string]Hash, len(a))
	for _, x := range a {
		m[x.Name] = x.Tip
	}
	for _, y := range b {
		if h, ok := m[y.Name]; !ok || h != y.Tip {
			return false
		}
	}
	return true
}

// PushSpec is one branch update to push.
type PushSpec struct {
	// Branch is the local branch; empty with Delete.
	Branch string
	// RemoteBranch defaults to Branch.
	RemoteBranch string
	// Delete removes RemoteBranch on the remote.
	Delete bool
	// Force allows a non-fast-forward update.
	Force bool
	// Expect, when set, is a lease: the push lands only while the remote
	// holds RemoteBranch at *Expect (ZeroHash: the remote must not have
	// it), checked by git against what the server advertises and by the
	// server against its ref as it updates it. A refused lease is
	// ErrRefChanged. It is how a write learns that the branch it read was
	// moved or deleted by another node.
	Expect *Hash
}

// ErrNoAtomicPush is a remote that does not offer atomic pushes: the
// receiving end could take some refs of a push and refuse others, and two
// replicas could each land half of a decision (docs/decisions/0009-replicas.md).
var ErrNoAtomicPush = errors.New(`the remote does not offer the "atomic" push capability`)

// CheckAtomicPush asks the git server at url for its receive-pack
// capabilities and returns ErrNoAtomicPush when "atomic" is not among
// them. The git library would otherwise drop the atomic option without a
// word when the server does not advertise it.
func CheckAtomicPush(ctx context.Context, url string, auth Auth) error {
	m, err := auth.method("")
	if err != nil {
		return err
	}
	return checkAtomic(ctx, url, m)
}

// checkAtomic reads the capabilities the receive-pack service at url
// advertises.
func checkAtomic(ctx context.Context, url string, m transport.AuthMethod) (err error) {
	ep, err := transport.NewEndpoint(url)
	if err != nil {
		return fmt.Errorf("remote %s: %s", gitcli.RedactURL(url), redact(err))
	}
	c, err := client.NewClient(ep)
	if err != nil {
		return fmt.Errorf("remote %s: %s", gitcli.RedactURL(url), redact(err))
	}
	s, err := c.NewReceivePackSession(ep, m)
	if err != nil {
		return fmt.Errorf("remote %s: %s", gitcli.RedactURL(url), redact(err))
	}
	defer func() {
		if cerr := s.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("remote %s: %s", gitcli.RedactURL(url), redact(cerr))
		}
	}()
	ar, err := s.AdvertisedReferencesContext(ctx)
	if err != nil && !errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return fmt.Errorf("remote %s: %s", gitcli.RedactURL(url), redact(err))
	}
	if ar == nil || !ar.Capabilities.Supports(capability.Atomic) {
		return fmt.Errorf("remote %s: %w", gitcli.RedactURL(url), ErrNoAtomicPush)
	}
	return nil
}

// Push updates branches on remote. A rejected non-fast-forward update is
// reported as ErrRefChanged, so callers can fetch, reconcile and retry.
// A push of several refs is atomic: the remote takes all of them or none
// (git's "atomic" capability, checked before each such push), so a
// decision that moves main and a proposal branch never lands half.
func (r *Repo) Push(ctx context.Context, remote string, auth Auth, specs ...PushSpec) (err error) {
	start := time.Now()
	defer func() {
		r.writes.push(err)
		r.writes.pushTook(time.Since(start))
	}()
	m, err := auth.method("")
	if err != nil {
		return err
	}
	atomic := len(specs) > 1
	var refspecs []config.RefSpec
	var leases []lease
	for _, s := range specs {
		dst := s.RemoteBranch
		if dst == "" {
			dst = s.Branch
		}
		if s.Expect != nil {
			leases = append(leases, lease{ref: "refs/heads/" + dst, at: *s.Expect})
		}
		var rs string
		switch {
		case s.Delete:
			rs = ":refs/heads/" + dst
		default:
			rs = "refs/heads/" + s.Branch + ":refs/heads/" + dst
			if s.Force {
				rs = "+" + rs
			}
		}
		refspecs = append(refspecs, config.RefSpec(rs))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	u, err := remoteURL(r.repo, remote)
	if err != nil {
		return fmt.Errorf("push %s: %w", remote, err)
	}
	if atomic {
		if err := checkAtomic(ctx, u, m); err != nil {
			return fmt.Errorf("push %s: %w", remote, err)
		}
	}
	// Every push goes through the git CLI (pushCLI says why) except over
	// SSH with a key protected by a passphrase, which the CLI would ask
	// for on a terminal.
	if auth.SSHKeyPassphrase == "" {
		var specs []string
		for _, rs := range refspecs {
			specs = append(specs, rs.String())
		}
		return pushCLI(ctx, r.path, remote, u, auth, atomic, leases, specs)
	}
	opts := &git.PushOptions{RemoteName: remote, RefSpecs: refspecs, Auth: m, Atomic: atomic}
	if len(leases) > 0 {
		// go-git checks a lease against the remote-tracking ref of the
		// local source's name, not the remote ref: it cannot hold one.
		return fmt.Errorf("push %s: a push with a lease needs the git CLI: use an SSH key without a passphrase", remote)
	}
	r.syncStorage()
	err = r.repo.PushContext(ctx, opts)
	switch {
	case err == nil, errors.Is(err, git.NoErrAlreadyUpToDate):
		return nil
	case errors.Is(err, git.ErrNonFastForwardUpdate), strings.Contains(err.Error(), "non-fast-forward"):
		return fmt.Errorf("push %s: %w", remote, ErrRefChanged)
	}
	return fmt.Errorf("push %s: %s", remote, redact(err))
}

// redact keeps credentials embedded in URLs out of error messages.
func redact(err error) string {
	return gitcli.RedactURL(err.Error())
}
