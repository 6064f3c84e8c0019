// Command api lists the exported API of numapool's library packages, one
// identifier per line, and checks it against the committed files in api/.
//
//	go run ./scripts/api          # check: fail if the code differs from api/*.txt
//	go run ./scripts/api -write   # rewrite api/*.txt from the code
//
// Listed: functions, types, methods of exported types, constants and
// variables, each with its declaration, so that a changed signature shows
// too. Not listed: struct fields and interface methods (part of their
// type), and methods that implement the standard library's interfaces
// (Error, Unwrap, Format, String, GoString, MarshalJSON, ...), which a
// type has for fmt, errors and encoding rather than for its callers.
//
// Every change to the API is then deliberate: it changes a file in api/,
// which review sees, and the count at the head of each file.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/build"
	"go/doc"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// packages are the library packages and the most identifiers each may
// export (0: no limit). pool's limit is its v1 surface, one form per
// capability, with room for one or two more names: a capability added
// since (CPU kinds: WithCPUKind and Worker.Kind; the latency histograms:
// Histogram; following the machine: WithMachineWatch; work that blocks:
// Worker.Block, WithSpares, WithStuckWarning and WithBlockWatch;
// resizing: Resize, Size, WithMaxWorkers and WorkerStats.Retired) raises
// it by what it needs, in the change that adds it, so that a second form
// of an old capability shows as a failure here.
var packages = []struct {
	dir string
	max int
}{
	{"pool", 90},
	{"topology", 0},
	{"pin", 0},
	{"queue", 0},
	{"steal", 0},
}

// standard are method names that implement standard interfaces.
var standard = map[string]bool{
	"Error": true, "Unwrap": true, "Format": true, "String": true, "GoString": true,
	"MarshalJSON": true, "UnmarshalJSON": true, "MarshalText": true, "UnmarshalText": true,
	"Is": true, "As": true,
}

func main() {
	write := flag.Bool("write", false, "rewrite api/*.txt from the code")
	root := flag.String("root", ".", "the module's root")
	flag.Parse()
	failed := false
	for _, pkg := range packages {
		lines, err := list(filepath.Join(*root, pkg.dir))
		if err != nil {
			fmt.Fprintln(os.Stderr, "api:", err)
			os.Exit(2)
		}
		if pkg.max > 0 && len(lines) > pkg.max {
			fmt.Fprintf(os.Stderr, "api: package %s exports %d identifiers, more than its limit of %d\n", pkg.dir, len(lines), pkg.max)
			failed = true
		}
		text := render(pkg.dir, lines)
		file := filepath.Join(*root, "api", pkg.dir+".txt")
		if *write {
			if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
				fmt.Fprintln(os.Stderr, "api:", err)
				os.Exit(2)
			}
			continue
		}
		old, err := os.ReadFile(file)
		if err != nil {
			fmt.Fprintf(os.Stderr, "api: %v (go run ./scripts/api -write makes it)\n", err)
			failed = true
			continue
		}
		if d := diff(string(old), text); d != "" {
			fmt.Fprintf(os.Stderr, "api: package %s differs from %s (- the file, + the code); if the change is meant, run go run ./scripts/api -write and commit the file:\n%s", pkg.dir, file, d)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

// render is a package's API file: a count, then the sorted lines.
func render(pkg string, lines []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# package %s: %d exported identifiers (go run ./scripts/api -write)\n", pkg, len(lines))
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

// list returns the exported identifiers of the package in dir, one line
// each, sorted, from the files that build on linux/amd64 without the
// package's tests.
func list(dir string) ([]string, error) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	names := map[string]bool{}
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		if ok, err := linux.MatchFile(dir, n); err != nil || !ok {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
		names[f.Name.Name] = true
	}
	if len(names) != 1 {
		return nil, fmt.Errorf("%s: want one package, found %d", dir, len(names))
	}
	name := files[0].Name.Name
	dp, err := doc.NewFromFiles(fset, files, "github.com/numapool/numapool/"+name)
	if err != nil {
		return nil, err
	}
	var lines []string
	add := func(kind, decl string) { lines = append(lines, kind+" "+decl) }
	values := func(vs []*doc.Value, kind string) {
		for _, v := range vs {
			for _, spec := range v.Decl.Specs {
				for _, id := range spec.(*ast.ValueSpec).Names {
					if id.IsExported() {
						add(kind, id.Name)
					}
				}
			}
		}
	}
	funcs := func(fs []*doc.Func) {
		for _, f := range fs {
			if f.Recv != "" && standard[f.Name] {
				continue
			}
			add("func", signature(fset, f.Decl))
		}
	}
	values(dp.Consts, "const")
	values(dp.Vars, "var")
	funcs(dp.Funcs)
	for _, t := range dp.Types {
		add("type", typeDecl(fset, t))
		values(t.Consts, "const")
		values(t.Vars, "var")
		funcs(t.Funcs)
		funcs(t.Methods)
	}
	sort.Strings(lines)
	return lines, nil
}

// linux is the build context the API is read in: linux/amd64 without
// cgo. The library has the same API on every platform (the fallback files
// only implement it), and the build tags pick one file of each pair.
var linux = func() build.Context {
	c := build.Default
	c.GOOS, c.GOARCH, c.CgoEnabled = "linux", "amd64", false
	return c
}()

// signature prints a function's declaration without its body or doc,
// with the receiver's type only.
func signature(fset *token.FileSet, d *ast.FuncDecl) string {
	fd := *d
	fd.Body, fd.Doc = nil, nil
	if fd.Recv != nil && len(fd.Recv.List) > 0 {
		recv := *fd.Recv.List[0]
		recv.Names = nil
		fd.Recv = &ast.FieldList{List: []*ast.Field{&recv}}
	}
	return strings.TrimPrefix(node(fset, &fd), "func ")
}

// typeDecl is "Name" with its type parameters and its kind: struct and
// interface types are shown without their members.
func typeDecl(fset *token.FileSet, t *doc.Type) string {
	for _, spec := range t.Decl.Specs {
		ts := spec.(*ast.TypeSpec)
		if ts.Name.Name != t.Name {
			continue
		}
		s := ts.Name.Name
		if ts.TypeParams != nil {
			s += typeParams(fset, ts.TypeParams)
		}
		if ts.Assign.IsValid() {
			s += " ="
		}
		switch ts.Type.(type) {
		case *ast.StructType:
			return s + " struct"
		case *ast.InterfaceType:
			return s + " interface"
		default:
			return s + " " + node(fset, ts.Type)
		}
	}
	return t.Name
}

func typeParams(fset *token.FileSet, fl *ast.FieldList) string {
	var parts []string
	for _, f := range fl.List {
		var names []string
		for _, n := range f.Names {
			names = append(names, n.Name)
		}
		parts = append(parts, strings.Join(names, ", ")+" "+node(fset, f.Type))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func node(fset *token.FileSet, n any) string {
	var b bytes.Buffer
	if err := (&printer.Config{Mode: printer.RawFormat}).Fprint(&b, fset, n); err != nil {
		panic(err)
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// diff lists the lines only in a (-) and only in b (+).
func diff(a, b string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	ma, mb := in(a), in(b)
	var out strings.Builder
	for _, l := range strings.Split(a, "\n") {
		if !mb[l] {
			fmt.Fprintf(&out, "- %s\n", l)
		}
	}
	for _, l := range strings.Split(b, "\n") {
		if !ma[l] {
			fmt.Fprintf(&out, "+ %s\n", l)
		}
	}
	return out.String()
}
