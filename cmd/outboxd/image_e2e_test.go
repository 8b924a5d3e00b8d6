package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
)

// podmanConf is the containers.conf the image test runs podman with, so
// that a fresh machine behaves as this one: runc (crun refuses hosts with
// cgroup v1 and v2 controllers mounted side by side), cgroupfs and a file
// event log (no systemd), and resource limits low enough for a runtime
// without CAP_SYS_RESOURCE over its own limits to set.
const podmanConf = `[containers]
default_ulimits = ["nofile=4096:4096", "nproc=2048:2048"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
`

// podman runs podman commands under the test's containers.conf.
type podman struct {
	t    *testing.T
	conf string // path of the containers.conf
}

// newPodman finds podman and checks it works. Without one the test is
// skipped, unless CI is set: then it fails, so CI cannot pass without the
// image test.
func newPodman(t *testing.T) *podman {
	t.Helper()
	if _, err := exec.LookPath("podman"); err != nil {
		unavailable(t, "no podman executable found in PATH (apt-get install -y podman runc)")
	}
	conf := filepath.Join(t.TempDir(), "containers.conf")
	if err := os.WriteFile(conf, []byte(podmanConf), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &podman{t: t, conf: conf}
	if out, err := p.output("info"); err != nil {
		unavailable(t, "podman info fails: "+out)
	}
	return p
}

// unavailable skips the test for why, or fails it when CI is set.
func unavailable(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("cannot run the container image test and CI is set: %s", why)
	}
	t.Skipf("skipping the container image test: %s", why)
}

// output runs podman with args and returns its standard output, or its
// standard error with the error when it fails.
func (p *podman) output(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "podman", args...)
	cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+p.conf)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return strings.TrimSpace(stdout.String() + stderr.String()), err
	}
	return strings.TrimSpace(stdout.String()), nil
}

// run runs podman with args and stops the test if it fails.
func (p *podman) run(args ...string) string {
	p.t.Helper()
	out, err := p.output(args...)
	if err != nil {
		p.t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// buildImage builds a static, version-stamped outboxd as the Containerfile
// says, and the image from it; it returns the image's name, removed at
// cleanup.
func buildImage(t *testing.T, pm *podman, name, version string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	certs, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca-certificates.crt"), certs, 0o644); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, "outboxd"),
		"-ldflags", "-X github.com/outboxd/outbox/cmd/outboxd/internal/cli.stampedVersion="+version, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	image := "localhost/" + name + ":test"
	t.Cleanup(func() { _, _ = pm.output("rmi", "-f", image) })
	pm.run("build", "--format", "docker", "-f", "../../Containerfile", "-t", image, dir)
	return image
}

// TestImageDeliversAndKeepsEventsAcrossAKilledContainer builds the image,
// runs it with a named volume for its database, and checks what a user of
// the image relies on: events reach a receiver on the host, and events
// still pending when the container is killed are delivered by a new
// container on the same volume.
func TestImageDeliversAndKeepsEventsAcrossAKilledContainer(t *testing.T) {
	pm := newPodman(t)
	name := "outboxd-imagetest-" + strings.ToLower(rand.Text()[:8])
	image := buildImage(t, pm, name, "v0.0.0-imagetest")
	if out := pm.run("run", "--rm", image, "version"); !strings.HasPrefix(out, "outboxd v0.0.0-imagetest ") {
		t.Fatalf("outboxd version in the image: %q", out)
	}
	volume := name + "-data"
	t.Cleanup(func() { _, _ = pm.output("volume", "rm", "-f", volume) })

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rc := receiver{testkit.NewReceiverOn(t, l, "webhook-id", nil)}
	hookAddr := l.Addr().String()
	apiAddr := testkit.FreeAddr(t)
	token := rand.Text() // 26 characters: over the 16 bytes a token needs
	env := []string{
		"OUTBOXD_LISTEN=0.0.0.0:" + apiAddr[strings.LastIndexByte(apiAddr, ':')+1:],
		"OUTBOXD_TOKEN=" + token,
		"OUTBOXD_ENDPOINTS=hook=http://" + hookAddr + "/hook,secret=" + testSecret + ",allow-private",
		"OUTBOXD_INTERVAL=100ms", "OUTBOXD_BACKOFF_INITIAL=100ms", "OUTBOXD_BACKOFF_MAX=500ms",
	}
	api := "http://" + apiAddr
	first := startContainer(t, pm, image, name+"-1", volume, env, api)

	post := func(id string) {
		t.Helper()
		body := fmt.Sprintf(`{"id":%q,"destination":"hook","payload":{"n":1}}`, id)
		if code, m := call(t, http.MethodPost, api+"/v1/events", token, body); code != http.StatusAccepted {
			t.Fatalf("POST %s: %d %v", id, code, m)
		}
	}
	post("img-0")
	testkit.WaitFor(t, 30*time.Second, "img-0 delivered to the receiver on the host", func() bool {
		return rc.ackedCount("img-0") > 0
	})

	rc.Close() // the receiver goes away: what follows stays pending
	ids := []string{"img-1", "img-2", "img-3", "img-4", "img-5"}
	for _, id := range ids {
		post(id)
	}
	pm.run("kill", first)

	l, err = net.Listen("tcp", hookAddr)
	if err != nil {
		t.Fatal(err)
	}
	back := receiver{testkit.NewReceiverOn(t, l, "webhook-id", nil)}
	second := startContainer(t, pm, image, name+"-2", volume, env, api)
	testkit.WaitFor(t, 60*time.Second, "every pending event delivered after the restart", func() bool {
		return len(back.missing(ids)) == 0
	})
	if out, err := pm.output("healthcheck", "run", second); err != nil {
		t.Errorf("the image's HEALTHCHECK fails: %v\n%s", err, out)
	}
}

// startContainer runs image detached as a container called name, on the
// host's network with volume at /data and env, waits until its API at api
// answers /healthz, and removes it at cleanup (logging its output when the
// test failed).
func startContainer(t *testing.T, pm *podman, image, name, volume string, env []string, api string) string {
	t.Helper()
	args := []string{"run", "-d", "--name", name, "--network", "host", "-v", volume + ":/data"}
	for _, kv := range env {
		args = append(args, "-e", kv)
	}
	if out, err := pm.output(append(args, image)...); err != nil {
		unavailable(t, "podman cannot run the container: "+out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := pm.output("logs", name)
			t.Logf("%s log:\n%s", name, out)
		}
		_, _ = pm.output("rm", "-f", "-t", "0", name)
	})
	testkit.WaitFor(t, 30*time.Second, name+" answering /healthz", func() bool {
		resp, err := client.Get(api + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return name
}
