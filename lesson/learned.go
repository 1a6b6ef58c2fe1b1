package lesson

import (
	"bytes"
	"fmt"
	"slices"

	"gopkg.in/yaml.v3"
)

// Learned are phrasings learned from curators' corrections: the comment
// of each decision a curator put in a category, by category id. They go
// into the curator's taxonomy file as a change the curator reviews
// (docs/lessons.md, "Curator corrections").
type Learned map[string][]string

// YAML renders learned phrasings as a curator's taxonomy file.
func (l Learned) YAML() []byte {
	var f taxonomyFile
	for _, id := range sortedKeys(l) {
		f.Categories = append(f.Categories, Category{ID: id, Phrasings: l[id]})
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	_ = enc.Encode(f)
	return b.Bytes()
}

func sortedKeys(l Learned) []string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// MergeLearned adds learned phrasings to a curator's taxonomy file,
// keeping its layout and comments: a phrasing the file (or the embedded
// taxonomy) already has is skipped, a category the file lacks gets an
// entry of its own. Phrasings longer than a taxonomy entry may be, and
// those past a category's limit, are left out (the curator's file is a
// sample, not an archive). It returns the new file and how many phrasings
// it added; the result is checked against the embedded taxonomy.
func MergeLearned(file []byte, learned Learned) ([]byte, int, error) {
	var doc yaml.Node
	if len(bytes.TrimSpace(file)) == 0 {
		file = []byte("categories: []\n")
	}
	if err := yaml.Unmarshal(file, &doc); err != nil {
		return nil, 0, fmt.Errorf("taxonomy file: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, 0, fmt.Errorf("taxonomy file: not a mapping with categories")
	}
	root := doc.Content[0]
	cats := mapValue(root, "categories")
	if cats == nil {
		cats = &yaml.Node{Kind: yaml.SequenceNode}
		root.Content = append(root.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "categories"}, cats)
	}
	if cats.Kind != yaml.SequenceNode {
		return nil, 0, fmt.Errorf("taxonomy file: categories is not a list")
	}
	cats.Style = 0
	base := DefaultTaxonomy()
	added := 0
	for _, id := range sortedKeys(learned) {
		var entry *yaml.Node
		for _, c := range cats.Content {
			if v := mapValue(c, "id"); v != nil && v.Value == id {
				entry = c
				break
			}
		}
		if entry == nil {
			entry = &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
				{Kind: yaml.ScalarNode, Value: "id"}, {Kind: yaml.ScalarNode, Value: id},
			}}
			cats.Content = append(cats.Content, entry)
		}
		phr := mapValue(entry, "phrasings")
		if phr == nil {
			phr = &yaml.Node{Kind: yaml.SequenceNode}
			entry.Content = append(entry.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "phrasings"}, phr)
		}
		known := map[string]bool{}
		for _, n := range phr.Content {
			known[n.Value] = true
		}
		room := maxEntries - len(phr.Content)
		if c, ok := base.Category(id); ok {
			for _, p := range c.Phrasings {
				known[p] = true
			}
			room -= len(c.Phrasings)
		}
		for _, p := range learned[id] {
			if known[p] || len(p) > maxEntryBytes || room <= 0 {
				continue
			}
			room--
			known[p] = true
			phr.Content = append(phr.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: p, Style: yaml.DoubleQuotedStyle})
			added++
		}
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, 0, err
	}
	if _, err := base.Extend(b.Bytes()); err != nil {
		return nil, 0, fmt.Errorf("the merged taxonomy file would not load: %w", err)
	}
	return b.Bytes(), added, nil
}

func mapValue(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}
