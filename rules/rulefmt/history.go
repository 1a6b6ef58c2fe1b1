package rulefmt

import "time"

// HistoryEntry is one commit in a rule's or proposal's history.
type HistoryEntry struct {
	Commit  string
	Subject string
	Message string
	Author  string
	At      time.Time
	// Trailers by key; repeated keys are joined with ", ".
	Trailers map[string]string
	// CreatesRule says the commit added the rule named by its Rule-Id.
	CreatesRule bool
}
