//go:build linux

package cli

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/outboxd/outbox/kafka"
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
	v := newRestoreView(slave)
	v.report(kafka.RestoreProgress{Topic: "cl", Done: 100, Total: 300, Elapsed: time.Second})
	v.report(kafka.RestoreProgress{Topic: "cl", Done: 300, Total: 300, Elapsed: 2 * time.Second})
	v.finish(true)
	_, _ = io.WriteString(slave, "restore: done\n")
	_ = slave.Close()
	wg.Wait()
	_ = master.Close()
	s := out.String()
	if !strings.Contains(s, "restoring cl") || !strings.Contains(s, "records/s") || !strings.Contains(s, "300/300") {
		t.Errorf("terminal output lacks the bar: %q", s)
	}

	var plain bytes.Buffer
	v = newRestoreView(&plain)
	v.report(kafka.RestoreProgress{Topic: "cl", Done: 300, Total: 300, Elapsed: time.Second})
	v.finish(true)
	if got := plain.String(); !strings.Contains(got, "restore: 300/300 offsets (100.0%)") || strings.Contains(got, "\r") {
		t.Errorf("plain output %q", got)
	}
}

// Off a terminal a plain line is written every two seconds of the restore,
// not at every report.
func TestRestoreProgressPlainLinesEveryTwoSeconds(t *testing.T) {
	var plain bytes.Buffer
	v := newRestoreView(&plain)
	for i := int64(1); i <= 50; i++ { // 100ms apart, as kafka.Restore reports
		v.report(kafka.RestoreProgress{Topic: "cl", Done: i * 10, Total: 500, Elapsed: time.Duration(i) * 100 * time.Millisecond})
	}
	v.finish(true)
	lines := strings.Split(strings.TrimSpace(plain.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "restore: 200/500 offsets (40.0%), 100 records/s, lag 300") ||
		!strings.HasPrefix(lines[2], "restore: 500/500 offsets (100.0%)") {
		t.Errorf("plain output %q", plain.String())
	}
}
