package config

// minExportSalt is the shortest export salt accepted: a short one could
// be found by trying every possibility against a known reviewer id.
const minExportSalt = 16

// Export configures exports (docs/formats.md, "Exports").
type Export struct {
	// Salt keys the hash that replaces people's identities in anonymized
	// exports; env PRECEPT_EXPORT_SALT overrides it. Empty refuses
	// anonymized exports. Keep it secret, and keep it: the same salt gives
	// a person the same pseudonym in every export.
	Salt string `yaml:"salt"`
}

// validate checks the salt's length, never quoting it.
func (e Export) validate() error {
	if e.Salt != "" && len(e.Salt) < minExportSalt {
		return invalid("export.salt", "must be at least %d bytes (env PRECEPT_EXPORT_SALT)", minExportSalt)
	}
	return nil
}
