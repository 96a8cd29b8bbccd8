package tlsfiles_test

import (
	"fmt"

	"github.com/writeonce/wo/internal/tlsfiles"
)

// A client port with no TLS file set serves plain TCP: OpenServer says so
// with a nil Server. A partial setting is an error naming the setting.
func ExampleOpenServer() {
	names := tlsfiles.ServerFiles{CertSetting: "tls.cert_file", KeySetting: "tls.key_file"}
	srv, err := tlsfiles.OpenServer(names, nil)
	fmt.Println(srv == nil, err)

	names.CertFile = "/etc/wo/tls/tls.crt"
	_, err = tlsfiles.OpenServer(names, nil)
	fmt.Println(err)
	// Output:
	// true <nil>
	// tlsfiles: TLS needs tls.cert_file and tls.key_file together: tls.key_file is not set
}
