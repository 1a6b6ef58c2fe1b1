//go:build unix

package gitcli

import (
	"os/exec"
	"syscall"
	"time"
)

// KillGroupOnCancel runs cmd in its own process group and, when its
// context ends, kills the whole group: git's helpers (git-remote-http,
// ssh) die with it instead of holding its output open. WaitDelay bounds
// the wait for output after the kill.
func KillGroupOnCancel(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
}
