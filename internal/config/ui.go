package config

import "time"

// UI configures the web console at /ui/ on the API port (docs/console.md).
type UI struct {
	// Enabled serves the console; on by default.
	Enabled bool `yaml:"enabled"`
	// SessionIdle signs a session out after this long without a request.
	SessionIdle time.Duration `yaml:"session_idle"`
	// SessionMax signs a session out this long after sign-in, in use or not.
	SessionMax time.Duration `yaml:"session_max"`
	// SecureCookies marks the session cookie Secure even on plain HTTP: set
	// it when TLS ends at a proxy in front of preceptd. Requests that
	// arrive over TLS always get Secure cookies.
	SecureCookies bool `yaml:"secure_cookies"`
}

func defaultUI() UI {
	return UI{Enabled: true, SessionIdle: 8 * time.Hour, SessionMax: 7 * 24 * time.Hour}
}

func (u UI) validate() error {
	if !u.Enabled {
		return nil
	}
	if u.SessionIdle < time.Minute {
		return invalid("ui.session_idle", "must be at least 1m")
	}
	if u.SessionMax < u.SessionIdle {
		return invalid("ui.session_max", "must be at least ui.session_idle (%s)", u.SessionIdle)
	}
	return nil
}
