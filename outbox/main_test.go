package outbox_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	if os.Getenv(txChildEnv) != "" {
		os.Exit(runTxChild())
	}
	goleak.VerifyTestMain(m)
}
