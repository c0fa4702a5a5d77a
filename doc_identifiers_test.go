package syncpod_test

import (
	"fmt"
	"go/ast"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// repoImportPrefix is the import path of the directory this test runs in. The
// nested modules (examples/, examples/virtualkubelet/) are named after their
// directories, so every package's import path is this prefix and its
// directory.
const repoImportPrefix = "github.com/syncpod/syncpod"

// TestDocIdentifiers keeps doc comments honest: every identifier a doc comment
// names, as a doc link ([Name], [Name.Method], [pkg.Name], [*Name]) or in
// backquotes where the text reads as a Go reference (`Name`, `pkg.Name()`),
// must be declared in the package or in the repository package it names, and
// a doc comment of an exported declaration must not name an unexported one: a
// reader of go doc cannot look it up. References to packages outside the
// repository are checked only for their qualifier being imported.
func TestDocIdentifiers(t *testing.T) {
	pkgs, err := loadDocPackages(".")
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 10 {
		t.Fatalf("found %d packages; the walk missed the tree", len(pkgs))
	}
	var problems []string
	for _, p := range pkgs {
		problems = append(problems, p.check(pkgs)...)
	}
	sort.Strings(problems)
	for _, pr := range problems {
		t.Error(pr)
	}
}

// docPackage is what one directory's non-test files declare.
type docPackage struct {
	dir, path, name string
	fset            *token.FileSet
	files           map[string]*ast.File
	decls           map[string]bool            // top-level types, funcs, vars, consts
	members         map[string]map[string]bool // type -> methods and fields
	embeds          map[string][]string        // type -> embedded local types; "" for a foreign one
	anyMember       map[string]bool            // every method or field name, of any type
	types           map[string]bool
}

func loadDocPackages(root string) (map[string]*docPackage, error) {
	pkgs := map[string]*docPackage{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		dir := filepath.Dir(path)
		p := pkgs[dir]
		if p == nil {
			ip := repoImportPrefix
			if dir != "." {
				ip += "/" + filepath.ToSlash(dir)
			}
			p = &docPackage{
				dir: dir, path: ip, fset: token.NewFileSet(), files: map[string]*ast.File{},
				decls: map[string]bool{}, members: map[string]map[string]bool{},
				embeds: map[string][]string{}, anyMember: map[string]bool{}, types: map[string]bool{},
			}
			pkgs[dir] = p
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(p.fset, path, src, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		p.name = f.Name.Name
		p.files[path] = f
		p.collect(f)
		return nil
	})
	byPath := map[string]*docPackage{}
	for _, p := range pkgs {
		byPath[p.path] = p
	}
	return byPath, err
}

func (p *docPackage) member(typ, name string) {
	if p.members[typ] == nil {
		p.members[typ] = map[string]bool{}
	}
	p.members[typ][name] = true
	p.anyMember[name] = true
}

func (p *docPackage) collect(f *ast.File) {
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil || len(d.Recv.List) == 0 {
				p.decls[d.Name.Name] = true
				continue
			}
			p.member(localTypeName(d.Recv.List[0].Type), d.Name.Name)
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.ValueSpec:
					for _, n := range s.Names {
						p.decls[n.Name] = true
					}
				case *ast.TypeSpec:
					p.decls[s.Name.Name] = true
					p.types[s.Name.Name] = true
					p.collectType(s.Name.Name, s.Type)
				}
			}
		}
	}
}

// fieldList is a struct's fields or an interface's methods; nil for any
// other type.
func fieldList(typ ast.Expr) *ast.FieldList {
	switch tt := typ.(type) {
	case *ast.StructType:
		return tt.Fields
	case *ast.InterfaceType:
		return tt.Methods
	}
	return nil
}

func (p *docPackage) collectType(name string, typ ast.Expr) {
	fields := fieldList(typ)
	if fields == nil {
		return
	}
	for _, fld := range fields.List {
		for _, n := range fld.Names {
			p.member(name, n.Name)
		}
		if len(fld.Names) == 0 { // embedded
			emb := localTypeName(fld.Type)
			if emb == "" {
				p.embeds[name] = append(p.embeds[name], "")
				continue
			}
			p.member(name, emb)
			p.embeds[name] = append(p.embeds[name], emb)
		}
	}
}

// localTypeName is the package-local type a receiver or an embedded field
// names, without pointer and type arguments, or "" for a foreign type (whose
// members this test cannot see).
func localTypeName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return localTypeName(x.X)
	case *ast.IndexExpr:
		return localTypeName(x.X)
	case *ast.IndexListExpr:
		return localTypeName(x.X)
	case *ast.Ident:
		return x.Name
	}
	return ""
}

// hasMember reports whether typ has a method or field name, directly or
// promoted through an embedded local type; unknown says a foreign embedded
// type may supply it.
func (p *docPackage) hasMember(typ, name string, seen map[string]bool) (has, unknown bool) {
	if seen[typ] {
		return false, false
	}
	seen[typ] = true
	if p.members[typ][name] {
		return true, false
	}
	for _, emb := range p.embeds[typ] {
		if emb == "" {
			unknown = true
			continue
		}
		h, u := p.hasMember(emb, name, seen)
		if h {
			return true, false
		}
		unknown = unknown || u
	}
	return false, unknown
}

// docComment is one doc comment and whether the declaration it documents is
// part of the package's API.
type docComment struct {
	group    *ast.CommentGroup
	exported bool
	imports  map[string]string // local name -> import path
}

func (p *docPackage) docComments() []docComment {
	var out []docComment
	paths := make([]string, 0, len(p.files))
	for path := range p.files {
		paths = append(paths, path)
	}
	sort.Strings(paths)
	for _, path := range paths {
		f := p.files[path]
		imports := fileImports(f)
		add := func(g *ast.CommentGroup, exported bool) {
			if g != nil {
				out = append(out, docComment{g, exported, imports})
			}
		}
		add(f.Doc, p.name != "main")
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				exp := d.Name.IsExported()
				if d.Recv != nil && len(d.Recv.List) > 0 {
					exp = exp && ast.IsExported(localTypeName(d.Recv.List[0].Type))
				}
				add(d.Doc, exp && p.name != "main")
			case *ast.GenDecl:
				groupExp := false
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.ValueSpec:
						exp := false
						for _, n := range s.Names {
							exp = exp || n.IsExported()
						}
						exp = exp && p.name != "main"
						groupExp = groupExp || exp
						add(s.Doc, exp)
						add(s.Comment, exp)
					case *ast.TypeSpec:
						exp := s.Name.IsExported() && p.name != "main"
						groupExp = groupExp || exp
						add(s.Doc, exp)
						add(s.Comment, exp)
						p.fieldDocs(s.Type, exp, add)
					}
				}
				add(d.Doc, groupExp)
			}
		}
	}
	return out
}

func (p *docPackage) fieldDocs(typ ast.Expr, exported bool, add func(*ast.CommentGroup, bool)) {
	fields := fieldList(typ)
	if fields == nil {
		return
	}
	for _, fld := range fields.List {
		exp := exported
		if len(fld.Names) > 0 {
			any := false
			for _, n := range fld.Names {
				any = any || n.IsExported()
			}
			exp = exp && any
		} else {
			exp = exp && ast.IsExported(localTypeName(fld.Type))
		}
		add(fld.Doc, exp)
		add(fld.Comment, exp)
		p.fieldDocs(fld.Type, exp, add)
	}
}

func fileImports(f *ast.File) map[string]string {
	m := map[string]string{}
	for _, imp := range f.Imports {
		path, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			continue
		}
		name := pathBase(path)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		if name == "_" || name == "." {
			continue
		}
		m[name] = path
	}
	return m
}

// pathBase is the package name an import path usually declares: its last
// element, without a major-version suffix or a "go-" prefix.
func pathBase(path string) string {
	parts := strings.Split(path, "/")
	base := parts[len(parts)-1]
	if len(parts) > 1 && regexp.MustCompile(`^v[0-9]+$`).MatchString(base) {
		base = parts[len(parts)-2]
	}
	base = strings.TrimPrefix(base, "go-")
	base = strings.TrimSuffix(base, ".go")
	return strings.ReplaceAll(base, "-", "")
}

var (
	// A Go doc link: [Name], [Name.Method], [pkg.Name], [pkg.Name.Method],
	// [*Name], [import/path.Name].
	docLinkRE = regexp.MustCompile(`\[(\*?[A-Za-z_][\w]*(?:[./][A-Za-z_][\w.-]*)*)\]`)
	// A backquoted span on one line.
	backquoteRE = regexp.MustCompile("`([^`]+)`")
	// A backquoted Go reference: an optional * or &, dotted identifiers, and
	// an optional call with no nested parentheses.
	goRefRE = regexp.MustCompile(`^[*&]?([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(\([^()]*\))?$`)
	// A word that reads as a Go reference in plain text: a qualified name
	// (pkg.Name, Type.Method) or a camel-case lower-case name (errNotNew).
	plainRefRE = regexp.MustCompile(`\b([A-Za-z_]\w*\.[A-Z]\w*(?:\.[A-Z]\w*)?|[a-z]+[A-Z]\w*)\b`)
	// File names and hosts look like qualified identifiers; their last
	// element says which they are.
	fileSuffix = map[string]bool{
		"go": true, "mod": true, "sum": true, "work": true, "md": true, "txt": true, "sh": true,
		"yaml": true, "yml": true, "json": true, "proto": true, "toml": true, "sock": true,
		"io": true, "com": true, "org": true, "dev": true, "net": true, "log": true, "pid": true,
		"conf": true, "service": true, "tar": true, "gz": true, "tgz": true, "csv": true,
	}
)

// codeLines are the lines of a comment's code blocks, which hold Go code and
// shell commands rather than references.
func codeLines(text string) map[string]bool {
	var p comment.Parser
	d := p.Parse(text)
	lines := map[string]bool{}
	for _, b := range d.Content {
		if c, ok := b.(*comment.Code); ok {
			for _, l := range strings.Split(c.Text, "\n") {
				if l = strings.TrimSpace(l); l != "" {
					lines[l] = true
				}
			}
		}
	}
	return lines
}

// commentLines yields each line of a comment group with its position.
func commentLines(fset *token.FileSet, g *ast.CommentGroup, yield func(pos token.Position, line string)) {
	for _, c := range g.List {
		pos := fset.Position(c.Pos())
		text := c.Text
		if strings.HasPrefix(text, "//") {
			yield(pos, text[2:])
			continue
		}
		text = strings.TrimSuffix(strings.TrimPrefix(text, "/*"), "*/")
		for i, l := range strings.Split(text, "\n") {
			lp := pos
			lp.Line += i
			yield(lp, l)
		}
	}
}

func (p *docPackage) check(all map[string]*docPackage) []string {
	var problems []string
	for _, dc := range p.docComments() {
		code := codeLines(dc.group.Text())
		commentLines(p.fset, dc.group, func(pos token.Position, line string) {
			trimmed := strings.TrimSpace(line)
			if trimmed == "" || code[trimmed] || strings.HasPrefix(trimmed, "go:") || strings.HasPrefix(trimmed, "nolint") {
				return
			}
			where := fmt.Sprintf("%s:%d", pos.Filename, pos.Line)
			for _, m := range docLinkRE.FindAllStringSubmatchIndex(line, -1) {
				if !linkBoundary(line, m[0], m[1]) || quoted(line, m[0], m[1]) {
					continue
				}
				ref := line[m[2]:m[3]]
				if strings.HasPrefix(line[m[1]:], ":") && strings.TrimSpace(line[:m[0]]) == "" {
					continue // a link definition: [text]: URL
				}
				if msg := p.resolve(all, dc, ref, true); msg != "" {
					problems = append(problems, fmt.Sprintf("%s: [%s]: %s", where, ref, msg))
				}
			}
			for _, m := range backquoteRE.FindAllStringSubmatch(line, -1) {
				sub := goRefRE.FindStringSubmatch(m[1])
				if sub == nil {
					continue
				}
				if msg := p.resolve(all, dc, sub[1], false); msg != "" {
					problems = append(problems, fmt.Sprintf("%s: `%s`: %s", where, m[1], msg))
				}
			}
			plain := backquoteRE.ReplaceAllString(docLinkRE.ReplaceAllString(line, " "), " ")
			for _, m := range plainRefRE.FindAllStringSubmatchIndex(plain, -1) {
				if m[0] > 0 && strings.ContainsAny(plain[m[0]-1:m[0]], `./-_\"'`) {
					continue // part of a path, a literal or a longer name
				}
				if m[1] < len(plain) && strings.ContainsAny(plain[m[1]:m[1]+1], `/-_"'`) {
					continue
				}
				ref := plain[m[2]:m[3]]
				if msg := p.resolvePlain(all, dc, ref); msg != "" {
					problems = append(problems, fmt.Sprintf("%s: %s: %s", where, ref, msg))
				}
			}
		})
	}
	return problems
}

// quoted reports whether line[start:end] is a whole string literal ("[REDACTED]"):
// text, not a reference, even where go doc would try it as a link.
func quoted(line string, start, end int) bool {
	return start > 0 && end < len(line) && line[start-1] == '"' && line[end] == '"'
}

// linkBoundary applies go doc's rule: a doc link is preceded and followed by
// punctuation, a space or the line's end.
func linkBoundary(line string, start, end int) bool {
	ok := func(r rune) bool { return unicode.IsPunct(r) || unicode.IsSpace(r) }
	if start > 0 && !ok(rune(line[start-1])) {
		return false
	}
	if end < len(line) && !ok(rune(line[end])) {
		return false
	}
	return true
}

// resolve says what is wrong with ref as named in dc, or "" when it names a
// declared identifier (or cannot be checked here). link is true for a [doc
// link], whose single names go doc resolves only at the top level.
func (p *docPackage) resolve(all map[string]*docPackage, dc docComment, ref string, link bool) string {
	ref = strings.TrimPrefix(ref, "*")
	if strings.Contains(ref, "/") { // [import/path.Name]
		i := strings.LastIndex(ref, ".")
		j := strings.LastIndex(ref, "/")
		if i < j {
			return ""
		}
		// The path may also carry a type: path.Type.Method.
		path, rest := ref[:i], ref[i+1:]
		if k := strings.Index(ref[j:], "."); k >= 0 && j+k != i {
			path, rest = ref[:j+k], ref[j+k+1:]
		}
		target := all[path]
		if target == nil {
			return ""
		}
		return target.resolveIn(rest, true, link)
	}
	parts := strings.Split(ref, ".")
	if len(parts) > 1 && fileSuffix[parts[len(parts)-1]] {
		return ""
	}
	first := parts[0]
	if !ast.IsExported(first) {
		if target := p.qualifier(all, dc, first); target != nil {
			if len(parts) == 1 {
				return ""
			}
			return target.resolveIn(strings.Join(parts[1:], "."), target != p || dc.exported, link)
		}
		if _, foreign := dc.imports[first]; foreign {
			return "" // a package outside the repository
		}
		if len(parts) == 1 && p.decls[first] && dc.exported {
			return "is unexported, named from an exported declaration's doc"
		}
		if len(parts) > 1 && p.decls[first] && link {
			return p.resolveIn(ref, dc.exported, link)
		}
		if len(parts) > 1 && link {
			return fmt.Sprintf("qualifier %q is neither an imported package nor a package of the repository", first)
		}
		return "" // a parameter, a local variable, a keyword or a word
	}
	return p.resolveIn(ref, dc.exported, link)
}

// resolvePlain checks a reference found in plain text, where only what
// cannot be an English word is checked: a qualified name whose qualifier is a
// type of the package or a package of the repository, and an unexported
// camel-case name the package declares.
func (p *docPackage) resolvePlain(all map[string]*docPackage, dc docComment, ref string) string {
	parts := strings.Split(ref, ".")
	if len(parts) == 1 {
		if p.decls[ref] && dc.exported {
			return "is unexported, named from an exported declaration's doc"
		}
		return ""
	}
	if fileSuffix[strings.ToLower(parts[len(parts)-1])] {
		return ""
	}
	first := parts[0]
	if ast.IsExported(first) {
		if !p.isType(first) {
			return "" // a sentence's capitalised word, or a foreign type
		}
		return p.resolveIn(ref, dc.exported, true)
	}
	target := p.qualifier(all, dc, first)
	if target == nil {
		return ""
	}
	return target.resolveIn(strings.Join(parts[1:], "."), target != p || dc.exported, true)
}

// qualifier is the repository package a lowercase qualifier names: an import
// of the file, the package itself, or a package of the repository by its
// (unique) name.
func (p *docPackage) qualifier(all map[string]*docPackage, dc docComment, name string) *docPackage {
	if path, ok := dc.imports[name]; ok {
		return all[path]
	}
	if p.decls[name] {
		return nil // a local identifier shadows a package name
	}
	if name == p.name && name != "main" {
		return p
	}
	var found *docPackage
	for _, q := range all {
		if q.name == name && name != "main" {
			if found != nil {
				return nil
			}
			found = q
		}
	}
	return found
}

// resolveIn checks ref (Name, Name.Member) against p's declarations.
func (p *docPackage) resolveIn(ref string, exportedOnly, link bool) string {
	parts := strings.Split(ref, ".")
	name := parts[0]
	where := p.path
	if exportedOnly && !ast.IsExported(name) && (p.decls[name] || p.anyMember[name]) {
		return fmt.Sprintf("%s is unexported in %s, named from an exported declaration's doc", name, where)
	}
	if !p.decls[name] {
		if len(parts) == 1 && !link && (p.anyMember[name] || isAllCaps(name)) {
			return "" // `Close()`, `Reason`: a method or field; `CI`: an environment variable
		}
		if len(parts) == 1 && !ast.IsExported(name) {
			return ""
		}
		return fmt.Sprintf("%s is not declared in %s", name, where)
	}
	if len(parts) == 1 {
		return ""
	}
	member := parts[1]
	if !p.isType(name) {
		return "" // a var or func: its members are the type's, unseen here
	}
	has, unknown := p.hasMember(name, member, map[string]bool{})
	if !has && !unknown {
		return fmt.Sprintf("%s has no method or field %s in %s", name, member, where)
	}
	if has && exportedOnly && !ast.IsExported(member) {
		return fmt.Sprintf("%s.%s is unexported, named from an exported declaration's doc", name, member)
	}
	return ""
}

func (p *docPackage) isType(name string) bool { return p.types[name] }

func isAllCaps(s string) bool {
	letters := 0
	for _, r := range s {
		if unicode.IsLower(r) {
			return false
		}
		if unicode.IsLetter(r) {
			letters++
		}
	}
	return letters > 1
}
