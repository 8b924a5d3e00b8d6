package config

import (
	"net"
	"strings"
	"testing"
)

func TestAdvertiseURLFromTheListenAddress(t *testing.T) {
	bound := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 41234}
	for _, tc := range []struct {
		listen string
		bound  net.Addr
		want   string
	}{
		{"127.0.0.1:8080", nil, "http://127.0.0.1:8080"},
		{"127.0.0.1:0", bound, "http://127.0.0.1:41234"},
		{"10.0.0.7:8080", nil, "http://10.0.0.7:8080"},
		{"[fd00::7]:8080", nil, "http://[fd00::7]:8080"},
		{"node-1.internal:8080", nil, "http://node-1.internal:8080"},
	} {
		got, err := AdvertiseURL(tc.listen, tc.bound)
		if err != nil || got != tc.want {
			t.Errorf("AdvertiseURL(%q) = %q, %v, want %q", tc.listen, got, err, tc.want)
		}
	}
	for _, listen := range []string{":8080", "0.0.0.0:8080", "[::]:8080", "8080"} {
		if got, err := AdvertiseURL(listen, nil); err == nil || !strings.Contains(err.Error(), listen) {
			t.Errorf("AdvertiseURL(%q) = %q, %v, want an error naming the address", listen, got, err)
		}
	}
}
