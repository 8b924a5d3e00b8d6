package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// firstChunk is the buffer a request body is read into first (or its
// Content-Length when smaller); it doubles as bytes arrive, so what a body
// holds in memory is at most this or twice what was received, never what
// its Content-Length announces.
const firstChunk = 4 << 10

// busyRetryAfter is the Retry-After, in seconds, of a 503 answered because
// the request bodies in memory reached Config.MaxBodyMemory.
const busyRetryAfter = 1

// bodyBudget bounds the bytes of request bodies held in memory at once by
// all requests of one handler.
type bodyBudget struct {
	max   int64
	inUse atomic.Int64
}

// take reserves n bytes, or reports false (reserving nothing) when that
// would go over the budget.
func (b *bodyBudget) take(n int64) bool {
	for {
		cur := b.inUse.Load()
		if cur+n > b.max {
			return false
		}
		if b.inUse.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

func (b *bodyBudget) give(n int64) {
	if n > 0 {
		b.inUse.Add(-n)
	}
}

// body is a request body read into memory, with the budget it holds until
// release.
type body struct {
	b      []byte
	held   int64
	budget *bodyBudget
}

// release gives the body's bytes back to the budget; the body must not be
// used after it.
func (b *body) release() {
	if b != nil && b.budget != nil {
		b.budget.give(b.held)
		b.held = 0
	}
}

// errBusy is answered when the bodies in memory reached the budget.
func (h *handler) errBusy() error {
	return &apiError{status: http.StatusServiceUnavailable, retryAfter: busyRetryAfter,
		msg: fmt.Sprintf("the server holds as many request bodies as it may (%d bytes in memory); nothing was stored, retry later",
			h.budget.max)}
}

// readBody checks the Content-Type and Content-Encoding and reads the body
// within the size limit, the memory budget and the read deadline. An empty
// body is allowed only when allowEmpty. The caller releases the result.
func (h *handler) readBody(w http.ResponseWriter, r *http.Request, allowEmpty bool) (*body, error) {
	if ce := r.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(strings.TrimSpace(ce), "identity") {
		w.Header().Set("Accept-Encoding", "identity")
		return nil, errorf(http.StatusUnsupportedMediaType,
			"Content-Encoding "+ce+" is not supported; send the body uncompressed")
	}
	if r.ContentLength > h.cfg.MaxBodyBytes {
		return nil, errorf(http.StatusRequestEntityTooLarge,
			fmt.Sprintf("request body of %d bytes is over the limit of %d bytes", r.ContentLength, h.cfg.MaxBodyBytes))
	}
	if r.ContentLength == 0 && allowEmpty {
		return &body{}, nil
	}
	if ct := r.Header.Get("Content-Type"); !isJSON(ct) {
		if ct == "" {
			ct = "none"
		}
		return nil, errorf(http.StatusUnsupportedMediaType, "Content-Type must be application/json, got "+ct)
	}
	// The deadline is fixed now: a client sending a byte at a time cannot
	// move it. A ResponseWriter without deadlines (some wrappers) keeps
	// whatever its server sets.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(h.cfg.ReadBodyTimeout))
	b := &body{budget: &h.budget}
	err := b.readFrom(r.Body, h.cfg.MaxBodyBytes, r.ContentLength)
	if err == nil {
		// The body is in: no deadline while the request is handled (the
		// server watches the connection to cancel the request when the
		// client goes, and would take a deadline for that).
		_ = rc.SetReadDeadline(time.Time{})
		return b, nil
	}
	b.release()
	switch {
	case errors.Is(err, errOverBudget):
		return nil, h.errBusy()
	case errors.Is(err, errTooLarge):
		return nil, errorf(http.StatusRequestEntityTooLarge,
			fmt.Sprintf("request body is over the limit of %d bytes", h.cfg.MaxBodyBytes))
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, errorf(http.StatusRequestTimeout,
			fmt.Sprintf("the request body did not arrive within %s", h.cfg.ReadBodyTimeout))
	}
	return nil, errorf(http.StatusBadRequest, "reading the request body: "+err.Error())
}

var (
	errOverBudget = errors.New("request bodies in memory are at the budget")
	errTooLarge   = errors.New("request body over the limit")
)

// readFrom reads r to its end into b.b, growing the buffer only as bytes
// arrive and taking every growth from the budget first. It reads at most
// limit bytes (errTooLarge beyond). declared is the Content-Length (-1 when
// unknown); it only lets a small body get a buffer of its exact size.
func (b *body) readFrom(r io.Reader, limit, declared int64) error {
	for {
		if len(b.b) == cap(b.b) {
			full := int64(len(b.b))
			if full >= limit || full == declared {
				// The body should end here: look for its end without
				// growing the buffer.
				var one [1]byte
				n, err := readSome(r, one[:])
				if n == 0 {
					if err == io.EOF {
						return nil
					}
					return err
				}
				if full >= limit {
					return errTooLarge
				}
				if err := b.grow(limit, -1); err != nil {
					return err
				}
				b.b = append(b.b, one[0])
				if err == io.EOF {
					return nil
				}
				if err != nil {
					return err
				}
				continue
			}
			if err := b.grow(limit, declared); err != nil {
				return err
			}
		}
		n, err := r.Read(b.b[len(b.b):cap(b.b)])
		b.b = b.b[:len(b.b)+n]
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// grow doubles the buffer (at least firstChunk, or exactly a declared
// length below that; at most limit), taking the growth from the budget.
func (b *body) grow(limit, declared int64) error {
	n := max(2*int64(cap(b.b)), firstChunk)
	if cap(b.b) == 0 && declared > 0 && declared < firstChunk {
		n = declared
	}
	n = min(n, limit)
	more := n - int64(cap(b.b))
	if !b.budget.take(more) {
		return errOverBudget
	}
	b.held += more
	nb := make([]byte, len(b.b), n)
	copy(nb, b.b)
	b.b = nb
	return nil
}

// readSome reads into p until it gets a byte or an error.
func readSome(r io.Reader, p []byte) (int, error) {
	for {
		n, err := r.Read(p)
		if n > 0 || err != nil {
			return n, err
		}
	}
}
