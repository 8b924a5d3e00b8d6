package httpsink

import (
	"slices"
	"time"
)

// PutEndpoint adds an endpoint, or replaces the one of the same name, while
// the sink delivers. It validates e as New validates Config.Endpoints (the
// *ConfigError names the field without a prefix: "URL", "Secrets[0]") and
// changes nothing on error.
//
// Deliveries that started before the call finish on the definition they
// started with (its URL, secrets, headers and timeout); those that start
// after it use e. A replaced endpoint gets a keep-alive pool of its own,
// and the old pool's idle connections are closed once its last delivery
// ends. The cap of Endpoint.MaxInFlight counts each definition's deliveries
// apart, so for a moment after a replacement both may be under way. The
// endpoint's failure streak (see Config.InlineRetries) carries over while
// the URL stays the same, and starts at zero with a new URL.
//
// Events enqueued for the name are accepted from the moment PutEndpoint
// returns (ResolveEndpoint, EndpointNames).
func (s *Sink) PutEndpoint(e Endpoint) error {
	if err := s.cfg.checkEndpoint("", e); err != nil {
		return err
	}
	ep := s.newEndpoint(e)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		// A pool made now would outlive Close: give the definition to
		// nobody. Deliver refuses everything after Close anyway.
		ep.pool.CloseIdleConnections()
		return ErrClosed
	}
	prev := s.endpoint(e.Name)
	if prev != nil && prev.url == ep.url {
		// The same receiver: its failure streak goes on.
		ep.streak = prev.streak
	}
	s.named.Store(e.Name, ep)
	if prev != nil {
		s.retire(prev)
		return nil
	}
	if i, found := slices.BinarySearch(s.names, e.Name); !found {
		s.names = slices.Insert(s.names, i, e.Name)
	}
	return nil
}

// noEndpoints reports whether the sink has no named endpoint.
func (s *Sink) noEndpoints() bool {
	empty := true
	s.named.Range(func(any, any) bool {
		empty = false
		return false
	})
	return empty
}

// CheckEndpoint validates e as PutEndpoint does, without adding it: nil,
// or the *ConfigError PutEndpoint would return.
func (s *Sink) CheckEndpoint(e Endpoint) error {
	return s.cfg.checkEndpoint("", e)
}

// RemoveEndpoint removes the endpoint of that name and reports whether there
// was one. Deliveries under way finish on it; from then on events naming it
// are refused at enqueue (ResolveEndpoint: ErrUnknownEndpoint), and pending
// ones that come due are dead with ErrUnknownEndpoint, unless the outbox
// moved them away first (outbox.Outbox.DeadLetterEndpoint).
func (s *Sink) RemoveEndpoint(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := s.endpoint(name)
	if prev == nil {
		return false
	}
	s.named.Delete(name)
	if i, found := slices.BinarySearch(s.names, name); found {
		s.names = slices.Delete(s.names, i, i+1)
	}
	s.retire(prev)
	return true
}

// acquire returns the named endpoint's current definition counted as in
// flight, nil when there is no endpoint of that name. Release it with
// release.
func (s *Sink) acquire(name string) *endpoint {
	for {
		ep := s.endpoint(name)
		if ep == nil {
			return nil
		}
		ep.inFlight.Add(1)
		if !ep.retired.Load() {
			return ep
		}
		// Replaced between the lookup and the count: take the new one.
		s.release(ep)
	}
}

// release ends a use of ep; the last use of a retired definition closes
// its pool's idle connections.
func (s *Sink) release(ep *endpoint) {
	if ep.inFlight.Add(-1) == 0 && ep.retired.Load() {
		ep.pool.CloseIdleConnections()
	}
}

// retire marks a definition replaced or removed: no new delivery takes it,
// and its pool's idle connections are closed now if none is under way, or
// when the last one ends (release). A connection can go back to the pool
// just after that (net/http returns it from another goroutine once the
// body is closed), so the sink keeps retired pools for as long as an idle
// connection would live, and Close closes them too. s.mu must be held.
func (s *Sink) retire(ep *endpoint) {
	ep.retired.Store(true)
	if ep.inFlight.Load() == 0 {
		ep.pool.CloseIdleConnections()
	}
	now := time.Now()
	kept := s.retired[:0]
	for _, r := range s.retired {
		if now.Sub(r.at) > idleConnTimeout && r.ep.inFlight.Load() == 0 {
			r.ep.pool.CloseIdleConnections() // any connection it got back has timed out by now
			continue
		}
		kept = append(kept, r)
	}
	s.retired = append(kept, retiredPool{ep: ep, at: now})
}

// retiredPool is a replaced or removed definition whose pool may still
// get a connection back.
type retiredPool struct {
	ep *endpoint
	at time.Time
}
