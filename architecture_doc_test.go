package precept_test

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The table of packages in docs/architecture.md is the layer map: the
// tests read the layers from it, and hold its import column to what the
// packages import, so the document cannot drift from the code.

const architectureDoc = "docs/architecture.md"

var updateArchitecture = flag.Bool("update-architecture", false, "rewrite the import column of "+architectureDoc+" from go list")

// layerRow is one row of the table: | layer | `package` | what | imports |.
type layerRow struct {
	line    int // index in the document's lines
	layer   int
	pkg     string // module-relative; "" is the module root
	imports []string
}

type layerTable struct {
	lines []string
	rows  []layerRow
}

var layerRowPattern = regexp.MustCompile("^\\| (\\d+) \\| `([^`]+)`[^|]*\\|[^|]*\\| (.*) \\|$")

// rootName is how the table names the module root.
const rootName = "precept"

func readLayerTable(t *testing.T) layerTable {
	t.Helper()
	data, err := os.ReadFile(architectureDoc)
	if err != nil {
		t.Fatal(err)
	}
	tab := layerTable{lines: strings.Split(string(data), "\n")}
	for i, line := range tab.lines {
		m := layerRowPattern.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		layer, _ := strconv.Atoi(m[1])
		row := layerRow{line: i, layer: layer, pkg: fromTableName(m[2])}
		if m[3] != "none" {
			for _, name := range strings.Split(m[3], ", ") {
				row.imports = append(row.imports, fromTableName(strings.Trim(name, "`")))
			}
		}
		tab.rows = append(tab.rows, row)
	}
	if len(tab.rows) == 0 {
		t.Fatalf("%s has no package table", architectureDoc)
	}
	return tab
}

func fromTableName(name string) string {
	if name == rootName {
		return ""
	}
	return name
}

func toTableName(pkg string) string {
	if pkg == "" {
		return rootName
	}
	return pkg
}

func (tab layerTable) layers() map[string]int {
	m := make(map[string]int, len(tab.rows))
	for _, r := range tab.rows {
		m[r.pkg] = r.layer
	}
	return m
}

// importCell writes an import column: the packages in layer order, then
// by name.
func importCell(imports []string, layers map[string]int) string {
	if len(imports) == 0 {
		return "none"
	}
	sorted := slices.Clone(imports)
	slices.SortFunc(sorted, func(a, b string) int {
		if layers[a] != layers[b] {
			return layers[a] - layers[b]
		}
		return strings.Compare(a, b)
	})
	names := make([]string, len(sorted))
	for i, p := range sorted {
		names[i] = "`" + toTableName(p) + "`"
	}
	return strings.Join(names, ", ")
}

func TestArchitectureTableMatchesTheCode(t *testing.T) {
	tab := readLayerTable(t)
	layers := tab.layers()
	actual := map[string][]string{}
	for _, p := range listPackages(t) {
		from, _ := rel(p.ImportPath)
		actual[from] = nil
		for _, imp := range p.Imports {
			if to, ours := rel(imp); ours {
				actual[from] = append(actual[from], to)
			}
		}
	}
	seen := map[string]bool{}
	rewrite := false
	for i, r := range tab.rows {
		if seen[r.pkg] {
			t.Errorf("%s:%d: %s has two rows", architectureDoc, r.line+1, toTableName(r.pkg))
		}
		seen[r.pkg] = true
		if i > 0 && r.layer < tab.rows[i-1].layer {
			t.Errorf("%s:%d: %s (layer %d) comes after layer %d: keep the rows in layer order", architectureDoc, r.line+1, toTableName(r.pkg), r.layer, tab.rows[i-1].layer)
		}
		imports, exists := actual[r.pkg]
		if !exists {
			t.Errorf("%s:%d: %s is not a package of the module", architectureDoc, r.line+1, toTableName(r.pkg))
			continue
		}
		want := importCell(imports, layers)
		if got := importCell(r.imports, layers); got != want {
			if *updateArchitecture {
				cut := strings.LastIndex(strings.TrimSuffix(tab.lines[r.line], " |"), " | ")
				tab.lines[r.line] = tab.lines[r.line][:cut] + " | " + want + " |"
				rewrite = true
				continue
			}
			t.Errorf("%s:%d: %s imports %s, the table says %s (go test -run %s -update-architecture . rewrites the column)", architectureDoc, r.line+1, toTableName(r.pkg), want, got, t.Name())
		}
	}
	if rewrite {
		if err := os.WriteFile(architectureDoc, []byte(strings.Join(tab.lines, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the import column of %s", architectureDoc)
	}
}

// floor is where a package's folder sits: the libraries under lib/ (and
// the generated code) know nothing of precept; the domain sits at the
// module root; adapters and wiring under internal/; binaries under cmd/,
// and the client examples beside them under examples/.
// A package imports only from its own floor or lower ones, so the tree
// shows the layers (docs/architecture.md, "Folders").
func floor(pkg string) (int, string) {
	switch first, _, _ := strings.Cut(pkg, "/"); first {
	case "lib", "gen":
		return 0, "lib/"
	case "internal":
		return 2, "internal/"
	case "cmd", "examples":
		return 3, "cmd/ or examples/"
	default:
		return 1, "the domain at the root"
	}
}

func TestFoldersShowTheLayers(t *testing.T) {
	for _, p := range listPackages(t) {
		from, _ := rel(p.ImportPath)
		ff, fname := floor(from)
		for _, imp := range p.Imports {
			to, ours := rel(imp)
			if !ours {
				continue
			}
			if ft, tname := floor(to); ft > ff {
				t.Errorf("%s (%s) imports %s (%s): a floor imports only from itself and the floors below", p.ImportPath, fname, imp, tname)
			}
		}
	}
}

// A wrapper is a struct whose only field is (a pointer to) a whole
// service: a type with at least this many methods. It passes the method
// cap without splitting anything.
const wrappedServiceMethods = 10

func TestNoStructWrapsAWholeService(t *testing.T) {
	files := sourceFiles(t)
	methods := methodCounts(t, files)
	for _, file := range files {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		imports := importedDirs(f)
		ast.Inspect(f, func(n ast.Node) bool {
			spec, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := spec.Type.(*ast.StructType)
			if !ok || len(st.Fields.List) != 1 || len(st.Fields.List[0].Names) > 1 {
				return true
			}
			target := fieldTypeKey(st.Fields.List[0].Type, filepath.Dir(file), imports)
			if n := methods[target]; n >= wrappedServiceMethods {
				t.Errorf("%s: %s only carries %s (%d methods): give it the state its responsibility needs, or use functions over explicit inputs", file, spec.Name.Name, target, n)
			}
			return true
		})
	}
}

// methodCounts counts the methods of each type, keyed "dir.Type".
func methodCounts(t *testing.T, files []string) map[string]int {
	t.Helper()
	methods := map[string]int{}
	for _, path := range files {
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil {
				continue
			}
			if key := fieldTypeKey(fn.Recv.List[0].Type, filepath.Dir(path), nil); key != "" {
				methods[key]++
			}
		}
	}
	return methods
}

// importedDirs maps the names a file imports the module's packages under
// to their folders.
func importedDirs(f *ast.File) map[string]string {
	out := map[string]string{}
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		r, ours := rel(p)
		if !ours {
			continue
		}
		name := path.Base(p)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		if r == "" {
			r = "."
		}
		out[name] = r
	}
	return out
}

// fieldTypeKey names the type expr refers to as "dir.Type", or "" when
// it is not a named type of the module.
func fieldTypeKey(expr ast.Expr, dir string, imports map[string]string) string {
	if star, ok := expr.(*ast.StarExpr); ok {
		expr = star.X
	}
	if ix, ok := expr.(*ast.IndexExpr); ok {
		expr = ix.X
	}
	switch e := expr.(type) {
	case *ast.Ident:
		return fmt.Sprintf("%s.%s", dir, e.Name)
	case *ast.SelectorExpr:
		pkg, ok := e.X.(*ast.Ident)
		if !ok || imports[pkg.Name] == "" {
			return ""
		}
		return imports[pkg.Name] + "." + e.Sel.Name
	}
	return ""
}
