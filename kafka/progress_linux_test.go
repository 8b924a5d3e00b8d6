//go:build linux

package kafka

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY returns both ends of a new pseudo-terminal.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		_ = m.Close()
		t.Skipf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		_ = m.Close()
		t.Skipf("pty number: %v", err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		_ = m.Close()
		t.Skipf("open pty: %v", err)
	}
	return m, s
}

// On a terminal the restore shows a progress bar with the records/s and the
// lag; elsewhere plain lines.
func TestRestoreProgressBarOnTerminal(t *testing.T) {
	master, slave := openPTY(t)
	var out bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(&out, master) // ends when the slave side is closed
	}()
	if !isTerminal(slave) {
		t.Fatal("the pty is not seen as a terminal")
	}
	p := newRestoreProgress(slave, "cl", 300)
	p.add(100)
	p.add(200)
	p.finish(true)
	p.printf("restore: done\n")
	_ = slave.Close()
	wg.Wait()
	_ = master.Close()
	s := out.String()
	if !strings.Contains(s, "restoring cl") || !strings.Contains(s, "records/s") || !strings.Contains(s, "300/300") {
		t.Errorf("terminal output lacks the bar: %q", s)
	}

	var plain bytes.Buffer
	p = newRestoreProgress(&plain, "cl", 300)
	p.add(300)
	p.finish(true)
	if got := plain.String(); !strings.Contains(got, "restore: 300/300 offsets (100.0%)") || strings.Contains(got, "\r") {
		t.Errorf("plain output %q", got)
	}
}
