package app

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/precept-dev/precept/lib/gitrepo"
)

// signingKeyFile holds the rules repository's signing key when the
// configuration gives none.
const signingKeyFile = "rules-signing.key"

// rulesSigner returns the signer of the rules repository's commits
// (docs/decisions/0016-trust-model.md): the configured key, else the key
// kept in the data directory, made at first start.
func rulesSigner(configured, dataDir string) (*gitrepo.Signer, error) {
	key := []byte(configured)
	if configured == "" {
		path := filepath.Join(dataDir, signingKeyFile)
		data, err := os.ReadFile(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			raw := make([]byte, 32)
			rand.Read(raw)
			data = []byte(hex.EncodeToString(raw) + "\n")
			// O_EXCL: a replica starting at the same moment on a shared
			// volume keeps the key the first one wrote.
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if errors.Is(err, fs.ErrExist) {
				if data, err = os.ReadFile(path); err != nil {
					return nil, fmt.Errorf("rules signing key: %w", err)
				}
				break
			} else if err != nil {
				return nil, fmt.Errorf("rules signing key: %w", err)
			}
			_, werr := f.Write(data)
			if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
				return nil, fmt.Errorf("rules signing key: %w", err)
			}
		case err != nil:
			return nil, fmt.Errorf("rules signing key: %w", err)
		}
		key = []byte(strings.TrimSpace(string(data)))
	}
	s, err := gitrepo.NewSigner(key)
	if err != nil {
		return nil, fmt.Errorf("rules.git.signing_key: %w", err)
	}
	return s, nil
}
