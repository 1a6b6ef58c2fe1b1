package impact

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/precept-dev/precept/rules/rulefmt"
)

// The previews kept in Options.Dir, one file per proposal
// (docs/formats.md, "Impact previews").

// save writes pv to <Dir>/<proposal id>.json through a temporary file,
// so a crash leaves the old file or the new one.
func (s *Service) save(pv Preview) error {
	if !rulefmt.ValidProposalID(pv.ProposalID) {
		return fmt.Errorf("invalid proposal id %q", pv.ProposalID)
	}
	b, err := json.Marshal(pv)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.opts.Dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(s.opts.Dir, ".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(s.opts.Dir, pv.ProposalID+".json"))
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// load reads the previews kept in Dir. A file that does not parse is
// skipped and logged: it is computed again.
func (s *Service) load() error {
	entries, err := os.ReadDir(s.opts.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read impact previews: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		id, ok := strings.CutSuffix(name, ".json")
		if !ok || !rulefmt.ValidProposalID(id) {
			continue
		}
		pv, err := s.readFile(id)
		if err != nil {
			s.log.Warn("impact preview on disk left out; it is computed again", "file", name, "err", err)
			continue
		}
		s.previews[id] = pv
	}
	return nil
}

// read returns the preview kept in Dir for a proposal, if any.
func (s *Service) read(id string) (Preview, bool) {
	if !rulefmt.ValidProposalID(id) {
		return Preview{}, false
	}
	pv, err := s.readFile(id)
	return pv, err == nil
}

func (s *Service) readFile(id string) (Preview, error) {
	b, err := os.ReadFile(filepath.Join(s.opts.Dir, id+".json"))
	if err != nil {
		return Preview{}, err
	}
	var pv Preview
	if err := json.Unmarshal(b, &pv); err != nil {
		return Preview{}, err
	}
	if pv.ProposalID != id {
		return Preview{}, fmt.Errorf("the file holds the preview of %q", pv.ProposalID)
	}
	return pv, nil
}
