package cluster

import (
	"encoding/json"
	"net/http"
	"testing"
)

// Whatever two members answer, the merged stats, endpoints, events and
// operation counts encode as JSON, count only what decodes, and are
// complete only when both did.
func FuzzMergeMemberAnswers(f *testing.F) {
	f.Add([]byte(`{"pending":1,"dead":2,"in_flight":0,"delivered_total":3,"failed_total":4,"oldest_pending_age_seconds":1.5}`),
		[]byte(`{"endpoints":[{"name":"orders","disabled":true,"failure_streak":2,"last_status":503,"rate":1.25,"breaker":{"state":"open","until":"2026-01-01T00:00:00Z"}}]}`))
	f.Add([]byte(`null`), []byte(`{"endpoints":null}`))
	f.Add([]byte(`{"pending":-1}`), []byte(`{"endpoints":[null,1,"x",{"name":""}]}`))
	f.Add([]byte(`[]`), []byte(`{"endpoints":[{"name":"a","throttled_until":"not a time"},{"name":"a","throttled_until":"2026-01-01T00:00:00Z"}]}`))
	f.Add([]byte(`{"replayed":3,"retried":-1}`), []byte(`{"events":[{"id":"b"},{"id":"a","topic":"t","endpoint":"e"},{"id":""},7],"next":"b"}`))
	f.Add([]byte(`{"events":[{"id":"x"},{"id":"x"},{"id":"y"}],"next":""}`), []byte(`{"retried":2.5}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		for _, body := range [][]byte{a, b} {
			answers := []*answer{
				{peer: Peer{ID: "a", URL: "http://a"}, status: http.StatusOK, body: body},
				{peer: Peer{ID: "b", URL: "http://b"}, status: http.StatusOK, body: b},
			}
			st := sumStats(answers)
			if _, err := json.Marshal(st); err != nil {
				t.Fatalf("stats of %q: %v", body, err)
			}
			if st.Complete != (st.Members[0].Answered && st.Members[1].Answered) {
				t.Fatalf("stats complete=%v with members %+v", st.Complete, st.Members)
			}
			ep := mergeEndpoints(answers, 100)
			if _, err := json.Marshal(ep); err != nil {
				t.Fatalf("endpoints of %q: %v", body, err)
			}
			evs := mergeEvents(answers, 2)
			if _, err := json.Marshal(evs); err != nil || len(evs.Events) > 2 {
				t.Fatalf("events of %q: %d events, %v", body, len(evs.Events), err)
			}
			for _, name := range []string{"replayed", "retried"} {
				accepted := []*answer{{peer: Peer{ID: "a"}, status: http.StatusAccepted, body: body}}
				res, down, _ := sumOp(accepted, name)
				if _, err := json.Marshal(res); err != nil || res.Complete != (len(down) == 0) {
					t.Fatalf("%s of %q: %+v, %v", name, body, res, err)
				}
			}
		}
	})
}
