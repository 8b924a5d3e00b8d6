package union

import (
	"context"

	"github.com/outboxd/outbox/outbox"
)

// Attempts returns the logged attempts of the event from the first store
// that knows its ID (see Outbox.Attempts). ErrNotFound when none does.
func (v *View) Attempts(ctx context.Context, id string) ([]outbox.Attempt, error) {
	var as []outbox.Attempt
	err := v.first("attempts", func(o *outbox.Outbox) error {
		var err error
		as, err = o.Attempts(ctx, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	return as, nil
}
