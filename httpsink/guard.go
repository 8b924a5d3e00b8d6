package httpsink

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
)

// blockedRange is a range of addresses the guard refuses unless allowed.
type blockedRange struct {
	prefix netip.Prefix
	reason string
}

// blockedRanges lists non-public destinations. Order matters only for the
// reason reported: the more specific ranges come first.
var blockedRanges = func() []blockedRange {
	r := func(s, reason string) blockedRange {
		return blockedRange{netip.MustParsePrefix(s), reason}
	}
	return []blockedRange{
		// Cloud metadata services, named explicitly so the error says so.
		r("169.254.169.254/32", "cloud metadata"),        // AWS, GCP, Azure, OpenStack, ...
		r("169.254.170.2/32", "cloud metadata"),          // AWS ECS task metadata
		r("100.100.100.200/32", "cloud metadata"),        // Alibaba Cloud
		r("192.0.0.192/32", "cloud metadata"),            // Oracle Cloud (legacy)
		r("fd00:ec2::254/128", "cloud metadata"),         // AWS IMDS over IPv6
		r("0.0.0.0/8", "unspecified"),                    // "this network"
		r("10.0.0.0/8", "private"),                       // RFC 1918
		r("100.64.0.0/10", "carrier-grade NAT"),          // RFC 6598
		r("127.0.0.0/8", "loopback"),                     // RFC 1122
		r("169.254.0.0/16", "link-local"),                // RFC 3927
		r("172.16.0.0/12", "private"),                    // RFC 1918
		r("192.0.0.0/24", "IETF protocol"),               // RFC 6890
		r("192.0.2.0/24", "documentation"),               // RFC 5737
		r("192.168.0.0/16", "private"),                   // RFC 1918
		r("198.18.0.0/15", "benchmarking"),               // RFC 2544
		r("198.51.100.0/24", "documentation"),            // RFC 5737
		r("203.0.113.0/24", "documentation"),             // RFC 5737
		r("224.0.0.0/4", "multicast"),                    // RFC 5771
		r("240.0.0.0/4", "reserved"),                     // RFC 1112, includes broadcast
		r("::/128", "unspecified"),                       // RFC 4291
		r("::1/128", "loopback"),                         // RFC 4291
		r("::/96", "IPv4-compatible"),                    // deprecated, RFC 4291
		r("100::/64", "discard-only"),                    // RFC 6666
		r("2001:db8::/32", "documentation"),              // RFC 3849
		r("fc00::/7", "private (unique local)"),          // RFC 4193
		r("fe80::/10", "link-local"),                     // RFC 4291
		r("fec0::/10", "site-local"),                     // deprecated, RFC 3879
		r("ff00::/8", "multicast"),                       // RFC 4291
		r("64:ff9b:1::/48", "private (NAT64 local-use)"), // RFC 8215
	}
}()

// IPv6 prefixes that reach an embedded IPv4 address through a translator or
// relay: the embedded address is checked too.
var (
	nat64Prefix = netip.MustParsePrefix("64:ff9b::/96") // RFC 6052: last 32 bits
	sixToFour   = netip.MustParsePrefix("2002::/16")    // RFC 3056: bits 16-47
)

// guard decides at dial time whether an address may be connected to. A nil
// *guard allows everything.
type guard struct {
	allowed []netip.Prefix
}

// check returns a *BlockedAddressError when addr is not a public unicast
// address and not in the allow-list.
func (g *guard) check(addr netip.Addr) error {
	if g == nil {
		return nil
	}
	addr = addr.WithZone("")
	for _, p := range g.allowed {
		if p.Contains(addr) || p.Contains(addr.Unmap()) {
			return nil
		}
	}
	if reason := blockedReason(addr); reason != "" {
		return &BlockedAddressError{Addr: addr, Reason: reason}
	}
	return nil
}

// blockedReason returns why addr is not a public destination, or "".
func blockedReason(addr netip.Addr) string {
	if !addr.IsValid() {
		return "invalid"
	}
	addr = addr.WithZone("").Unmap() // ::ffff:a.b.c.d is a.b.c.d on the wire
	for _, b := range blockedRanges {
		if b.prefix.Contains(addr) {
			return b.reason
		}
	}
	b := addr.As16()
	switch {
	case nat64Prefix.Contains(addr):
		if r := blockedReason(netip.AddrFrom4([4]byte(b[12:16]))); r != "" {
			return r + " (via NAT64)"
		}
	case sixToFour.Contains(addr):
		if r := blockedReason(netip.AddrFrom4([4]byte(b[2:6]))); r != "" {
			return r + " (via 6to4)"
		}
	}
	return ""
}

// checkHost is the guard's check of a URL's host before any connection: a
// literal address, a name that is loopback by definition (localhost and
// *.localhost, RFC 6761, in any case and with a trailing dot), and a
// number that resolvers read as an IPv4 address (inet_aton's forms:
// "127.1", "2130706433", "0x7f000001", "017700000001"). Other names pass:
// what they resolve to is checked at dial time.
func (g *guard) checkHost(host string) error {
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		if err := g.check(netip.AddrFrom4([4]byte{127, 0, 0, 1})); err != nil {
			return fmt.Errorf("host %q is loopback by name (RFC 6761): %w", host, err)
		}
		return nil
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		return g.check(addr)
	}
	if addr, ok := parseInetAton(name); ok {
		if err := g.check(addr); err != nil {
			return fmt.Errorf("host %q is the address %s: %w", host, addr, err)
		}
	}
	return nil
}

// parseInetAton parses s as inet_aton(3) does: one to four parts separated
// by dots, each decimal, octal (a leading 0) or hexadecimal (0x), the last
// part filling the bytes the others leave (a.b.c.d, a.b.c with c 16 bits,
// a.b with b 24 bits, a alone 32 bits). ok is false when s is not such a
// number.
func parseInetAton(s string) (addr netip.Addr, ok bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var v uint64
	for i, p := range parts {
		n, ok := parseInetPart(p)
		last := i == len(parts)-1
		limit := uint64(0xff)
		if last {
			limit = 1<<(8*(5-len(parts))) - 1
		}
		if !ok || n > limit {
			return netip.Addr{}, false
		}
		if last {
			v = v<<(8*(5-len(parts))) | n
		} else {
			v = v<<8 | n
		}
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// parseInetPart parses one part of an inet_aton address: decimal, octal
// with a leading 0, hexadecimal with 0x or 0X ("0x" alone is 0, as glibc
// reads it). ok is false when p is not such a number or is above 2^32.
func parseInetPart(p string) (n uint64, ok bool) {
	base := uint64(10)
	switch {
	case p == "":
		return 0, false
	case len(p) >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'):
		base, p = 16, p[2:]
	case len(p) > 1 && p[0] == '0':
		base, p = 8, p[1:]
	}
	for i := 0; i < len(p); i++ {
		d, valid := digit(p[i])
		if !valid || d >= base {
			return 0, false
		}
		if n = n*base + d; n > 1<<32 {
			return 0, false
		}
	}
	return n, true
}

// digit returns the value of a hexadecimal digit.
func digit(c byte) (uint64, bool) {
	switch {
	case '0' <= c && c <= '9':
		return uint64(c - '0'), true
	case 'a' <= c && c <= 'f':
		return uint64(c-'a') + 10, true
	case 'A' <= c && c <= 'F':
		return uint64(c-'A') + 10, true
	}
	return 0, false
}

// control is the net.Dialer.Control hook: it runs after name resolution,
// with the literal address the socket is about to connect to, so DNS
// rebinding cannot get past it.
func (g *guard) control(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return err
	}
	return g.check(addr)
}
