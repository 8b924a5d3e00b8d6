package union

import (
	"context"

	"github.com/outboxd/outbox/outbox"
)

// History returns the kept changelog entries of the event with that ID from
// the first store whose changelog has any (see Changelog.History), in LSN
// order. An ID no store's changelog holds yields none and no error. It
// reads each asked store's whole changelog.
func (v *View) History(ctx context.Context, id string) ([]outbox.ChangelogEntry, error) {
	var errs storeErrors
	open := false
	for _, o := range v.stores() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		es, err := o.Changelog().History(id)
		if err == nil {
			open = true
			if len(es) > 0 {
				return es, nil
			}
			continue
		}
		errs.note(err)
	}
	if open && errs.failed == nil {
		return nil, nil
	}
	return nil, errs.result("history")
}
