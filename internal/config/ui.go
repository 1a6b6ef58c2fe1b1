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
	// MaxSessionsPerIdentity bounds the sessions one identity keeps: a
	// sign-in past it ends that identity's oldest sessions.
	MaxSessionsPerIdentity int `yaml:"max_sessions_per_identity"`
	// MaxStreamsPerIdentity bounds the live pages (event streams) one
	// identity follows at once on a replica, out of the replica's 256.
	MaxStreamsPerIdentity int `yaml:"max_streams_per_identity"`
}

// Bounds of the per-identity limits: a replica serves at most 256 event
// streams (internal/console), so one identity may not be allowed them all.
const (
	maxSessionsPerIdentity = 1000
	maxStreamsPerIdentity  = 128
)

func defaultUI() UI {
	return UI{Enabled: true, SessionIdle: 8 * time.Hour, SessionMax: 7 * 24 * time.Hour, MaxSessionsPerIdentity: 20, MaxStreamsPerIdentity: 16}
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
	if u.MaxSessionsPerIdentity < 1 || u.MaxSessionsPerIdentity > maxSessionsPerIdentity {
		return invalid("ui.max_sessions_per_identity", "must be 1..%d", maxSessionsPerIdentity)
	}
	if u.MaxStreamsPerIdentity < 1 || u.MaxStreamsPerIdentity > maxStreamsPerIdentity {
		return invalid("ui.max_streams_per_identity", "must be 1..%d (a replica serves 256 streams in all)", maxStreamsPerIdentity)
	}
	return nil
}
