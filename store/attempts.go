package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The attempt log: one value per delivery attempt of an event, in the
// attempts bucket under
//
//	len(ID) (2 bytes) ‖ ID ‖ seq (8 bytes)
//
// so that one event's attempts are one run of keys in attempt order, found
// with one seek, and no ID is a prefix of another's run. seq counts the
// event's attempts from 1 and never restarts while the event is known (a
// replayed event continues it). The value is a frame of kind 'A' (see
// codec.go): the ID and seq again, then the attempt's fields.
//
// An event keeps at most AttemptsPerEvent attempts: writing one more deletes
// the oldest in the same transaction. Its attempts go when its tombstone is
// trimmed; a dead letter keeps them. They are local history: the changelog
// does not carry them, so Restore brings none back.

// AttemptsPerEvent is the most attempts the log keeps of one event: an event
// retried (or parked) for days keeps its latest ones.
const AttemptsPerEvent = 100

// Bounds of an attempt's texts, checked by Apply (ErrInvalid).
const (
	// MaxAttemptBody is the largest response excerpt an attempt may hold.
	MaxAttemptBody = 64 << 10
	// MaxAttemptText bounds an attempt's error, action and each header.
	MaxAttemptText = 4 << 10
	// MaxAttemptHeaders is the most response headers an attempt may hold.
	MaxAttemptHeaders = 32
)

const kindAttempt byte = 'A'

var (
	bucketAttempts = []byte("attempts")
	// metaAttempts marks a file whose attempts bucket the store created: a
	// file from before the attempt log may hold an application bucket of
	// that name, which the store must not take for its own.
	metaAttempts = []byte("attempt_log")
)

// Attempt is one delivery attempt of an event, as the attempt log keeps it.
type Attempt struct {
	// Seq numbers the event's attempts in the log from 1, in order. The
	// store sets it; what a caller puts there is ignored.
	Seq uint64
	// Delivery is the event's delivery number of the attempt (its
	// Deliveries count after it, parks included), as the sink saw it.
	Delivery int
	// StartedAt is when the attempt began; Duration how long it took.
	StartedAt time.Time
	Duration  time.Duration
	// Action is the outcome's name ("success", "retry", "park", ...).
	Action string
	// Status is the HTTP status, 0 when no response was received.
	Status int
	// Error is the transport or protocol error, "" when there was none.
	Error string
	// Headers are the response headers kept (a safe set chosen by the
	// caller). Encoded sorted by name; an empty map decodes as nil.
	Headers map[string]string
	// Body is the start of the response body; an empty one decodes as nil.
	Body []byte
}

// attemptPrefix is the prefix of every attempt key of id.
func attemptPrefix(id string) []byte {
	p := make([]byte, 2, 2+len(id)+8)
	binary.BigEndian.PutUint16(p, uint16(len(id)))
	return append(p, id...)
}

// attemptKey is the key of id's attempt seq.
func attemptKey(id string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(attemptPrefix(id), seq)
}

// validateAttempt checks the bounds of an attempt to be written.
func validateAttempt(a *Attempt) error {
	switch {
	case len(a.Body) > MaxAttemptBody:
		return fmt.Errorf("%w: attempt body of %d bytes (max %d)", ErrInvalid, len(a.Body), MaxAttemptBody)
	case len(a.Error) > MaxAttemptText || len(a.Action) > MaxAttemptText:
		return fmt.Errorf("%w: attempt error or action over %d bytes", ErrInvalid, MaxAttemptText)
	case len(a.Headers) > MaxAttemptHeaders:
		return fmt.Errorf("%w: %d attempt headers (max %d)", ErrInvalid, len(a.Headers), MaxAttemptHeaders)
	}
	for k, v := range a.Headers {
		if len(k)+len(v) > MaxAttemptText {
			return fmt.Errorf("%w: attempt header %q over %d bytes", ErrInvalid, k, MaxAttemptText)
		}
	}
	return nil
}

// encodeAttempt returns the frame of id's attempt a (with a.Seq).
func encodeAttempt(id string, a *Attempt) []byte {
	return appendAttempt(make([]byte, 0, attemptSizeHint(id, a)), id, a)
}

// attemptSizeHint is an upper bound of the size of the frame of id's
// attempt a.
func attemptSizeHint(id string, a *Attempt) int {
	n := frameMin + 1 + 8*binary.MaxVarintLen64 + 1 + len(id) + len(a.Action) + len(a.Error) + len(a.Body)
	for k, v := range a.Headers {
		n += 2*binary.MaxVarintLen64 + len(k) + len(v)
	}
	return n
}

// appendAttempt appends the frame of id's attempt a to dst.
func appendAttempt(dst []byte, id string, a *Attempt) []byte {
	start := len(dst)
	e := &encoder{b: append(dst, kindAttempt, codecVersion, 0, 0, 0, 0)}
	e.str(id)
	e.uvarint(a.Seq)
	e.varint(int64(a.Delivery))
	e.time(a.StartedAt)
	e.varint(int64(a.Duration))
	e.str(a.Action)
	e.varint(int64(a.Status))
	e.str(a.Error)
	e.headers(a.Headers)
	e.bytes(a.Body)
	return e.finishAt(start)
}

// DecodeAttempt decodes an attempt log value: the event's ID and the
// attempt. It returns an error matching ErrCorrupt for anything that is not
// an intact attempt frame, and ErrSchemaTooNew for one of a newer codec.
func DecodeAttempt(b []byte) (id string, a *Attempt, err error) {
	body, err := unframe(b, kindAttempt)
	if err != nil {
		return "", nil, err
	}
	d := decoder{b: body}
	id = d.str()
	a = &Attempt{}
	a.Seq = d.uvarint()
	a.Delivery = d.int()
	a.StartedAt = d.time()
	a.Duration = time.Duration(d.varint())
	a.Action = d.str()
	a.Status = d.int()
	a.Error = d.str()
	a.Headers = d.headers()
	a.Body = d.bytes()
	if d.err == nil {
		switch {
		case id == "" || len(id) > MaxIDLen:
			d.fail("attempt ID")
		case a.Seq == 0:
			d.fail("attempt sequence")
		}
	}
	if d.err != nil {
		return "", nil, d.err
	}
	return id, a, nil
}

// decodeAttemptAt decodes the attempt stored under key k and checks that it
// is the attempt of that key.
func decodeAttemptAt(k, v []byte) (*Attempt, error) {
	id, a, err := DecodeAttempt(v)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(k, attemptKey(id, a.Seq)) {
		return nil, fmt.Errorf("%w: attempt key %x holds attempt %d of %q", ErrCorrupt, k, a.Seq, id)
	}
	return a, nil
}

// ensureAttempts creates the attempts bucket of a file that predates the
// attempt log, and refuses a file whose bucket of that name is not the
// store's. It runs once at Open, before the committer starts.
func (s *Store) ensureAttempts() error {
	var mine bool
	err := s.view(func(tx *bolt.Tx) error {
		b, meta := tx.Bucket(bucketAttempts), tx.Bucket(bucketMeta)
		switch {
		case b != nil && meta.Get(metaAttempts) == nil:
			return fmt.Errorf("%w: the file holds an application bucket %q, where this version keeps its attempt log: move it to another name first", ErrNotDatabase, bucketAttempts)
		case b != nil:
			mine = true
		}
		return nil
	})
	if err != nil || mine || s.opts.ReadOnly {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucket(bucketAttempts); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(metaAttempts, []byte{1})
	})
}

// attemptsCursor returns the transaction's cursor of the attempts bucket.
func (w *wtx) attemptsCursor() *bolt.Cursor {
	if w.attempts == nil {
		w.attempts = w.tx.Bucket(bucketAttempts)
		w.attempts.FillPercent = 0.9
	}
	return w.cursor(w.attempts)
}

// putAttempt appends a to id's attempts (setting a.Seq), deleting the
// oldest beyond AttemptsPerEvent. The event's run of keys is walked once:
// at most AttemptsPerEvent keys, all in one or two leaves.
func (w *wtx) putAttempt(id string, a *Attempt) {
	if w.err != nil {
		return
	}
	// The key and value come from the transaction's arena: bbolt keeps
	// them until the commit, and the log then costs no allocation of its
	// own per attempt.
	p := append(w.alloc(2+len(id)+8), 0, 0)
	binary.BigEndian.PutUint16(p, uint16(len(id)))
	p = append(p, id...)
	c := w.attemptsCursor()
	var keys [][]byte
	var last uint64
	for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, _ = c.Next() {
		if len(k) != len(p)+8 {
			continue // another ID's run cannot start with p: not ours
		}
		keys = append(keys, k)
		last = binary.BigEndian.Uint64(k[len(p):])
	}
	if over := len(keys) - (AttemptsPerEvent - 1); over > 0 {
		old := make([][]byte, over)
		for i := range old {
			old[i] = bytes.Clone(keys[i])
		}
		for _, k := range old {
			w.del(w.attempts, k)
		}
	}
	a.Seq = last + 1
	w.put(w.attempts, binary.BigEndian.AppendUint64(p, a.Seq), appendAttempt(w.alloc(attemptSizeHint(id, a)), id, a))
}

// dropAttempts deletes every attempt of id.
func (w *wtx) dropAttempts(id []byte) {
	p := attemptPrefix(string(id))
	c := w.attemptsCursor()
	var keys [][]byte
	for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, _ = c.Next() {
		if len(k) == len(p)+8 {
			keys = append(keys, bytes.Clone(k))
		}
	}
	for _, k := range keys {
		w.del(w.attempts, k)
	}
}

// known reports whether id is pending, dead or has a tombstone.
func (w *wtx) known(id string) bool {
	k := []byte(id)
	if w.get(w.events, k) != nil || w.get(w.dead, k) != nil {
		return true
	}
	return w.get(w.tombs, k) != nil
}

// Attempts returns the logged attempts of the event id, oldest first (nil
// when there are none), read in one transaction with the event's state:
// ErrNotFound when id is neither pending, dead nor tombstoned.
func (s *Store) Attempts(id string) ([]Attempt, error) {
	if id == "" || len(id) > MaxIDLen {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	var out []Attempt
	err := s.view(func(tx *bolt.Tx) error {
		k := []byte(id)
		if tx.Bucket(bucketEvents).Get(k) == nil && tx.Bucket(bucketDead).Get(k) == nil && tx.Bucket(bucketTombs).Get(k) == nil {
			return fmt.Errorf("%w: %q", ErrNotFound, id)
		}
		b := tx.Bucket(bucketAttempts)
		if b == nil {
			return nil // a file from before the attempt log, opened read-only
		}
		p := attemptPrefix(id)
		c := b.Cursor()
		for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
			if len(k) != len(p)+8 {
				continue
			}
			a, err := decodeAttemptAt(k, v)
			if err != nil {
				return fmt.Errorf("attempt %d of %q: %w", binary.BigEndian.Uint64(k[len(p):]), id, err)
			}
			out = append(out, *a)
		}
		return nil
	})
	return out, err
}
