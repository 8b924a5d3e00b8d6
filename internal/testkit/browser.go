package testkit

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromiumNames are the executables Browser looks for, in order.
var chromiumNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// ChromiumPath returns the path of a Chromium (or Chrome) executable, ""
// when none is installed.
func ChromiumPath() string {
	for _, name := range chromiumNames {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Browser starts one headless Chromium (no sandbox, a temporary profile,
// the given window size) and returns a chromedp context of a tab in it.
// Without a Chromium the test is skipped, unless the CI environment
// variable is set: then it fails, so CI cannot pass without the browser
// tests. The browser process is killed and waited for at cleanup.
func Browser(t testing.TB, width, height int) context.Context {
	t.Helper()
	path := ChromiumPath()
	if path == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("no chromium executable found in PATH and CI is set: install Debian's chromium (apt-get install -y chromium)")
		}
		t.Skip("skipping the browser test: no chromium executable found in PATH (apt-get install -y chromium)")
	}
	profile, err := os.MkdirTemp("", "chromium-profile-")
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(width, height),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc() // kills the browser and waits for it
		// Its helper processes may still write the profile for a moment
		// after the browser exited: retry the removal until they are gone.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := Poll(ctx, 20*time.Millisecond, func() (bool, error) { return os.RemoveAll(profile) == nil, nil }); err != nil {
			t.Errorf("removing the browser's profile %s: %v", profile, os.RemoveAll(profile))
		}
	})
	if err := chromedp.Run(ctx); err != nil { // starts the browser
		t.Fatalf("starting chromium (%s): %v", path, err)
	}
	return ctx
}
