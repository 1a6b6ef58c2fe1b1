package lesson

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/precept-dev/precept/lib/reload"
)

//go:embed taxonomy.yaml
var defaultTaxonomyYAML []byte

// Category is one kind of problem reviewers flag (docs/lessons.md).
type Category struct {
	ID          string `yaml:"id" json:"id"`
	Group       string `yaml:"group" json:"group"`
	Name        string `yaml:"name" json:"name"`
	Description string `yaml:"description" json:"description"`
	// Protected categories (security, correctness, compliance) are under
	// the safety floor: their rules are never retired by a vote alone.
	Protected bool `yaml:"protected" json:"protected"`
	// Rule is the canonical rule text a draft starts from.
	Rule string `yaml:"rule" json:"rule"`
	// Tags are tag and error_category values that point to the category.
	Tags []string `yaml:"tags" json:"tags,omitempty"`
	// Cues are short key phrases, each a strong sign of the category.
	Cues []string `yaml:"cues" json:"cues,omitempty"`
	// Agents are kinds of agent whose reviews the category is typical of,
	// matched against the agent's name: "review" for review-agent.
	Agents []string `yaml:"agents" json:"agents,omitempty"`
	// Phrasings are example comments in the registers reviewers use.
	Phrasings []string `yaml:"phrasings" json:"phrasings,omitempty"`
}

// Taxonomy is a checked set of categories. Version names its content, so
// a lesson records which taxonomy classified it.
type Taxonomy struct {
	Version    string
	Categories []Category
	// Neighbours are sets of categories whose lessons a reviewer often
	// means alike (docs/lessons.md, "Clustering"): clusters may cross
	// them, never other categories.
	Neighbours [][]string
	byID       map[string]int
	// family names each category's family: the smallest id of the
	// categories its neighbour sets join it to, itself when it has none.
	family map[string]string
}

// Category returns the category with id.
func (t *Taxonomy) Category(id string) (Category, bool) {
	i, ok := t.byID[id]
	if !ok {
		return Category{}, false
	}
	return t.Categories[i], true
}

// taxonomyFile is the YAML form: the embedded default is a whole
// taxonomy; a curator's file adds categories and extends existing ones.
type taxonomyFile struct {
	Neighbours [][]string `yaml:"neighbours"`
	Categories []Category `yaml:"categories"`
}

var idPattern = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)

// Limits on a taxonomy, so a curator's file cannot make classification
// arbitrarily slow.
const (
	maxCategories = 500
	maxEntries    = 200 // cues or phrasings per category
	maxEntryBytes = 500
)

// ParseTaxonomy reads a whole taxonomy from YAML and checks it.
func ParseTaxonomy(data []byte) (*Taxonomy, error) {
	f, err := decodeFile(data)
	if err != nil {
		return nil, err
	}
	return build(f.Categories, f.Neighbours, data)
}

func decodeFile(data []byte) (taxonomyFile, error) {
	var f taxonomyFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return f, fmt.Errorf("parse taxonomy: %w", err)
	}
	return f, nil
}

// Extend returns t with a curator's file applied: an entry whose id t
// already has adds its tags, cues and phrasings to that category (and
// replaces its name, description, rule or protected flag when given); a
// new id adds a category, which must then be complete.
func (t *Taxonomy) Extend(data []byte) (*Taxonomy, error) {
	f, err := decodeFile(data)
	if err != nil {
		return nil, err
	}
	cats := slices.Clone(t.Categories)
	index := map[string]int{}
	for i, c := range cats {
		index[c.ID] = i
	}
	for _, e := range f.Categories {
		i, ok := index[e.ID]
		if !ok {
			index[e.ID] = len(cats)
			cats = append(cats, e)
			continue
		}
		c := cats[i]
		c.Tags = appendNew(slices.Clone(c.Tags), e.Tags...)
		c.Cues = appendNew(slices.Clone(c.Cues), e.Cues...)
		c.Phrasings = appendNew(slices.Clone(c.Phrasings), e.Phrasings...)
		for dst, src := range map[*string]string{&c.Group: e.Group, &c.Name: e.Name, &c.Description: e.Description, &c.Rule: e.Rule} {
			if strings.TrimSpace(src) != "" {
				*dst = src
			}
		}
		c.Protected = c.Protected || e.Protected
		cats[i] = c
	}
	return build(cats, append(slices.Clone(t.Neighbours), f.Neighbours...), append([]byte(t.Version), data...))
}

func appendNew(dst []string, src ...string) []string {
	for _, s := range src {
		if !slices.Contains(dst, s) {
			dst = append(dst, s)
		}
	}
	return dst
}

func build(cats []Category, neighbours [][]string, content []byte) (*Taxonomy, error) {
	if len(cats) == 0 {
		return nil, errors.New("taxonomy: no categories")
	}
	if len(cats) > maxCategories {
		return nil, fmt.Errorf("taxonomy: %d categories, at most %d", len(cats), maxCategories)
	}
	t := &Taxonomy{Categories: cats, Neighbours: neighbours, byID: make(map[string]int, len(cats))}
	var errs []error
	for i, c := range cats {
		where := fmt.Sprintf("taxonomy: category %d (%q)", i+1, c.ID)
		if _, dup := t.byID[c.ID]; dup {
			errs = append(errs, fmt.Errorf("%s: duplicate id", where))
		}
		if !idPattern.MatchString(c.ID) || c.ID == Unclear {
			errs = append(errs, fmt.Errorf("%s: id must be lower-case words joined by '-' and not %q", where, Unclear))
		}
		t.byID[c.ID] = i
		for field, v := range map[string]string{"group": c.Group, "name": c.Name, "description": c.Description, "rule": c.Rule} {
			if strings.TrimSpace(v) == "" {
				errs = append(errs, fmt.Errorf("%s: %s is empty", where, field))
			}
		}
		if len(c.Cues)+len(c.Phrasings) == 0 {
			errs = append(errs, fmt.Errorf("%s: needs cues or phrasings to be recognised", where))
		}
		for field, list := range map[string][]string{"tags": c.Tags, "cues": c.Cues, "phrasings": c.Phrasings} {
			if len(list) > maxEntries {
				errs = append(errs, fmt.Errorf("%s: %d %s, at most %d", where, len(list), field, maxEntries))
			}
			for _, s := range list {
				if len(s) > maxEntryBytes || strings.TrimSpace(s) == "" {
					errs = append(errs, fmt.Errorf("%s: %s entry %q is empty or longer than %d bytes", where, field, clip(s, 40), maxEntryBytes))
				}
			}
		}
	}
	errs = append(errs, t.joinFamilies()...)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(content)
	t.Version = "tx-" + hex.EncodeToString(sum[:6])
	return t, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

var defaultTaxonomy = sync.OnceValue(func() *Taxonomy {
	t, err := ParseTaxonomy(defaultTaxonomyYAML)
	if err != nil {
		panic("the embedded taxonomy is invalid: " + err.Error())
	}
	return t
})

// DefaultTaxonomy returns the embedded taxonomy.
func DefaultTaxonomy() *Taxonomy { return defaultTaxonomy() }

// Source serves the classifier: the embedded taxonomy extended by a
// curator's file, re-read when the file changes. A broken file leaves the
// last good classifier in use and is reported by LastError.
type Source struct{ f *reload.File[*Classifier] }

var defaultClassifier = sync.OnceValue(func() *Classifier { return NewClassifier(DefaultTaxonomy()) })

// NewSource returns a Source over the embedded taxonomy, extended by the
// file at path when path is not empty. The file must exist and be valid
// at start.
func NewSource(path string) (*Source, error) {
	f, err := reload.New("taxonomy file", path, defaultClassifier(), func(data []byte) (*Classifier, error) {
		t, err := DefaultTaxonomy().Extend(data)
		if err != nil {
			return nil, err
		}
		return NewClassifier(t), nil
	})
	if err != nil {
		return nil, err
	}
	return &Source{f}, nil
}

// DefaultSource serves the embedded taxonomy alone.
func DefaultSource() *Source { return &Source{reload.Fixed(defaultClassifier())} }

// Path is the curator's file, "" when there is none.
func (s *Source) Path() string { return s.f.Path() }

// Classifier returns the current classifier, reloading the curator's file
// first when it changed.
func (s *Source) Classifier() *Classifier { return s.f.Get() }

// LastError is the last reload failure, nil after a good reload.
func (s *Source) LastError() error { return s.f.Err() }

// Status re-reads the curator's file when it changed and says how its
// reloads went, for the service to log, count and report.
func (s *Source) Status() reload.Status { return s.f.Status() }
