package tokens_test

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/writeonce/wo/internal/operator/tokens"
)

// Halfway through a rotation the file holds the new token beside the old,
// and the operator still calls with the old one: what it reads back from
// the Secret is all a restarted operator has.
func ExampleState() {
	st := tokens.State{Tokens: []string{"new", "old"}, Phase: tokens.PhaseTrusted, Issued: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
	var s corev1.Secret
	st.Write(&s)
	fmt.Printf("file %q\n", s.Data["token"])
	back, err := tokens.Parse(&s)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("phase", back.Phase, "calls with", back.Use())
	// Output:
	// file "new\nold\n"
	// phase trusted calls with old
}
