package gitrepo

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"github.com/precept-dev/precept/lib/durable"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
)

// Ref updates follow git's lock-file protocol so they are atomic for
// readers and interoperate with the git CLI and other processes: create
// <ref>.lock exclusively, verify the current value, write the new value,
// fsync, rename over the ref.

const (
	// lockWait bounds how long a writer waits for another writer's lock.
	lockWait = 5 * time.Second
	// staleLock is the age after which a lock is taken to be left by a
	// crashed process: locks are held for microseconds.
	staleLock = 30 * time.Second
)

// readRef returns the value of a ref from its loose file or packed-refs,
// or ZeroHash when it does not exist.
func readRef(gitDir string, name plumbing.ReferenceName) (Hash, error) {
	b, err := os.ReadFile(filepath.Join(gitDir, filepath.FromSlash(name.String())))
	if err == nil {
		s := strings.TrimSpace(string(b))
		if strings.HasPrefix(s, "ref: ") {
			return readRef(gitDir, plumbing.ReferenceName(strings.TrimPrefix(s, "ref: ")))
		}
		if !plumbing.IsHash(s) {
			return ZeroHash, fmt.Errorf("read ref %s: malformed content %q", name, s)
		}
		return plumbing.NewHash(s), nil
	}
	if !errors.Is(err, os.ErrNotExist) && !isDirErr(err) {
		return ZeroHash, fmt.Errorf("read ref %s: %w", name, err)
	}
	return packedRef(gitDir, name)
}

func isDirErr(err error) bool {
	var pe *os.PathError
	return errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "is a directory")
}

// packedRef looks a ref up in packed-refs.
func packedRef(gitDir string, name plumbing.ReferenceName) (Hash, error) {
	all, err := packedRefs(gitDir)
	if err != nil {
		return ZeroHash, err
	}
	return all[name.String()], nil
}

// packedRefs returns every ref in packed-refs.
func packedRefs(gitDir string) (map[string]Hash, error) {
	f, err := os.Open(filepath.Join(gitDir, "packed-refs"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read packed-refs: %w", err)
	}
	defer f.Close()
	out := map[string]Hash{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' || line[0] == '^' {
			continue
		}
		if hash, ref, ok := strings.Cut(line, " "); ok && plumbing.IsHash(hash) {
			out[ref] = plumbing.NewHash(hash)
		}
	}
	return out, sc.Err()
}

// acquireLock creates path+".lock" exclusively, waiting for another
// writer and breaking locks left by crashed processes.
func acquireLock(path string) (*os.File, error) {
	lock := path + ".lock"
	deadline := time.Now().Add(lockWait)
	for wait := 50 * time.Microsecond; ; wait = min(wait*2, 20*time.Millisecond) {
		f, err := os.OpenFile(lock, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("lock %s: %w", filepath.Base(path), err)
		}
		if fi, serr := os.Stat(lock); serr == nil && time.Since(fi.ModTime()) > staleLock {
			// A crashed writer left it; git would refuse forever.
			_ = os.Remove(lock)
			continue
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("lock %s: held by another writer for %s", filepath.Base(path), lockWait)
		}
		time.Sleep(wait)
	}
}

// casRef sets ref name to new if it currently is old (ZeroHash: absent).
// new ZeroHash deletes the ref.
func casRef(gitDir string, name plumbing.ReferenceName, old, new Hash, fsync bool) error {
	path := filepath.Join(gitDir, filepath.FromSlash(name.String()))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("update ref %s: %w", name.Short(), err)
	}
	f, err := acquireLock(path)
	if err != nil {
		return fmt.Errorf("update ref %s: %w", name.Short(), err)
	}
	lock := f.Name()
	committed := false
	defer func() {
		if !committed {
			f.Close()
			os.Remove(lock)
		}
	}()

	cur, err := readRef(gitDir, name)
	if err != nil {
		return fmt.Errorf("update ref %s: %w", name.Short(), err)
	}
	if cur != old {
		return fmt.Errorf("update ref %s: at %s, expected %s: %w", name.Short(), short(cur), short(old), ErrRefChanged)
	}

	if new.IsZero() {
		if err := removePackedRef(gitDir, name, fsync); err != nil {
			return fmt.Errorf("delete ref %s: %w", name.Short(), err)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("delete ref %s: %w", name.Short(), err)
		}
		return nil
	}

	if _, err := f.WriteString(new.String() + "\n"); err != nil {
		return fmt.Errorf("update ref %s: %w", name.Short(), err)
	}
	if fsync {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("update ref %s: %w", name.Short(), err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("update ref %s: %w", name.Short(), err)
	}
	if err := os.Rename(lock, path); err != nil {
		return fmt.Errorf("update ref %s: %w", name.Short(), err)
	}
	committed = true
	if fsync {
		return durable.SyncDir(filepath.Dir(path))
	}
	return nil
}

// removePackedRef drops name from packed-refs, under packed-refs.lock.
func removePackedRef(gitDir string, name plumbing.ReferenceName, fsync bool) error {
	packed := filepath.Join(gitDir, "packed-refs")
	content, err := os.ReadFile(packed)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !bytes.Contains(content, []byte(" "+name.String()+"\n")) {
		return nil
	}
	f, err := acquireLock(packed)
	if err != nil {
		return err
	}
	lock := f.Name()
	defer os.Remove(lock)
	content, err = os.ReadFile(packed)
	if err != nil {
		f.Close()
		return err
	}
	var out bytes.Buffer
	lines := strings.SplitAfter(string(content), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if _, ref, ok := strings.Cut(strings.TrimSuffix(line, "\n"), " "); ok && ref == name.String() && line[0] != '#' {
			// Skip the peeled line that may follow an annotated tag.
			if i+1 < len(lines) && strings.HasPrefix(lines[i+1], "^") {
				i++
			}
			continue
		}
		out.WriteString(line)
	}
	if _, err := f.Write(out.Bytes()); err != nil {
		f.Close()
		return err
	}
	if fsync {
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(lock, packed)
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("sync %s: %w", filepath.Base(path), err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", filepath.Base(path), err)
	}
	return nil
}

func short(h Hash) string {
	if h.IsZero() {
		return "nothing"
	}
	return h.String()[:12]
}
