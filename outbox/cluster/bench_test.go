package cluster_test

import (
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// BenchmarkGetEvent measures GET /v1/events/{id} answered by the member
// asked (local, the baseline) and by another member it forwards to
// (forwarded: one more loopback round trip and the other members asked),
// in groups of two and of three members. Compare ns/op within one run:
//
//	go test -run XXX -bench BenchmarkGetEvent -count 5 ./outbox/cluster/
func BenchmarkGetEvent(b *testing.B) {
	for _, n := range []int{2, 3} {
		g := newGroup(b, n, 5*time.Second)
		holder, asked := g.members[1], g.members[0]
		enqueue(b, holder, "ev-1", "k")
		for _, tc := range []struct {
			name string
			m    *member
		}{{"local", holder}, {"forwarded", asked}} {
			b.Run(tc.name+"/members="+strconv.Itoa(n), func(b *testing.B) {
				url := tc.m.srv.URL + "/v1/events/ev-1"
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
}
