package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// outboxd is built on the library's public face, as any user's program
// would be: its code (tests aside, which may build fixture files with the
// store) imports the facade, its metrics and HTTP API packages, httpsink
// and kafka, and never the store or the scheduler under them.
func TestOutboxdImportsTheFacadeOnly(t *testing.T) {
	const module = "github.com/outboxd/outbox/"
	allowed := []string{"outbox", "outbox/", "httpsink", "kafka", "kafka/", "cmd/outboxd/"}
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		files++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			rest, ours := strings.CutPrefix(p, module)
			if !ours {
				continue
			}
			ok := false
			for _, a := range allowed {
				if rest == a || (strings.HasSuffix(a, "/") && strings.HasPrefix(rest, a)) {
					ok = true
				}
			}
			if !ok {
				t.Errorf("%s imports %s; outboxd uses the outbox facade, httpsink and kafka only", path, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 10 {
		t.Fatalf("read %d source files; the walk missed outboxd's code", files)
	}
}
