package testkit

import (
	"bytes"
	"sync"
)

// Buffer is an [io.Writer] that goroutines (a logger, a child process's
// output) write while the test reads what it holds. Its zero value is an
// empty buffer ready to use; it must not be copied after first use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p to the buffer; it never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
