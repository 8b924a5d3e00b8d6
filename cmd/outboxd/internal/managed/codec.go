package managed

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// bucket is the application bucket of the outbox's file that holds the
// managed endpoints, by name.
var bucket = []byte("outboxd_endpoints")

// codecVersion is the version of the stored form written.
const codecVersion = 1

// stored is a managed endpoint as the file holds it.
type stored struct {
	V           int               `json:"v"`
	URL         string            `json:"url"`
	Topics      []string          `json:"topics,omitempty"`
	Filter      map[string]string `json:"filter,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
	TimeoutNS   int64             `json:"timeout_ns,omitempty"`
	MaxInFlight int               `json:"max_in_flight,omitempty"`
	Rate        float64           `json:"rate,omitempty"`
	Burst       int               `json:"burst,omitempty"`
	Secret      string            `json:"secret"`
	Retiring    []storedSecret    `json:"retiring,omitempty"`
	CreatedAt   time.Time         `json:"created_at"`
	UpdatedAt   time.Time         `json:"updated_at"`
}

// storedSecret is a secret retiring after a rotation.
type storedSecret struct {
	Secret string    `json:"secret"`
	Until  time.Time `json:"until"`
}

// encode returns the stored form of e.
func encode(e *endpoint) []byte {
	return mustJSON(toStored(e))
}

// toStored returns the stored form of e, secrets included.
func toStored(e *endpoint) stored {
	s := stored{
		V: codecVersion, URL: e.spec.URL, Topics: e.spec.Topics, Filter: e.spec.Filter, Headers: e.spec.Headers,
		TimeoutNS: int64(e.spec.Timeout), MaxInFlight: e.spec.MaxInFlight, Rate: e.spec.Rate, Burst: e.spec.Burst,
		Secret: e.secret, CreatedAt: e.createdAt, UpdatedAt: e.updatedAt,
	}
	for _, r := range e.retiring {
		s.Retiring = append(s.Retiring, storedSecret{Secret: r.Secret, Until: r.Until})
	}
	return s
}

// mustJSON returns the JSON of v, a value of this package's forms.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("managed: encoding an endpoint: " + err.Error()) // strings, numbers and times always encode
	}
	return b
}

// errNewer is the error for a value written by a newer outboxd.
var errNewer = errors.New("written by a newer version of outboxd")

// decode parses a stored endpoint of that name. It checks the form (known
// fields, version, types, no negative numbers); the definition itself is
// checked as the API's would be when it is applied.
func decode(name string, b []byte) (*endpoint, error) {
	var s stored
	if err := strictJSON(b, &s, "a stored endpoint"); err != nil {
		return nil, err
	}
	if s.Secret == "" {
		return nil, errors.New("no secret")
	}
	return s.endpoint(name)
}

// strictJSON decodes the one JSON value of b into v, refusing unknown
// fields and trailing data; what names the form in errors.
func strictJSON(b []byte, v any, what string) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("not %s: %w", what, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("not %s: trailing data", what)
	}
	return nil
}

// endpoint checks the stored form's version and numbers and returns the
// endpoint of that name it describes.
func (s *stored) endpoint(name string) (*endpoint, error) {
	switch {
	case s.V > codecVersion:
		return nil, fmt.Errorf("version %d: %w", s.V, errNewer)
	case s.V < 1:
		return nil, fmt.Errorf("version %d is not a version of the stored form", s.V)
	case s.TimeoutNS < 0 || s.MaxInFlight < 0 || s.Burst < 0 || !(s.Rate >= 0):
		return nil, errors.New("a negative limit")
	}
	e := &endpoint{
		name: name,
		spec: spec{URL: s.URL, Topics: s.Topics, Filter: s.Filter, Headers: s.Headers,
			Timeout: time.Duration(s.TimeoutNS), MaxInFlight: s.MaxInFlight, Rate: s.Rate, Burst: s.Burst},
		managed: true, secret: s.Secret, createdAt: s.CreatedAt, updatedAt: s.UpdatedAt,
	}
	for i, r := range s.Retiring {
		if r.Secret == "" || r.Until.IsZero() {
			return nil, fmt.Errorf("retiring secret %d has no secret or no end", i)
		}
		e.retiring = append(e.retiring, retiring{Secret: r.Secret, Until: r.Until})
	}
	return e, nil
}
