package sendcheck_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/writeonce/wo/analysis/sendcheck"
)

func TestMessageTypes(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), sendcheck.Analyzer, "chat")
}

func TestUseAfterSend(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), sendcheck.Analyzer, "move")
}

func TestShardSafeDirective(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), sendcheck.Analyzer, "uses")
}
