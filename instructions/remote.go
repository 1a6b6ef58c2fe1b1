package instructions

import (
	"context"

	"github.com/precept-dev/precept/lib/gitcli"
)

// SyncURL runs Sync against the repository at url through the git CLI:
// it fetches the base branch (the remote's default branch when req.Base
// is empty) and the sync branch into a throwaway clone, syncs, and
// removes the clone. The CLI and preceptd's automatic sync both call it.
func SyncURL(ctx context.Context, url string, auth gitcli.Auth, opts gitcli.Options, req Request) (Result, error) {
	if err := req.Block.Validate(); err != nil {
		return Result{}, err
	}
	if req.Branch == "" {
		req.Branch = Branch(req.Block.Agent)
	}
	clone, err := gitcli.Open(ctx, url, auth, opts)
	if err != nil {
		return Result{}, err
	}
	defer clone.Close()
	if req.Base == "" {
		if req.Base, err = clone.DefaultBranch(ctx); err != nil {
			return Result{}, err
		}
	}
	if err := clone.Fetch(ctx, req.Base, req.Branch); err != nil {
		return Result{Base: req.Base, Branch: req.Branch}, err
	}
	return Sync(ctx, clone, req)
}

// CheckRemoteURL refuses a target URL holding a password, and a plain
// http:// URL to a host other than loopback when token says a token will
// be sent (lib/gitcli's CheckURL, which SyncURL applies too).
func CheckRemoteURL(url string, token bool) error { return gitcli.CheckURL(url, token) }
