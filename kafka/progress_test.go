package kafka

import (
	"testing"
	"testing/synctest"
	"time"
)

// Restore reports its progress every 100ms from one goroutine, and once more
// when it stops, with everything read; nothing comes after.
func TestRestoreProgressReports(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var reports []RestoreProgress // written by the reporting goroutine only
		p := startProgress(func(r RestoreProgress) { reports = append(reports, r) }, "cl", 300)
		p.add(100)
		time.Sleep(progressEvery)
		synctest.Wait()
		if len(reports) != 1 || reports[0] != (RestoreProgress{Topic: "cl", Done: 100, Total: 300, Elapsed: progressEvery}) {
			t.Fatalf("after one interval: %+v", reports)
		}
		p.add(200)
		p.stop()
		n := len(reports)
		if last := reports[n-1]; last.Done != 300 || last.Total != 300 {
			t.Errorf("last report %+v, want 300/300", last)
		}
		time.Sleep(10 * progressEvery)
		if len(reports) != n {
			t.Errorf("%d reports after stop", len(reports)-n)
		}
	})
	startProgress(nil, "cl", 1).stop() // no callback: no goroutine, no panic
}
