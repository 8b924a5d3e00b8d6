package testkit

import (
	"bufio"
	"errors"
	"fmt"
	"iter"
	"os"
	"os/exec"
	"testing"
	"time"
)

// Process is a program a test started. Its exit is awaited in the
// background; a process still running when the test ends is killed, and
// waited for, at the test's cleanup.
type Process struct {
	cmd  *exec.Cmd
	out  *Buffer // its output, when the caller sent it nowhere else
	done chan struct{}
	err  error // Wait's result, set before done is closed
}

// StartProcess starts cmd, as the caller prepared it (arguments, directory,
// environment, where its output goes). A cmd whose Stdout and Stderr are
// both nil has them captured together, for [Process.Output]; a caller that
// reads the output as it comes (to spot a line) sets its own writers.
func StartProcess(t testing.TB, cmd *exec.Cmd) *Process {
	t.Helper()
	p := &Process{cmd: cmd, done: make(chan struct{})}
	if cmd.Stdout == nil && cmd.Stderr == nil {
		p.out = &Buffer{}
		cmd.Stdout, cmd.Stderr = p.out, p.out
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", cmd.Path, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		if err := p.Kill(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// StartLines is [StartProcess] for a caller that reads the process's
// standard output as it comes: it also returns the output's lines, which
// end when the process has exited (a killed process's last lines are still
// read). cmd.Stdout must be nil; the lines need not be read to the end.
func StartLines(t testing.TB, cmd *exec.Cmd) (*Process, iter.Seq[string]) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	cmd.Stdout = w
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	p := StartProcess(t, cmd)
	w.Close() // the child holds its own copy
	return p, func(yield func(string) bool) {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if !yield(sc.Text()) {
				return
			}
		}
	}
}

// TestBinary returns a command that runs this test binary again, running
// no test, with env (NAME=value entries) added to the test's environment:
// a TestMain that sees one of them plays a child process instead.
func TestBinary(env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

// Pid is the process's ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the process has exited and its output is written.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err waits for the process to exit and returns what [exec.Cmd.Wait]
// returned: nil for a clean exit.
func (p *Process) Err() error {
	<-p.done
	return p.err
}

// ExitCode waits for the process to exit and returns its exit code (-1 when
// a signal ended it).
func (p *Process) ExitCode() int {
	<-p.done
	return p.cmd.ProcessState.ExitCode()
}

// Output returns what the process wrote so far, when [StartProcess]
// captured it, and "" otherwise.
func (p *Process) Output() string {
	if p.out == nil {
		return ""
	}
	return p.out.String()
}

// Stop sends sig and waits up to limit for the process to exit; it returns
// how long that took, and an error if the signal could not be sent to the
// running process or it is still running after limit (it is left running).
func (p *Process) Stop(sig os.Signal, limit time.Duration) (time.Duration, error) {
	began := time.Now()
	if err := p.cmd.Process.Signal(sig); err != nil && !p.Exited() {
		return 0, fmt.Errorf("sending %v: %w", sig, err)
	}
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-p.done:
		return time.Since(began), nil
	case <-timer.C:
		return time.Since(began), fmt.Errorf("still running %s after %v", limit, sig)
	}
}

// Kill kills the process, if it is still running, and waits until it is
// gone (and the files it held with it); it returns an error, without
// waiting, if the running process could not be killed. It is safe to call
// more than once.
func (p *Process) Kill() error {
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) && !p.Exited() {
		return fmt.Errorf("killing %s: %w", p.cmd.Path, err)
	}
	<-p.done
	return nil
}
