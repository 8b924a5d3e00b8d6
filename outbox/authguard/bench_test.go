package authguard_test

import (
	"testing"

	"github.com/outboxd/outbox/outbox/authguard"
)

// BenchmarkRightToken is the cost the guard adds to a request with the right
// token (nil: no guard, the baseline): two lookups of its address.
func BenchmarkRightToken(b *testing.B) {
	for _, tc := range []struct {
		name string
		g    *authguard.Guard
	}{{"nil", nil}, {"guard", authguard.New(authguard.Config{})}} {
		b.Run(tc.name, func(b *testing.B) {
			r := request("192.0.2.1:5000")
			for b.Loop() {
				if tc.g.Check(r, right) != authguard.Allowed {
					b.Fatal("refused")
				}
			}
		})
	}
}
