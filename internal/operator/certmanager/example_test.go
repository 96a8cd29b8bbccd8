package certmanager_test

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/operator/certmanager"
)

// Without an issuerRef a Worker gets a CA of its own from cert-manager; the
// members share one Certificate.
func ExampleRender() {
	w := &wov1.Worker{ObjectMeta: metav1.ObjectMeta{Name: "chat", Namespace: "apps"}}
	for _, o := range certmanager.Render(w) {
		fmt.Println(o.GetKind(), o.GetName())
	}
	// Output:
	// Issuer chat-peer-selfsigned
	// Certificate chat-peer-ca
	// Issuer chat-peer-ca
	// Certificate chat-peer-tls
}
