package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sync"
	"testing"
)

// binaries are the programs built by this test process, one per package,
// in one temporary directory.
var binaries struct {
	mu    sync.Mutex
	dir   string
	built map[string]*builtBinary
}

type builtBinary struct {
	once sync.Once
	path string
	err  error
}

// Build builds the main package pkg (an import path, or a directory such as
// "." for the package under test) the first time it is asked for, under
// -race when the test runs under -race, and returns the path of the binary.
// Later calls for the same pkg return the same binary, or the same error.
// [RemoveBinaries] removes what it built. It is for TestMain, which has no
// testing.TB; tests call [BuildBinary].
func Build(pkg string) (string, error) {
	binaries.mu.Lock()
	if binaries.built == nil {
		binaries.built = map[string]*builtBinary{}
	}
	b := binaries.built[pkg]
	if b == nil {
		b = &builtBinary{}
		binaries.built[pkg] = b
	}
	binaries.mu.Unlock()
	b.once.Do(func() { b.path, b.err = build(pkg) })
	return b.path, b.err
}

func build(pkg string) (string, error) {
	name := path.Base(pkg)
	if pkg == "." {
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		name = filepath.Base(wd)
	}
	binaries.mu.Lock()
	if binaries.dir == "" {
		dir, err := os.MkdirTemp("", "testkit-bin-")
		if err != nil {
			binaries.mu.Unlock()
			return "", err
		}
		binaries.dir = dir
	}
	dir := binaries.dir
	binaries.mu.Unlock()
	bin, err := os.MkdirTemp(dir, name+"-")
	if err != nil {
		return "", err
	}
	bin = filepath.Join(bin, name)
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, pkg)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	return bin, nil
}

// BuildBinary is [Build] for a test: a failed build stops it (and every
// other test that asks for the same package).
func BuildBinary(t testing.TB, pkg string) string {
	t.Helper()
	bin, err := Build(pkg)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// RemoveBinaries removes every binary [Build] made. Call it once all the
// tests are done, from TestMain (goleak.Cleanup fits).
func RemoveBinaries() {
	binaries.mu.Lock()
	defer binaries.mu.Unlock()
	if binaries.dir != "" {
		os.RemoveAll(binaries.dir)
		binaries.dir, binaries.built = "", nil
	}
}
