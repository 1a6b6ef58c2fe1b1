package memlimit

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// system writes a fake /proc and /sys/fs/cgroup under a temporary
// directory: files maps paths relative to it to their contents.
func system(t *testing.T, files map[string]string) Paths {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return Paths{SelfCgroup: filepath.Join(dir, "proc/self/cgroup"), CgroupRoot: filepath.Join(dir, "sys/fs/cgroup"), Meminfo: filepath.Join(dir, "proc/meminfo")}
}

const meminfo8G = "MemTotal:        8388608 kB\nMemFree:         1000 kB\n"

func TestDetectReadsTheTightestLimitAndSaysWhere(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  Memory
	}{
		{"v2 container with its own limit", map[string]string{
			"proc/self/cgroup": "0::/system.slice/precept.service\n",
			"sys/fs/cgroup/system.slice/precept.service/memory.max": "2147483648\n",
			"sys/fs/cgroup/system.slice/memory.max":                 "max\n",
			"proc/meminfo":                                          meminfo8G,
		}, Memory{2 << 30, CgroupV2}},
		{"v2 parent's limit binds the child", map[string]string{
			"proc/self/cgroup":                          "0::/kubepods/pod1/c1\n",
			"sys/fs/cgroup/kubepods/pod1/c1/memory.max": "max\n",
			"sys/fs/cgroup/kubepods/pod1/memory.max":    "1073741824\n",
			"sys/fs/cgroup/kubepods/memory.max":         "4294967296\n",
			"proc/meminfo":                              meminfo8G,
		}, Memory{1 << 30, CgroupV2}},
		{"v2 namespace: the container's files at the root", map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "536870912",
			"proc/meminfo":             meminfo8G,
		}, Memory{512 << 20, CgroupV2}},
		{"v2 max everywhere means the machine", map[string]string{
			"proc/self/cgroup":                    "0::/user.slice\n",
			"sys/fs/cgroup/user.slice/memory.max": "max\n",
			"proc/meminfo":                        meminfo8G,
		}, Memory{8 << 30, Meminfo}},
		{"v2 limit above the machine means the machine", map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "17179869184\n",
			"proc/meminfo":             meminfo8G,
		}, Memory{8 << 30, Meminfo}},
		{"v1 memory controller", map[string]string{
			"proc/self/cgroup": "12:cpuset:/docker/abc\n4:memory:/docker/abc\n1:name=systemd:/docker/abc\n",
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "3221225472\n",
			"proc/meminfo": meminfo8G,
		}, Memory{3 << 30, CgroupV1}},
		{"v1 hidden path falls back to the controller's root", map[string]string{
			"proc/self/cgroup":                           "4:memory:/docker/abc\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "1073741824\n",
			"proc/meminfo":                               meminfo8G,
		}, Memory{1 << 30, CgroupV1}},
		{"v1 parent's limit binds the child", map[string]string{
			"proc/self/cgroup": "4:memory:/process_api/abc\n",
			"sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes": "9223372036854771712\n",
			"sys/fs/cgroup/memory/process_api/memory.limit_in_bytes":     "1610612736\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes":                 "9223372036854771712\n",
			"proc/meminfo": meminfo8G,
		}, Memory{3 << 29, CgroupV1}},
		{"v1 unlimited is the largest page-aligned int64", map[string]string{
			"proc/self/cgroup":                           "4:memory,hugetlb:/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
			"proc/meminfo":                               meminfo8G,
		}, Memory{8 << 30, Meminfo}},
		{"hybrid: the memory controller on v1 wins over the empty v2 line", map[string]string{
			"proc/self/cgroup": "0::/init.scope\n5:memory:/init.scope\n",
			"sys/fs/cgroup/memory/init.scope/memory.limit_in_bytes": "2147483648\n",
			"proc/meminfo": meminfo8G,
		}, Memory{2 << 30, CgroupV1}},
		{"no cgroup file at all: the machine", map[string]string{
			"proc/meminfo": meminfo8G,
		}, Memory{8 << 30, Meminfo}},
		{"cgroup unreadable garbage: the machine", map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "lots\n",
			"proc/meminfo":             meminfo8G,
		}, Memory{8 << 30, Meminfo}},
		{"no meminfo, a cgroup limit", map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "1073741824\n",
		}, Memory{1 << 30, CgroupV2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Detect(system(t, tc.files))
			if err != nil {
				t.Fatalf("Detect: %v", err)
			}
			if got != tc.want {
				t.Fatalf("Detect = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestUnreadableFilesGiveErrorsThatNameTheFile(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		read  func(Paths) error
		want  string
	}{
		{"meminfo missing", nil, func(p Paths) error { _, err := ReadMeminfo(p.Meminfo); return err }, "no such file"},
		{"meminfo without MemTotal", map[string]string{"proc/meminfo": "MemFree: 12 kB\n"}, func(p Paths) error { _, err := ReadMeminfo(p.Meminfo); return err }, "has no MemTotal line"},
		{"meminfo in pages", map[string]string{"proc/meminfo": "MemTotal: 12 pages\n"}, func(p Paths) error { _, err := ReadMeminfo(p.Meminfo); return err }, `MemTotal "12 pages" is not a number of kB`},
		{"meminfo negative", map[string]string{"proc/meminfo": "MemTotal: -5 kB\n"}, func(p Paths) error { _, err := ReadMeminfo(p.Meminfo); return err }, `"-5" is not a number of kB`},
		{"meminfo overflowing", map[string]string{"proc/meminfo": "MemTotal: 99999999999999999999999 kB\n"}, func(p Paths) error { _, err := ReadMeminfo(p.Meminfo); return err }, "is not a number of kB"},
		{"cgroup garbage limit", map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "\x00\x01 plenty of it, honestly, more than you will ever need\n"}, func(p Paths) error { _, err := ReadCgroup(p.SelfCgroup, p.CgroupRoot); return err }, `is neither "max" nor a positive number of bytes`},
		{"cgroup zero", map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "0\n"}, func(p Paths) error { _, err := ReadCgroup(p.SelfCgroup, p.CgroupRoot); return err }, `"0" is neither`},
		{"cgroup without a memory line", map[string]string{"proc/self/cgroup": "3:cpu:/x\nnonsense\n"}, func(p Paths) error { _, err := ReadCgroup(p.SelfCgroup, p.CgroupRoot); return err }, "names no memory cgroup"},
		{"v2 without memory.max anywhere", map[string]string{"proc/self/cgroup": "0::/a/b\n"}, func(p Paths) error { _, err := ReadCgroup(p.SelfCgroup, p.CgroupRoot); return err }, "no memory.max under"},
		{"v1 without the limit file", map[string]string{"proc/self/cgroup": "4:memory:/a\n"}, func(p Paths) error { _, err := ReadCgroup(p.SelfCgroup, p.CgroupRoot); return err }, "no memory.limit_in_bytes under"},
		{"nothing at all", nil, func(p Paths) error { _, err := Detect(p); return err }, "detect memory: read cgroup"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.read(system(t, tc.files))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestChooseFollowsTheSettingAndLeavesRoomForThePageCache(t *testing.T) {
	machine := func(m Memory, err error) func() (Memory, error) {
		return func() (Memory, error) { return m, err }
	}
	for _, tc := range []struct {
		name       string
		s          Setting
		gomemlimit int64
		detect     func() (Memory, error)
		want       Choice
		wantErr    bool
	}{
		{"GOMEMLIMIT wins over auto", Setting{Auto: true}, 300 << 20, machine(Memory{8 << 30, Meminfo}, nil), Choice{Limit: 300 << 20, Source: Env}, false},
		{"GOMEMLIMIT wins over a number", Setting{MiB: 512}, 300 << 20, nil, Choice{Limit: 300 << 20, Source: Env}, false},
		{"GOMEMLIMIT=off is no limit", Setting{Auto: true}, math.MaxInt64, nil, Choice{Source: Env}, false},
		{"0 is off", Setting{}, 0, nil, Choice{Source: Off}, false},
		{"a number is the operator's and never raised", Setting{MiB: 512}, 0, nil, Choice{Limit: 512 << 20, Source: Configured}, false},
		{"auto in a 2 GiB container", Setting{Auto: true}, 0, machine(Memory{2 << 30, CgroupV2}, nil),
			Choice{Limit: 1503238553, Source: CgroupV2, Ceiling: 1932735283}, false},
		{"auto on an 8 GiB machine", Setting{Auto: true}, 0, machine(Memory{8 << 30, Meminfo}, nil),
			Choice{Limit: 6012954214, Source: Meminfo, Ceiling: 7730941132}, false},
		{"auto in a tiny container keeps the floor", Setting{Auto: true}, 0, machine(Memory{50 << 20, CgroupV1}, nil),
			Choice{Limit: 64 << 20, Source: CgroupV1, Ceiling: 64 << 20}, false},
		{"auto blind falls back to the old default", Setting{Auto: true}, 0, machine(Memory{}, errors.New("no /proc")),
			Choice{Limit: 512 << 20, Source: Fallback}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Choose(tc.s, tc.gomemlimit, tc.detect, 512)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Choose error = %v, want error %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Fatalf("Choose = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestThisMachineHasMemory(t *testing.T) {
	m, err := Detect(SystemPaths)
	if err != nil {
		t.Fatalf("Detect on this machine: %v", err)
	}
	if m.Bytes < 64<<20 {
		t.Fatalf("Detect on this machine = %+v: less than 64 MiB", m)
	}
}
