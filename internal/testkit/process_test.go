package testkit

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// childEnv makes this test binary, started by a test of this file, wait
// until it is killed.
const childEnv = "TESTKIT_CHILD"

// TestChild is the child process: it does nothing unless started by the
// tests below.
func TestChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("run as a child process only")
	}
	time.Sleep(time.Hour) // killed by the parent long before
}

// A process's output is captured, and its exit seen.
func TestProcessOutput(t *testing.T) {
	p := StartProcess(t, exec.Command("go", "version"))
	if err := p.Err(); err != nil || p.ExitCode() != 0 {
		t.Fatalf("go version: %v, exit code %d", err, p.ExitCode())
	}
	if !p.Exited() || !strings.Contains(p.Output(), "go version") {
		t.Fatalf("exited %v, output %q", p.Exited(), p.Output())
	}
}

// Stop gives up after its limit and leaves the process running; Kill ends
// it and can be called again.
func TestProcessStopAndKill(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestChild$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	p := StartProcess(t, cmd)
	if _, err := p.Stop(os.Signal(nil), 0); err == nil {
		t.Fatal("Stop with no signal: no error")
	}
	if p.Exited() {
		t.Fatal("the child exited before it was killed")
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := p.Kill(); err != nil || !p.Exited() || p.ExitCode() != -1 {
		t.Fatalf("second Kill: %v, exited %v, exit code %d", err, p.Exited(), p.ExitCode())
	}
}

// A package is built once per test process.
func TestBuildOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	t.Cleanup(RemoveBinaries)
	a := BuildBinary(t, "github.com/outboxd/outbox/examples/embedded")
	b := BuildBinary(t, "github.com/outboxd/outbox/examples/embedded")
	if a != b || !strings.HasSuffix(a, "embedded") {
		t.Fatalf("built %s then %s, want one binary named embedded", a, b)
	}
	if _, err := os.Stat(a); err != nil {
		t.Fatal(err)
	}
}
