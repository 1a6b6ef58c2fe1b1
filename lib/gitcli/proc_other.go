//go:build !unix

package gitcli

import (
	"os/exec"
	"time"
)

// killGroupOnCancel bounds the wait for git's output after its context
// ends; process groups are Unix only.
func killGroupOnCancel(cmd *exec.Cmd) { cmd.WaitDelay = 2 * time.Second }
