package pki_test

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/operator/pki"
)

// A Worker's CA issues pod 1 its leaf, which stays good until a third of
// its life is left.
func ExampleCA_IssueLeaf() {
	w := &wov1.Worker{ObjectMeta: metav1.ObjectMeta{Name: "chat", Namespace: "apps"}}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ca, err := pki.NewCA(w, now)
	if err != nil {
		fmt.Println(err)
		return
	}
	cert, key, err := ca.IssueLeaf(w, 1, now, pki.DefaultPeerCertValidity)
	if err != nil {
		fmt.Println(err)
		return
	}
	certKey, keyKey := pki.LeafKeys(w, 1)
	fmt.Println("secret keys:", certKey, keyKey)
	for _, days := range []int{0, 59, 61} {
		need, why := pki.LeafNeedsRenewal(ca, w, 1, cert, key, now.Add(time.Duration(days)*24*time.Hour))
		fmt.Printf("day %d: renew %t", days, need)
		if need {
			fmt.Print(": ", why)
		}
		fmt.Println()
	}
	// Output:
	// secret keys: chat-1.crt chat-1.key
	// day 0: renew false
	// day 59: renew false
	// day 61: renew true: expires 2026-04-01T00:00:00Z, a third of its life left
}
