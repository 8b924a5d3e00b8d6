package console

import (
	"context"
	"fmt"
)

// RunDemo runs demo (nil: no demo) beside an example program and returns
// when the program should shut down: ctx is done (Ctrl-C), failed delivers
// an error (a server of the program stopped; a nil channel never does), or
// the demo ended with an error or with exitAfterDemo set. A demo that ends
// cleanly without exitAfterDemo prints keepRunning and the program goes on
// until ctx or failed. The demo's context is cancelled and its goroutine
// joined before RunDemo returns, so the caller can shut down what the demo
// uses. The error is failed's, or the demo's wrapped as "demo: ...".
func (c *Console) RunDemo(ctx context.Context, failed <-chan error, demo func(context.Context) error, exitAfterDemo bool, keepRunning string) error {
	demoDone := make(chan error, 1)
	demoCtx, stopDemo := context.WithCancel(ctx)
	defer stopDemo()
	demoRunning := demo != nil
	if demoRunning {
		go func() { demoDone <- demo(demoCtx) }()
	}
	defer func() {
		stopDemo()
		if demoRunning {
			<-demoDone
		}
	}()

	interrupted := func() error {
		c.Printf("interrupted: shutting down")
		return nil
	}
	select {
	case <-ctx.Done():
		return interrupted()
	case err := <-failed:
		return err
	case err := <-demoDone:
		demoRunning = false
		switch {
		case err != nil && ctx.Err() != nil:
			return interrupted()
		case err != nil:
			return fmt.Errorf("demo: %w", err)
		case exitAfterDemo:
			c.Printf("demo complete: shutting down")
			return nil
		}
	}
	c.Printf("%s", keepRunning)
	select {
	case <-ctx.Done():
		return interrupted()
	case err := <-failed:
		return err
	}
}
