package managed

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// RecordPrefix begins the key of every record of an endpoint definition
// in a group's table topic: "endpoint/<name>". Other kinds of records
// share the topic under prefixes of their own.
const RecordPrefix = "endpoint/"

// Operations of a topic record.
const (
	opPut    = "put"    // the endpoint's definition from now on
	opDelete = "delete" // the endpoint no longer exists
)

// maxNameBytes bounds the name in a record's key.
const maxNameBytes = 1024

// change is one record of the topic: a compare-and-set of one endpoint's
// definition. It applies when Prev is the endpoint's revision in force
// (0: it never had one), which then becomes Rev = Prev+1. A restatement
// says again what is in force at revision Rev (Prev = Rev) and changes
// nothing: it is written after a change that did not apply, so that the
// last record of the key, all compaction keeps, is one that did.
type change struct {
	name      string
	op        string
	restate   bool
	rev, prev uint64
	// origin identifies the API call that wrote it, so that the instance
	// that wrote it learns whether it applied.
	origin string
	// ep is a put's definition, secrets included when they opened.
	ep *endpoint
	// sealErr is why a put's secrets did not open (no key, another key).
	sealErr error
}

// wireChange is a change as the topic holds it (JSON). The endpoint's
// secrets are not in Endpoint but in Sealed: AES-GCM with the group's key,
// a random nonce first, the record's key authenticated.
type wireChange struct {
	V        int     `json:"v"`
	Op       string  `json:"op"`
	Restate  bool    `json:"restate,omitempty"`
	Rev      uint64  `json:"rev"`
	Prev     uint64  `json:"prev"`
	Origin   string  `json:"origin,omitempty"`
	Endpoint *stored `json:"endpoint,omitempty"`
	Sealed   []byte  `json:"sealed,omitempty"`
}

// sealedSecrets are the secrets of a put, before they are sealed.
type sealedSecrets struct {
	Secret   string         `json:"secret"`
	Retiring []storedSecret `json:"retiring,omitempty"`
}

// errNoKey is a put's sealErr when no key is configured.
var errNoKey = errors.New("no key is configured")

// recordKey returns the key of the records of endpoint name.
func recordKey(name string) []byte { return []byte(RecordPrefix + name) }

// encodeChange returns c's record value. A put needs s, to seal its
// secrets.
func encodeChange(c *change, s *sealer) []byte {
	w := wireChange{V: codecVersion, Op: c.op, Restate: c.restate, Rev: c.rev, Prev: c.prev, Origin: c.origin}
	if c.op == opPut {
		st := toStored(c.ep)
		secrets := sealedSecrets{Secret: st.Secret, Retiring: st.Retiring}
		st.Secret, st.Retiring = "", nil
		w.Endpoint = &st
		w.Sealed = s.seal(mustJSON(secrets), recordKey(c.name))
	}
	return mustJSON(w)
}

// decodeChange parses a record of the topic. A put's secrets are opened
// with s (nil: no key); when they do not open, the change is still
// returned, with sealErr saying why, so that revisions stay in step. The
// error is for a record that is not a change at all.
func decodeChange(key, value []byte, s *sealer) (*change, error) {
	name, ok := strings.CutPrefix(string(key), RecordPrefix)
	switch {
	case !ok || name == "":
		return nil, fmt.Errorf("key %.100q is not %s and a name", key, RecordPrefix)
	case len(name) > maxNameBytes || !utf8.ValidString(name):
		return nil, errors.New("the name in the key is too long or not UTF-8")
	case value == nil:
		return nil, errors.New("a tombstone: endpoints are deleted by a delete record")
	}
	var w wireChange
	if err := strictJSON(value, &w, "an endpoint record"); err != nil {
		return nil, err
	}
	c := &change{name: name, op: w.Op, restate: w.Restate, rev: w.Rev, prev: w.Prev, origin: w.Origin}
	if err := w.check(); err != nil {
		return nil, err
	}
	if w.Op == opDelete {
		return c, nil
	}
	ep, err := w.Endpoint.endpoint(name)
	if err != nil {
		return nil, err
	}
	c.ep = ep
	c.sealErr = openSecrets(ep, w.Sealed, key, s)
	return c, nil
}

// check checks a record's form: its version, operation and revisions, and
// that no secret is in the clear.
func (w *wireChange) check() error {
	switch {
	case w.V > codecVersion:
		return fmt.Errorf("version %d: %w", w.V, errNewer)
	case w.V < 1:
		return fmt.Errorf("version %d is not a version of the record", w.V)
	case w.Op != opPut && w.Op != opDelete:
		return fmt.Errorf("operation %.20q is neither put nor delete", w.Op)
	case w.Restate && w.Rev != w.Prev, !w.Restate && w.Rev != w.Prev+1:
		return fmt.Errorf("revision %d does not follow %d", w.Rev, w.Prev)
	case w.Op == opDelete && (w.Endpoint != nil || w.Sealed != nil):
		return errors.New("a delete with a definition")
	case w.Op == opPut && (w.Endpoint == nil || w.Sealed == nil):
		return errors.New("a put without a definition or secrets")
	case w.Op == opPut && (w.Endpoint.Secret != "" || w.Endpoint.Retiring != nil):
		return errors.New("a secret in the clear")
	}
	return nil
}

// openSecrets opens sealed into ep's secrets, and returns why it could not.
func openSecrets(ep *endpoint, sealed, key []byte, s *sealer) error {
	if s == nil {
		return errNoKey
	}
	plain, err := s.open(sealed, key)
	if err != nil {
		return errors.New("the key does not decrypt its secrets (another key encrypted them)")
	}
	var sec sealedSecrets
	if err := strictJSON(plain, &sec, "sealed secrets"); err != nil || sec.Secret == "" {
		return errors.New("its sealed secrets are not a secret")
	}
	ep.secret = sec.Secret
	for i, r := range sec.Retiring {
		if r.Secret == "" || r.Until.IsZero() {
			return fmt.Errorf("retiring secret %d has no secret or no end", i)
		}
		ep.retiring = append(ep.retiring, retiring{Secret: r.Secret, Until: r.Until})
	}
	return nil
}
