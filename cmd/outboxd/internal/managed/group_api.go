package managed

import (
	"context"
	"fmt"
	"time"

	"github.com/outboxd/outbox/outbox/httpapi"
)

// groupCreate is CreateEndpoint in group mode.
func (r *Registry) groupCreate(ctx context.Context, name string, s httpapi.EndpointSpec) (httpapi.EndpointDefinition, string, error) {
	c, _, err := r.write(ctx, name, func() (*change, error) {
		if err := r.refuse(name); err != nil {
			return nil, err
		}
		if r.grp.sealer == nil {
			return nil, errNoKeyToCreate
		}
		if _, ok := r.eps[name]; ok {
			return nil, fmt.Errorf("endpoint %q exists already: replace it with PUT, or delete it first: %w", name, httpapi.ErrEndpointExists)
		}
		now := r.cfg.Now().UTC()
		e := &endpoint{name: name, spec: normalize(s), managed: true, secret: newSecret(), createdAt: now, updatedAt: now}
		if err := r.check(e); err != nil {
			return nil, err
		}
		return &change{name: name, op: opPut, ep: e}, nil
	})
	if err != nil {
		return httpapi.EndpointDefinition{}, "", err
	}
	return c.ep.definition(c.ep.updatedAt), c.ep.secret, nil
}

// groupReplace is ReplaceEndpoint in group mode.
func (r *Registry) groupReplace(ctx context.Context, name string, s httpapi.EndpointSpec) (httpapi.EndpointDefinition, error) {
	c, _, err := r.write(ctx, name, func() (*change, error) {
		old, err := r.writableLocked(name)
		if err != nil {
			return nil, err
		}
		now := r.cfg.Now().UTC()
		e := &endpoint{name: name, spec: normalize(s), managed: true, secret: old.secret,
			retiring: live(old.retiring, now), createdAt: old.createdAt, updatedAt: now}
		if err := r.check(e); err != nil {
			return nil, err
		}
		return &change{name: name, op: opPut, ep: e}, nil
	})
	if err != nil {
		return httpapi.EndpointDefinition{}, err
	}
	return c.ep.definition(c.ep.updatedAt), nil
}

// groupRotate is RotateSecret in group mode.
func (r *Registry) groupRotate(ctx context.Context, name string, grace time.Duration) (string, time.Time, error) {
	var until time.Time
	c, _, err := r.write(ctx, name, func() (*change, error) {
		old, err := r.writableLocked(name)
		if err != nil {
			return nil, err
		}
		var e *endpoint
		e, until = rotated(old, r.cfg.Now().UTC(), grace)
		return &change{name: name, op: opPut, ep: e}, nil
	})
	if err != nil {
		return "", time.Time{}, err
	}
	return c.ep.secret, until, nil
}

// groupDelete is DeleteEndpoint in group mode: every member takes the
// endpoint out of force and dead-letters its deliveries in its own
// partition stores; the count is this member's.
func (r *Registry) groupDelete(ctx context.Context, name string) (int, error) {
	_, out, err := r.write(ctx, name, func() (*change, error) {
		if _, err := r.managedLocked(name); err != nil {
			return nil, err
		}
		return &change{name: name, op: opDelete}, nil
	})
	return out.dead, err
}

// writableLocked returns the managed endpoint of that name for a change
// that keeps its secrets, or the error to answer. r.mu must be held.
func (r *Registry) writableLocked(name string) (*endpoint, error) {
	e, err := r.managedLocked(name)
	if err != nil {
		return nil, err
	}
	if r.grp.sealer == nil {
		return nil, errNoKeyToCreate
	}
	if why, bad := r.grp.unsealed[name]; bad {
		return nil, fmt.Errorf("endpoint %q cannot be changed here: %v; give every instance the same %s: %w",
			name, why, KeySetting, httpapi.ErrEndpointsFixed)
	}
	return e, nil
}
