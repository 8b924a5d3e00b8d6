package config

import (
	"fmt"
	"net"
)

// AdvertiseURL derives the address a member of a Kafka group announces for
// its API when kafka.advertise_url is not set: http:// and the listen
// address, with the port of bound (the listener's address, whose port is
// the one picked for port 0) when it is given. A wildcard host (":8080",
// "0.0.0.0:8080", "[::]:8080") names no address the other members can
// reach: that is an error asking for kafka.advertise_url.
func AdvertiseURL(listen string, bound net.Addr) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("listen %q is not HOST:PORT", listen)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		return "", fmt.Errorf("required when listen (%q) is a wildcard address: the other members of the group "+
			"forward requests to it; give this instance's address as they reach it, such as http://10.0.0.7:8080", listen)
	}
	if ta, ok := bound.(*net.TCPAddr); ok {
		port = fmt.Sprint(ta.Port)
	}
	return "http://" + net.JoinHostPort(host, port), nil
}
