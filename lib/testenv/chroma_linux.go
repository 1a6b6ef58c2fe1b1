package testenv

import (
	"os/exec"
	"syscall"
)

// setChromaProcAttr puts the server in its own process group, so stopping
// it reaches anything it spawned, and has the kernel kill it if the test
// binary dies first.
func setChromaProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killChromaGroup kills the server's process group.
func killChromaGroup(cmd *exec.Cmd) {
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		_ = cmd.Process.Kill()
	}
}
