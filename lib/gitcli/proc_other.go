//go:build !unix

package gitcli

import (
	"os/exec"
	"time"
)

// KillGroupOnCancel bounds the wait for git's output after its context
// ends; process groups are Unix only.
func KillGroupOnCancel(cmd *exec.Cmd) { cmd.WaitDelay = 2 * time.Second }
