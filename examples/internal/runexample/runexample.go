package runexample

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
)

// Proc is the example binary running.
type Proc struct {
	*testkit.Process
	out *testkit.Buffer
}

// Start runs bin (built with testkit.BuildBinary) with args, its
// environment being the test's plus env (NAME=value entries). Its standard
// error goes to the test's; its standard output is collected for Output. A
// process still running when the test ends is killed.
func Start(t testing.TB, bin string, env []string, args ...string) *Proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	p := &Proc{out: &testkit.Buffer{}}
	cmd.Stdout, cmd.Stderr = p.out, os.Stderr
	p.Process = testkit.StartProcess(t, cmd)
	return p
}

// Output returns the lines the process printed so far, joined by newlines.
func (p *Proc) Output() string { return strings.TrimSuffix(p.out.String(), "\n") }

// Wait waits for the process to exit and returns its exit error, as
// exec.Cmd.Wait does.
func (p *Proc) Wait() error { return p.Err() }

// Interrupt sends SIGINT and waits for a clean exit, failing the test if the
// process takes more than 30s or exits with an error.
func (p *Proc) Interrupt(t testing.TB) {
	t.Helper()
	if _, err := p.Stop(os.Interrupt, 30*time.Second); err != nil {
		t.Fatalf("no exit within 30s of SIGINT: %v", err)
	}
	if err := p.Err(); err != nil {
		t.Fatalf("exit after SIGINT: %v\n%s", err, p.Output())
	}
}

// Demo builds the example in the current directory and runs it with args
// (its demo flags) to the end, failing the test if it takes more than 60s
// or exits with an error. Each want is a piece of text its output must
// hold; a missing one fails the test (after the others are checked).
func Demo(t testing.TB, args []string, want ...string) {
	t.Helper()
	p := Start(t, testkit.BuildBinary(t, "."), nil, args...)
	select {
	case <-p.Done():
	case <-time.After(60 * time.Second):
		t.Fatal("the demo did not finish within 60s")
	}
	if err := p.Wait(); err != nil {
		t.Fatalf("demo: %v\n%s", err, p.Output())
	}
	out := p.Output()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("demo output lacks %q:\n%s", w, out)
		}
	}
}
