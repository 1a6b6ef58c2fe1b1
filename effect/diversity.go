package effect

// Importance and confidence move only on evidence from distinct people
// (docs/effects.md, "Evidence from distinct people"). Reviewer and epic
// ids are whatever a recorder sends, so one pipeline could otherwise
// raise any rule to CRITICAL, or wear its confidence down, on its own:
// the validations that raise a rule and the recurrences that lower its
// confidence count only once they come from as many distinct reviewers,
// epics and producers as a high cluster needs.

// Diversity is how many distinct reviewers, epics and producers (API
// tokens or streams, as precept saw them) evidence must come from; a
// value of 0 or 1 requires nothing.
type Diversity struct {
	Reviewers, Epics, Producers int
}

// DefaultDiversity matches the evaluator's defaults for a high cluster.
func DefaultDiversity() Diversity { return Diversity{Reviewers: 2, Epics: 2, Producers: 1} }

// people are the distinct reviewers, epics and producers of some
// decisions, by their numbers in the tracker's names.
type people struct {
	reviewers, epics, producers map[name]bool
}

func newPeople() people {
	return people{reviewers: map[name]bool{}, epics: map[name]bool{}, producers: map[name]bool{}}
}

func (p people) add(f fact) {
	p.reviewers[f.reviewer] = true
	p.epics[f.epic] = true
	p.producers[f.producer] = true
}

// Distinct counts the reviewers, epics and producers evidence came from.
type Distinct struct {
	Reviewers, Epics, Producers int64
}

func (p people) count() Distinct {
	return Distinct{Reviewers: int64(len(p.reviewers)), Epics: int64(len(p.epics)), Producers: int64(len(p.producers))}
}

// met reports whether d satisfies the requirement.
func (v Diversity) met(d Distinct) bool {
	return d.Reviewers >= int64(v.Reviewers) && d.Epics >= int64(v.Epics) && d.Producers >= int64(v.Producers)
}
