package runexample

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// built is the example's binary, built once for all the tests of the
// package (under -race when the tests are).
var built struct {
	once      sync.Once
	dir, path string
	out       []byte
	err       error
}

// Binary builds the example in the current directory (the package under
// test) the first time it is called, under -race when the test is, and
// returns the path of the binary. Later calls return the same binary; a
// failed build fails every test that asks for it. Cleanup removes it.
func Binary(t testing.TB) string {
	t.Helper()
	built.once.Do(func() {
		wd, err := os.Getwd()
		if err != nil {
			built.err = err
			return
		}
		name := filepath.Base(wd)
		if built.dir, built.err = os.MkdirTemp("", name+"-test-"); built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, name)
		args := []string{"build", "-o", built.path}
		if raceEnabled {
			args = append(args, "-race")
		}
		built.out, built.err = exec.Command("go", append(args, ".")...).CombinedOutput()
	})
	if built.err != nil {
		t.Fatalf("go build: %v\n%s", built.err, built.out)
	}
	return built.path
}

// Cleanup removes the binary Binary built, if any. Call it once all the
// tests are done, from TestMain (goleak.Cleanup fits).
func Cleanup() {
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
}

// Proc is the example binary running.
type Proc struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string
	done  chan struct{}
}

// Start runs bin with args, its environment being the test's plus env
// (NAME=value entries). Its standard error goes to the test's; its standard
// output is collected line by line for Output. A process still running when
// the test ends is killed.
func Start(t testing.TB, bin string, env []string, args ...string) *Proc {
	t.Helper()
	p := &Proc{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stderr = os.Stderr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			<-p.done
			_ = p.cmd.Wait()
		}
	})
	return p
}

// Output returns the lines the process printed so far, joined by newlines.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// Done is closed once the process has closed its standard output, which it
// does when it exits.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Wait waits for the process to exit and returns its exit error, as
// exec.Cmd.Wait does. Call it after Done is closed.
func (p *Proc) Wait() error { return p.cmd.Wait() }

// Interrupt sends SIGINT and waits for a clean exit, failing the test if the
// process takes more than 30s or exits with an error.
func (p *Proc) Interrupt(t testing.TB) {
	t.Helper()
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("no exit within 30s of SIGINT")
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGINT: %v\n%s", err, p.Output())
	}
}
