package config

import (
	"fmt"
	"time"

	"github.com/precept-dev/precept/lib/gitrepo"
)

// DefaultMaintenanceInterval is how often the git repositories are checked
// for maintenance (docs/thresholds.md, "Repository maintenance").
const DefaultMaintenanceInterval = time.Minute

// Maintenance configures the upkeep of the feedback and rules repositories.
type Maintenance struct {
	// Interval is how often each repository is checked; a check that finds
	// nothing to do costs a directory listing.
	Interval time.Duration `yaml:"interval"`
	// MaxPacks and MaxLoose bound the packfiles and loose objects a
	// repository may hold before its small packs and loose objects are
	// rolled into one pack.
	MaxPacks int `yaml:"max_packs"`
	MaxLoose int `yaml:"max_loose"`
}

func defaultMaintenance() Maintenance {
	return Maintenance{Interval: DefaultMaintenanceInterval, MaxPacks: gitrepo.DefaultMaxPacks, MaxLoose: gitrepo.DefaultMaxLoose}
}

func (m Maintenance) validate() error {
	if m.Interval <= 0 {
		return fmt.Errorf("config: maintenance.interval: must be a positive duration such as 1m")
	}
	if m.MaxPacks < 2 || m.MaxPacks > 10000 {
		return fmt.Errorf("config: maintenance.max_packs: %d is outside 2..10000", m.MaxPacks)
	}
	if m.MaxLoose < 1 || m.MaxLoose > 1000000 {
		return fmt.Errorf("config: maintenance.max_loose: %d is outside 1..1000000", m.MaxLoose)
	}
	return nil
}
