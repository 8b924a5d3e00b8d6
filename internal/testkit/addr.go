package testkit

import (
	"net"
	"strconv"
	"testing"
)

// FreePort returns a loopback TCP port that nothing listened on a moment
// ago: for a server the test starts later on a port it must know first, or
// for an address where a connection is refused.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// FreeAddr is [FreePort] as a host:port address on 127.0.0.1.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return "127.0.0.1:" + strconv.Itoa(FreePort(t))
}
