package outbox

import "context"

// Maintain runs one maintenance pass now: it trims the tombstones past
// Config.TombstoneRetention and the changelog past Config.ChangelogRetention
// and Config.ChangelogMaxEntries (never past what MarkShipped recorded,
// once shipping is on). A started outbox does this by itself every
// Config.MaintenanceInterval; Maintain is for one that is kept up to date
// without being started, such as a standby copy that Restore keeps
// applying a shipped changelog to. Failures to trim are logged, as the
// punctuation's are. After Stop it fails with ErrClosed.
func (o *Outbox) Maintain(ctx context.Context) error {
	if err := o.enter(); err != nil {
		return err
	}
	defer o.ops.Done()
	if err := ctx.Err(); err != nil {
		return err
	}
	o.maintain(ctx, o.clock.Now())
	return nil
}
