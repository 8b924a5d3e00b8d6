package cli

import (
	"bytes"
	"strings"
	"testing"
)

func TestInspectClusterNeedsTheGroupsBrokersAndTopic(t *testing.T) {
	run := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := Main(Env{Args: append([]string{"inspect"}, args...), Getenv: func(string) (string, bool) { return "", false },
			Stdout: &out, Stderr: &errOut, Exit: func(int) {}})
		return code, errOut.String()
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cluster"}, "--kafka-brokers"},
		{[]string{"--cluster", "--kafka-brokers", "127.0.0.1:9092"}, "--kafka-topic"},
		{[]string{"--cluster=true", "--kafka-brokers", "127.0.0.1:9092", "--kafka-topic", "t", "--timeout", "0s"}, "--timeout"},
		{[]string{"--cluster", "--kafka-brokers", "127.0.0.1:9092", "--kafka-topic", "t", "extra"}, "unexpected argument"},
		{[]string{"--cluster", "--db", "x.db"}, "-db"},
	} {
		code, out := run(tc.args...)
		if code != exitUsage || !strings.Contains(out, tc.want) {
			t.Errorf("inspect %v: exit %d, %q, want a usage error naming %s", tc.args, code, out, tc.want)
		}
	}
	for args, want := range map[string]bool{"--cluster": true, "-cluster": true, "--cluster=true": true, "--cluster=false": false,
		"--db x.db": false, "-- --cluster": false} {
		if got := wantsCluster(strings.Fields(args)); got != want {
			t.Errorf("wantsCluster(%s) = %v, want %v", args, got, want)
		}
	}
}
