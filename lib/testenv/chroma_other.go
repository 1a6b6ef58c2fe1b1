//go:build !linux

package testenv

import "os/exec"

// setChromaProcAttr leaves the process attributes alone: process groups
// and parent-death signals are Linux-specific here.
func setChromaProcAttr(*exec.Cmd) {}

// killChromaGroup kills the server process.
func killChromaGroup(cmd *exec.Cmd) { _ = cmd.Process.Kill() }
