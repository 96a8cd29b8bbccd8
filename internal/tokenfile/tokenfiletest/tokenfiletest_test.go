package tokenfiletest_test

import (
	"testing"

	"github.com/writeonce/wo/internal/tokenfile/tokenfiletest"
)

func TestStatic(t *testing.T) {
	if tokenfiletest.Static(t) != nil || tokenfiletest.Static(t, "") != nil {
		t.Error("nil tokens are not open")
	}
	if st := tokenfiletest.Static(t, "a", "b"); !st.Allows("a") || !st.Allows("b") || st.Allows("c") || st.Refresh() {
		t.Error("a static set")
	}
}
