package feedbackstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/gitrepo"
)

// CorrectionsDir is where curator corrections live in the feedback
// repository (docs/formats.md, "Correction records").
const CorrectionsDir = "feedback/corrections"

// CorrectionPath returns the file that holds a correction record.
func CorrectionPath(id string) string { return CorrectionsDir + "/" + id + ".json" }

// Correction is a curator's correction of precept's judgment as the
// feedback repository records it: who made it, when, and the correction
// itself, which the evaluator defines and the store keeps as it is. A
// record is written once and never changed, so every replica applies the
// same corrections in the order the branch recorded them.
type Correction struct {
	ID string    `json:"id"`
	By string    `json:"by"`
	At time.Time `json:"at"`
	// Body is the correction as a JSON object.
	Body json.RawMessage `json:"correction"`
}

// maxCorrectionBytes bounds one record; a correction names at most a
// thousand decisions and a short reason.
const maxCorrectionBytes = 256 << 10

var correctionID = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z_-]{0,63}$`)

func (c Correction) validate() error {
	var errs []error
	if !correctionID.MatchString(c.ID) {
		errs = append(errs, fmt.Errorf("id %q: want 1-64 letters, digits, '-' or '_'", c.ID))
	}
	if c.By == "" {
		errs = append(errs, errors.New("who made the correction is missing"))
	}
	if c.At.IsZero() {
		errs = append(errs, errors.New("when the correction was made is missing"))
	}
	if !json.Valid(c.Body) || !bytes.HasPrefix(bytes.TrimSpace(c.Body), []byte("{")) {
		errs = append(errs, errors.New("the correction must be a JSON object"))
	}
	return errors.Join(errs...)
}

func encodeCorrection(c Correction) ([]byte, error) {
	var body bytes.Buffer
	if err := json.Indent(&body, c.Body, "  ", "  "); err != nil {
		return nil, fmt.Errorf("encode correction %s: %w", c.ID, err)
	}
	c.Body = body.Bytes()
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode correction %s: %w", c.ID, err)
	}
	return append(b, '\n'), nil
}

func decodeCorrection(b []byte) (Correction, error) {
	var c Correction
	if err := json.Unmarshal(b, &c); err != nil {
		return Correction{}, fmt.Errorf("decode correction: %w", err)
	}
	if err := c.validate(); err != nil {
		return Correction{}, fmt.Errorf("decode correction: %w", err)
	}
	return c, nil
}

// RecordCorrection commits a correction record to the feedback branch
// with subject as the commit's subject line, and returns once the index
// has it (or the record is durable and the index will follow). Recording
// the same record again is a no-op; another record under the same id is
// refused, so a correction, once recorded, is never rewritten.
func (s *Store) RecordCorrection(ctx context.Context, c Correction, subject string) error {
	if err := c.validate(); err != nil {
		return precept.Errorf(precept.Invalid, "correction: %v", err)
	}
	data, err := encodeCorrection(c)
	if err != nil {
		return err
	}
	if len(data) > maxCorrectionBytes {
		return precept.Errorf(precept.Invalid, "correction: %d bytes, at most %d", len(data), maxCorrectionBytes)
	}
	path := CorrectionPath(c.ID)
	changed := false
	_, err = s.update(ctx, func(snap *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		changed = false
		prev, err := snap.ReadFile(path)
		switch {
		case err == nil && bytes.Equal(prev, data):
			return nil, nil
		case err == nil:
			return nil, precept.Errorf(precept.Conflict, "correction %s is already recorded with other content", c.ID)
		case !errors.Is(err, gitrepo.ErrNotFound):
			return nil, err
		}
		changed = true
		return &gitrepo.CommitSpec{
			Message:  subject,
			Trailers: []gitrepo.Trailer{{Key: "Correction-Id", Value: c.ID}, {Key: "Corrected-By", Value: c.By}},
			Changes:  []gitrepo.Change{{Path: path, Data: data}},
		}, nil
	})
	if err != nil {
		return fmt.Errorf("record correction %s: %w", c.ID, err)
	}
	if changed {
		if _, err := s.CatchUp(ctx); err != nil {
			// The record is durable; the index follows on the next tick.
			s.opts.Logger.Warn("index a correction record", "correction", c.ID, "err", err)
		}
	}
	return nil
}

// Corrections returns up to limit correction records numbered after seq,
// in the order the branch recorded them, with their numbers.
func (s *Store) Corrections(seq uint64, limit int) ([]Entry, error) {
	return s.ix.corrections(seq, limit)
}
