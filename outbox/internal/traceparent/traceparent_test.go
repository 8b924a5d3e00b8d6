package traceparent

import "testing"

func TestParseTraceParent(t *testing.T) {
	const tid, sid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for _, tc := range []struct {
		in, want string // want "" means refused
	}{
		{"00-" + tid + "-" + sid + "-01", "00-" + tid + "-" + sid + "-01"},
		{"00-" + tid + "-" + sid + "-00", "00-" + tid + "-" + sid + "-00"},
		{"00-" + tid + "-" + sid + "-03", "00-" + tid + "-" + sid + "-01"}, // unknown flags dropped
		{"01-" + tid + "-" + sid + "-01-future", "00-" + tid + "-" + sid + "-01"},
		{"01-" + tid + "-" + sid + "-01", "00-" + tid + "-" + sid + "-01"},
		{"", ""},
		{"ff-" + tid + "-" + sid + "-01", ""},
		{"00-" + tid + "-" + sid + "-01-extra", ""},
		{"01-" + tid + "-" + sid + "-01x", ""},
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-" + sid + "-01", ""},
		{"00-00000000000000000000000000000000-" + sid + "-01", ""},
		{"00-" + tid + "-0000000000000000-01", ""},
		{"00-" + tid + "-" + sid + "-0g", ""},
		{"00_" + tid + "-" + sid + "-01", ""},
		{"00-" + tid + "-" + sid + "-1", ""},
	} {
		tp, _ := Normalize(tc.in, "")
		if tp != tc.want {
			t.Errorf("Normalize(%q) = %q, want %q", tc.in, tp, tc.want)
		}
	}
	tp, ts := Normalize("00-"+tid+"-"+sid+"-01", "a=1,b=2")
	if tp == "" || ts != "a=1,b=2" {
		t.Errorf("tracestate: %q %q", tp, ts)
	}
	if tp, ts := Normalize("00-"+tid+"-"+sid+"-01", "not a tracestate"); tp == "" || ts != "" {
		t.Errorf("malformed tracestate: %q %q, want it dropped and the traceparent kept", tp, ts)
	}
	if tp, ts := Normalize("bad", "a=1"); tp != "" || ts != "" {
		t.Errorf("tracestate without a traceparent: %q %q", tp, ts)
	}
}
