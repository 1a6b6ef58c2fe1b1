package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// pseudonymPrefix starts every hashed identity in an anonymized export, so
// a reader can tell a pseudonym from a name.
const pseudonymPrefix = "anon-"

// pseudonymHexDigits is how much of the HMAC a pseudonym keeps: 64 bits,
// far more than enough to keep a team's reviewers apart.
const pseudonymHexDigits = 16

// fieldPolicy is what anonymization does with a string field.
type fieldPolicy int

const (
	// drop is the default: a string field not listed below is free text
	// or may hold some, and is left out.
	drop fieldPolicy = iota
	// keep is an identifier or a label from a fixed vocabulary.
	keep
	// hash is a person's identity, or an id a producer chose (which may
	// be made of one, such as an email address): it becomes a pseudonym.
	// An id hashed in one field is hashed alike wherever it appears, so
	// records still join.
	hash
	// hashNamed is "<kind>:<name>" where the name of an "api:" token or a
	// "curator:" is a person's; other kinds ("stream:", "llm:") are kept.
	hashNamed
	// keepPromptVersion keeps a prompt version of the form precept gives
	// (promptVersionPattern), which names no one, and drops any other
	// text a producer put there.
	keepPromptVersion
)

// promptVersionPattern is the form of the prompt versions precept
// serves: "v1:" and 16 hex digits (docs/formats.md, "Assembled
// prompts").
var promptVersionPattern = regexp.MustCompile(`^v1:[0-9a-f]{16}$`)

// anonymizedFields lists every string field an anonymized export keeps
// or hashes (docs/formats.md, "Exports"). Every other string field is
// dropped, including fields added to the messages later: a new field is
// private until someone decides otherwise here.
//
// Producers choose decision, epic and task ids, and precept's checks
// let an email address through: they are hashed, everywhere they
// appear. A scope path is a producer's file path, which may name a
// person (home/alice/...): it is dropped.
var anonymizedFields = map[protoreflect.FullName]fieldPolicy{
	"precept.v1.HITLDecision.decision_id":         hash,
	"precept.v1.HITLDecision.gate_id":             keep,
	"precept.v1.HITLDecision.epic_id":             hash,
	"precept.v1.HITLDecision.task_id":             hash,
	"precept.v1.HITLDecision.agent":               keep,
	"precept.v1.HITLDecision.reviewer_id":         hash,
	"precept.v1.HITLDecision.agent_output_sha":    keep,
	"precept.v1.HITLDecision.approved_output_sha": keep,
	"precept.v1.HITLDecision.prompt_version":      keepPromptVersion,
	"precept.v1.HITLDecision.rating":              keep,
	"precept.v1.HITLDecision.error_categories":    keep,
	// Quality dimension names (accuracy, style_match, ...); the scores
	// are numbers.
	"precept.v1.HITLDecision.quality_scores": keep,

	"precept.v1.Feedback.source":   hashNamed,
	"precept.v1.Feedback.producer": hashNamed,
	"precept.v1.Feedback.commit":   keep,

	"precept.v1.Evaluation.decision_id":          hash,
	"precept.v1.Evaluation.similar_feedback_ids": hash,
	"precept.v1.Evaluation.cluster_id":           hash,
	"precept.v1.Evaluation.evaluator":            keep,
	"precept.v1.ProposedAction.target_agent":     keep,
	"precept.v1.ProposedAction.proposal_id":      keep,
	"precept.v1.ProposedAction.priority":         keep,
	"precept.v1.RubricAttribute.name":            keep,
	"precept.v1.RubricResult.missing":            keep,
	"precept.v1.ClusterStats.agents":             keep,
	"precept.v1.ClusterStats.producers":          hashNamed,
	"precept.v1.Lesson.category":                 keep,
	"precept.v1.Lesson.taxonomy":                 keep,
	"precept.v1.Lesson.by":                       hashNamed,
	"precept.v1.LessonEvidence.kind":             keep,

	"precept.v1.RuleEffect.rule_id":    keep,
	"precept.v1.RuleEffect.agents":     keep,
	"precept.v1.RuleEffect.category":   keep,
	"precept.v1.RuleEffect.cluster_id": hash,
	"precept.v1.RuleEffect.method":     keep,
	"precept.v1.RuleEffect.verdict":    keep,
}

// namedKinds are the "<kind>:" prefixes whose name is a person's;
// machineKinds those whose value names no one.
var (
	namedKinds   = []string{"api:", "curator:"}
	machineKinds = []string{"stream:", "llm:"}
)

// anonymizer replaces identities with keyed hashes and drops free text.
// It holds the salt: it never prints it.
type anonymizer struct {
	key []byte
}

// newAnonymizer returns an anonymizer keyed by salt, nil without one.
func newAnonymizer(salt string) *anonymizer {
	if salt == "" {
		return nil
	}
	return &anonymizer{key: []byte(salt)}
}

// String keeps the salt out of anything that prints an anonymizer.
func (a *anonymizer) String() string { return "anonymizer{salt: hidden}" }

// pseudonym returns the pseudonym of an identity: the same for the same
// identity and salt, and "" for "".
func (a *anonymizer) pseudonym(id string) string {
	if id == "" {
		return ""
	}
	m := hmac.New(sha256.New, a.key)
	m.Write([]byte(id))
	return pseudonymPrefix + hex.EncodeToString(m.Sum(nil))[:pseudonymHexDigits]
}

// pseudonymNamed hashes the name of "api:<name>" and "curator:<name>",
// keeps "stream:<…>", "llm:<model>" and "deterministic", which name no
// person, and hashes whatever else whole.
func (a *anonymizer) pseudonymNamed(s string) string {
	for _, kind := range namedKinds {
		if name, ok := strings.CutPrefix(s, kind); ok {
			return kind + a.pseudonym(name)
		}
	}
	for _, kind := range machineKinds {
		if strings.HasPrefix(s, kind) {
			return s
		}
	}
	if s == "deterministic" {
		return s
	}
	return a.pseudonym(s)
}

// Anonymize rewrites m in place: every string field is kept, hashed or
// dropped as anonymizedFields says; numbers, enums, booleans and
// timestamps are kept.
func (a *anonymizer) Anonymize(m proto.Message) {
	a.message(m.ProtoReflect())
}

func (a *anonymizer) message(m protoreflect.Message) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		policy := anonymizedFields[fd.FullName()]
		switch {
		case fd.IsMap():
			if policy != keep && (fd.MapKey().Kind() == protoreflect.StringKind || fd.MapValue().Kind() == protoreflect.StringKind) {
				m.Clear(fd)
			} else if fd.MapValue().Kind() == protoreflect.MessageKind {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					a.message(mv.Message())
					return true
				})
			}
		case fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind:
			if fd.IsList() {
				for i := range v.List().Len() {
					a.message(v.List().Get(i).Message())
				}
			} else {
				a.message(v.Message())
			}
		case fd.Kind() == protoreflect.StringKind:
			a.text(m, fd, v, policy)
		case fd.Kind() == protoreflect.BytesKind:
			m.Clear(fd)
		}
		return true
	})
}

// text applies a policy to a string field, or to each string of a list.
func (a *anonymizer) text(m protoreflect.Message, fd protoreflect.FieldDescriptor, v protoreflect.Value, policy fieldPolicy) {
	var rewrite func(string) string
	switch policy {
	case keep:
		return
	case hash:
		rewrite = a.pseudonym
	case hashNamed:
		rewrite = a.pseudonymNamed
	case keepPromptVersion:
		rewrite = func(s string) string {
			if promptVersionPattern.MatchString(s) {
				return s
			}
			return ""
		}
	default:
		m.Clear(fd)
		return
	}
	if !fd.IsList() {
		m.Set(fd, protoreflect.ValueOfString(rewrite(v.String())))
		return
	}
	l := v.List()
	for i := range l.Len() {
		l.Set(i, protoreflect.ValueOfString(rewrite(l.Get(i).String())))
	}
}
