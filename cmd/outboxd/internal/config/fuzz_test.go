package config

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoadFile: whatever the configuration file holds, loading it never
// panics; it either fails with an error or gives a configuration that
// passes or fails validation with an error. (The Kafka settings are left
// out of the validation: it reads the TLS files they name.)
func FuzzLoadFile(f *testing.F) {
	example, err := os.ReadFile("../../outboxd.example.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example)
	f.Add([]byte("delivery:\n  interval: 2s\n  policy: [\"404=retry\"]\n"))
	f.Add([]byte("endpoints:\n  - {name: a, url: 'https://a.example.com/', headers: {X: y}}\n"))
	f.Add([]byte("limits:\n  max_body_bytes: 5MiB\n"))
	f.Add([]byte("a: &a [*a, *a]\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(dir, "fuzz.yaml")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := Default()
		if err := LoadFile(p, &cfg); err != nil {
			return
		}
		cfg.Kafka = Default().Kafka
		_ = Validate(&cfg)
	})
}
