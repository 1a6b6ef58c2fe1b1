package main

import (
	"context"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
)

// pollInterval is how often a command given --wait asks again.
const pollInterval = 200 * time.Millisecond

// addWait gives a command the --wait flag: a script that has just
// started preceptd or sent a decision asks once and is told to wait
// instead of sleeping a guessed time.
func addWait(cmd *cobra.Command, wait *time.Duration, what string) {
	cmd.Flags().DurationVar(wait, "wait", 0, "wait up to this long "+what+" (e.g. 30s); 0: ask once")
}

// poll calls try until it reports done, fails with an error that waiting
// cannot cure, or wait has passed; it returns try's last error. Each try
// has the request timeout. Waiting cures a server that does not answer
// yet (unavailable) and a thing not there yet (not found).
func poll(cmd *cobra.Command, timeout, wait time.Duration, try func(ctx context.Context) (done bool, err error)) error {
	deadline := time.Now().Add(wait)
	for {
		ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
		done, err := try(ctx)
		cancel()
		if done || !curable(err) || !time.Now().Before(deadline) {
			return err
		}
		select {
		case <-cmd.Context().Done():
			if err == nil {
				err = cmd.Context().Err()
			}
			return err
		case <-time.After(min(pollInterval, time.Until(deadline))):
		}
	}
}

// curable reports whether waiting may change the answer.
func curable(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeNotFound, connect.CodeUnavailable:
		return true
	}
	return err == nil
}
