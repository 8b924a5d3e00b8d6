package httpsink

import (
	"net/netip"
	"testing"
)

func TestBlockedReason(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1":              "loopback",
		"127.255.0.9":            "loopback",
		"::1":                    "loopback",
		"::ffff:127.0.0.1":       "loopback",
		"10.0.0.1":               "private",
		"172.16.0.1":             "private",
		"172.31.255.255":         "private",
		"192.168.1.1":            "private",
		"::ffff:192.168.1.1":     "private",
		"fd12:3456::1":           "private (unique local)",
		"169.254.169.254":        "cloud metadata",
		"::ffff:169.254.169.254": "cloud metadata",
		"169.254.170.2":          "cloud metadata",
		"100.100.100.200":        "cloud metadata",
		"fd00:ec2::254":          "cloud metadata",
		"169.254.1.1":            "link-local",
		"fe80::1":                "link-local",
		"fe80::1%eth0":           "link-local",
		"0.0.0.0":                "unspecified",
		"::":                     "unspecified",
		"100.64.0.1":             "carrier-grade NAT",
		"100.127.255.254":        "carrier-grade NAT",
		"224.0.0.1":              "multicast",
		"239.1.2.3":              "multicast",
		"ff02::1":                "multicast",
		"255.255.255.255":        "reserved",
		"::127.0.0.1":            "IPv4-compatible",
		"64:ff9b::a9fe:a9fe":     "cloud metadata (via NAT64)",
		"64:ff9b::7f00:1":        "loopback (via NAT64)",
		"2002:7f00:1::":          "loopback (via 6to4)",
		"2002:a00:1::1":          "private (via 6to4)",
		"198.18.0.1":             "benchmarking",
		"2001:db8::1":            "documentation",
		// Public addresses pass.
		"8.8.8.8":              "",
		"1.1.1.1":              "",
		"100.63.255.255":       "",
		"172.32.0.1":           "",
		"2606:4700::1111":      "",
		"::ffff:8.8.8.8":       "",
		"64:ff9b::808:808":     "",
		"2002:808:808::1":      "",
		"2a00:1450:4001::200e": "",
	} {
		if got := blockedReason(netip.MustParseAddr(addr)); got != want {
			t.Errorf("%s: %q, want %q", addr, got, want)
		}
	}
}

func TestGuardAllowedNetworks(t *testing.T) {
	g := &guard{allowed: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("fd00::/8")}}
	for addr, blocked := range map[string]bool{
		"10.1.2.3": false, "::ffff:10.1.2.3": false, "10.2.0.1": true, "fd00::1": false, "fc00::1": true, "127.0.0.1": true, "8.8.8.8": false,
	} {
		if err := g.check(netip.MustParseAddr(addr)); (err != nil) != blocked {
			t.Errorf("%s: %v, want blocked %v", addr, err, blocked)
		}
	}
	var open *guard
	if err := open.check(netip.MustParseAddr("127.0.0.1")); err != nil {
		t.Errorf("nil guard: %v", err)
	}
}

// parseInetAton reads every form inet_aton(3) accepts, and nothing else.
func TestParseInetAton(t *testing.T) {
	for s, want := range map[string]string{
		"127.0.0.1": "127.0.0.1", "127.1": "127.0.0.1", "127.0.1": "127.0.0.1", "2130706433": "127.0.0.1",
		"0x7f000001": "127.0.0.1", "0X7F000001": "127.0.0.1", "017700000001": "127.0.0.1", "0x7f.1": "127.0.0.1",
		"0177.0.0.01": "127.0.0.1", "0": "0.0.0.0", "0x": "0.0.0.0", "00": "0.0.0.0", "4294967295": "255.255.255.255",
		"10.0x10203": "10.1.2.3", "192.168.257": "192.168.1.1", "1.2.3.4": "1.2.3.4",
	} {
		if got, ok := parseInetAton(s); !ok || got.String() != want {
			t.Errorf("parseInetAton(%q) = %v, %v; want %s", s, got, ok, want)
		}
	}
	for _, s := range []string{"", ".", "1.", ".1", "1..2", "1.2.3.4.5", "256.1", "1.16777216", "1.2.65536", "1.2.3.256",
		"4294967296", "99999999999999999999", "08", "0x1g", "example.com", "1.2.3.a", "-1", "+1", " 1"} {
		if got, ok := parseInetAton(s); ok {
			t.Errorf("parseInetAton(%q) = %v; want not an address", s, got)
		}
	}
}
