package cluster_test

import (
	"io"
	"net/http"
	"testing"
	"time"
)

// BenchmarkGetEvent measures GET /v1/events/{id} in a group of three
// members: answered by the member that holds the event (local, the
// baseline), through another member when the ID names the partition the
// holder owns (owner: one forwarded request), and through another member
// when the ID names no partition (everyone: both other members asked).
// Compare ns/op within one run:
//
//	go test -run XXX -bench BenchmarkGetEvent -count 5 ./outbox/cluster/
func BenchmarkGetEvent(b *testing.B) {
	g := newGroup(b, 3, 5*time.Second)
	g.parts = map[string][]int{"a": {0}, "b": {7}, "c": {1}}
	holder, asked := g.members[1], g.members[0]
	enqueue(b, holder, "part7-ev", "k")
	enqueue(b, holder, "ev-1", "k")
	for _, tc := range []struct {
		name string
		m    *member
		id   string
	}{{"local", holder, "part7-ev"}, {"owner", asked, "part7-ev"}, {"everyone", asked, "ev-1"}} {
		b.Run(tc.name+"/members=3", func(b *testing.B) {
			url := tc.m.srv.URL + "/v1/events/" + tc.id
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
			defer client.CloseIdleConnections()
			b.ReportAllocs()
			for b.Loop() {
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				req.Header.Set("Authorization", "Bearer "+token)
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
}
