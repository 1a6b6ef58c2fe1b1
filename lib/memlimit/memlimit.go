// Package memlimit chooses the Go runtime's soft memory limit from the
// memory the process may use — the cgroup limit of its container, else
// the machine's physical memory — and watches that the collector does not
// run back to back under it (docs/operations.md, "Memory";
// docs/thresholds.md, "Memory").
package memlimit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// Source says where a limit came from.
type Source string

// The sources of a limit.
const (
	// CgroupV2 is memory.max of the process's cgroup (or an ancestor's).
	CgroupV2 Source = "cgroup_v2"
	// CgroupV1 is memory.limit_in_bytes of the process's memory cgroup.
	CgroupV1 Source = "cgroup_v1"
	// Meminfo is the machine's physical memory (MemTotal).
	Meminfo Source = "meminfo"
	// Configured is a number of MiB in the configuration.
	Configured Source = "configured"
	// Env is the GOMEMLIMIT environment variable, which wins over the rest.
	Env Source = "GOMEMLIMIT"
	// Fallback is the fixed limit auto mode uses when it can read
	// neither a cgroup nor the physical memory.
	Fallback Source = "fallback"
	// Off means no soft limit.
	Off Source = "off"
)

const (
	// Share is the part of the memory the process may use that auto mode
	// gives the Go runtime. The rest is left to what the runtime does not
	// count or the kernel needs to keep preceptd fast: the page cache
	// that bbolt's memory-mapped files and git's packs read through,
	// cgo and mmap'd memory, and the heap's overshoot while a cycle runs.
	Share = 0.7
	// MinLimit is the smallest soft limit: below it the collector would
	// run all the time even with an empty store.
	MinLimit int64 = 64 << 20
	// CeilingShare is the highest part of the process's memory the
	// watchdog may raise an auto limit to: 10% stays for what the runtime
	// does not count, so raising never walks the process into the OOM
	// killer.
	CeilingShare = 0.9
	// unlimited is the threshold above which a cgroup's limit means none:
	// v1 writes "no limit" as the largest page-aligned int64.
	unlimited int64 = 1 << 60
)

// Paths are the files read to find the process's memory; tests point
// them at fixtures.
type Paths struct {
	// SelfCgroup is /proc/self/cgroup.
	SelfCgroup string
	// CgroupRoot is where the cgroup file systems are mounted.
	CgroupRoot string
	// Meminfo is /proc/meminfo.
	Meminfo string
}

// SystemPaths are the files of a Linux system.
var SystemPaths = Paths{SelfCgroup: "/proc/self/cgroup", CgroupRoot: "/sys/fs/cgroup", Meminfo: "/proc/meminfo"}

// Memory is what the process may use in all and where that was read.
type Memory struct {
	Bytes  int64
	Source Source
}

// Detect reads the memory the process may use: its cgroup's limit when
// one is set and below the physical memory, else the physical memory.
// It returns an error only when neither can be read.
func Detect(p Paths) (Memory, error) {
	phys, physErr := ReadMeminfo(p.Meminfo)
	cg, cgErr := ReadCgroup(p.SelfCgroup, p.CgroupRoot)
	switch {
	case cgErr == nil && cg.Bytes > 0 && (physErr != nil || cg.Bytes < phys):
		return cg, nil
	case physErr == nil:
		return Memory{Bytes: phys, Source: Meminfo}, nil
	}
	if cgErr == nil {
		cgErr = errors.New("no cgroup memory limit")
	}
	return Memory{}, fmt.Errorf("detect memory: %w; %w", cgErr, physErr)
}

// ReadMeminfo returns MemTotal from a /proc/meminfo file, in bytes.
func ReadMeminfo(file string) (int64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, fmt.Errorf("read meminfo: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("read meminfo: %s: MemTotal %q is not a number of kB", file, strings.TrimSpace(rest))
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || kb <= 0 || kb > unlimited>>10 {
			return 0, fmt.Errorf("read meminfo: %s: MemTotal %q is not a number of kB", file, fields[0])
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("read meminfo: %s has no MemTotal line", file)
}

// ReadCgroup returns the memory limit of the cgroup a /proc/self/cgroup
// file names, read under root: cgroup v2's memory.max (the smallest of
// the cgroup's and its ancestors'), else v1's memory.limit_in_bytes.
// Bytes is 0 when the cgroup sets no limit ("max", or v1's huge value).
func ReadCgroup(selfCgroup, root string) (Memory, error) {
	b, err := os.ReadFile(selfCgroup)
	if err != nil {
		return Memory{}, fmt.Errorf("read cgroup: %w", err)
	}
	var v2, v1 string
	found2, found1 := false, false
	for _, line := range strings.Split(string(b), "\n") {
		// hierarchy-ID:controllers:path
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2, found2 = parts[2], true
		case hasController(parts[1], "memory"):
			v1, found1 = parts[2], true
		}
	}
	switch {
	case found1:
		// A hybrid system lists both; the memory controller is on v1.
		return readV1(root, v1)
	case found2:
		return readV2(root, v2)
	}
	return Memory{}, fmt.Errorf("read cgroup: %s names no memory cgroup", selfCgroup)
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// readV2 reads cgroup v2's memory.max.
func readV2(root, cgPath string) (Memory, error) {
	return walk(root, cgPath, "memory.max", CgroupV2)
}

// readV1 reads the v1 memory controller's memory.limit_in_bytes.
func readV1(root, cgPath string) (Memory, error) {
	return walk(filepath.Join(root, "memory"), cgPath, "memory.limit_in_bytes", CgroupV1)
}

// walk reads file in the cgroup's directory and each ancestor's up to
// root, and keeps the smallest limit: a parent's limit binds its
// children too. Inside a cgroup namespace the path the process sees may
// be "/" or missing, and the container's own files sit at root.
func walk(root, cgPath, file string, src Source) (Memory, error) {
	var limit int64
	read := false
	for dir := path.Clean("/" + cgPath); ; dir = path.Dir(dir) {
		v, ok, err := readLimit(filepath.Join(root, filepath.FromSlash(dir), file))
		if err != nil {
			return Memory{}, err
		}
		if ok {
			read = true
			if v > 0 && (limit == 0 || v < limit) {
				limit = v
			}
		}
		if dir == "/" {
			break
		}
	}
	if !read {
		return Memory{}, fmt.Errorf("read %s: no %s under %s for %s", strings.ReplaceAll(string(src), "_", " "), file, root, cgPath)
	}
	return Memory{Bytes: limit, Source: src}, nil
}

// readLimit reads one limit file: ok is false when it does not exist,
// the value 0 when it means no limit.
func readLimit(file string) (v int64, ok bool, err error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read cgroup: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, true, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, false, fmt.Errorf("read cgroup: %s: %q is neither \"max\" nor a positive number of bytes", file, clip(s))
	}
	if n >= unlimited {
		return 0, true, nil
	}
	return n, true, nil
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// Setting is what the configuration asks for: Auto, or MiB (0 for none).
type Setting struct {
	Auto bool
	MiB  int
}

// Choice is the soft limit chosen at start.
type Choice struct {
	// Limit is the soft limit in bytes; 0 means none.
	Limit int64
	// Source is where Limit came from.
	Source Source
	// Ceiling is the highest the watchdog may raise Limit to; 0 when it
	// may not raise it (the operator chose the limit, or there is none).
	Ceiling int64
}

// Choose picks the soft limit: GOMEMLIMIT when gomemlimit holds the
// limit the runtime already took from it (non-zero when the variable is
// set; math.MaxInt64 for "off", which is no limit), else the
// configuration's number, else in auto mode Share of the memory detect
// reports, never below MinLimit. An auto setting whose memory cannot be
// read falls back to fallbackMiB and says why in the error, which is not
// fatal.
func Choose(s Setting, gomemlimit int64, detect func() (Memory, error), fallbackMiB int) (Choice, error) {
	switch {
	case gomemlimit == math.MaxInt64:
		return Choice{Source: Env}, nil
	case gomemlimit > 0:
		return Choice{Limit: gomemlimit, Source: Env}, nil
	case !s.Auto && s.MiB == 0:
		return Choice{Source: Off}, nil
	case !s.Auto:
		return Choice{Limit: int64(s.MiB) << 20, Source: Configured}, nil
	}
	m, err := detect()
	if err != nil {
		return Choice{Limit: int64(fallbackMiB) << 20, Source: Fallback}, err
	}
	limit := max(int64(float64(m.Bytes)*Share), MinLimit)
	ceiling := max(int64(float64(m.Bytes)*CeilingShare), limit)
	return Choice{Limit: limit, Source: m.Source, Ceiling: ceiling}, nil
}
