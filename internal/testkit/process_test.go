package testkit

import (
	"fmt"
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
	if os.Getenv(childEnv) == "lines" {
		fmt.Println("one")
		fmt.Println("two")
	}
	time.Sleep(time.Hour) // killed by the parent long before
}

// StartLines hands over the output line by line as it comes, and the lines
// written before a kill are still read after it.
func TestStartLines(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestChild$")
	cmd.Env = append(os.Environ(), childEnv+"=lines")
	p, lines := StartLines(t, cmd)
	var got []string
	for line := range lines {
		got = append(got, line)
		if line == "two" {
			if err := p.Kill(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(got) < 2 || got[0] != "one" || got[1] != "two" {
		t.Fatalf("lines %q, want one, two", got)
	}
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

// TestBinary runs this binary again, running no test, with the extra
// environment.
func TestTestBinary(t *testing.T) {
	cmd := TestBinary("TESTKIT_X=1")
	if len(cmd.Args) != 2 || cmd.Args[0] != os.Args[0] || cmd.Args[1] != "-test.run=^$" {
		t.Errorf("args %q", cmd.Args)
	}
	if len(cmd.Env) == 0 || cmd.Env[len(cmd.Env)-1] != "TESTKIT_X=1" {
		t.Errorf("the extra environment is missing: %q", cmd.Env)
	}
}
