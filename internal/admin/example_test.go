package admin_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/writeonce/wo/internal/admin"
	"github.com/writeonce/wo/internal/adminapi"
	"github.com/writeonce/wo/internal/tokenfile"
)

// The worker mounts the admin API under /admin/ on its ops port and
// attaches the database once it is open (admin.Server.Attach, from main's
// fiber); until then every route answers 503.
func Example() {
	adm := admin.New(admin.Options{Tokens: tokenfile.Static("s3cret")})
	mux := http.NewServeMux()
	mux.Handle("/admin/", adm)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	c := &adminapi.Client{Base: srv.URL, Token: "s3cret"}
	_, err := c.Cluster(context.Background())
	var se *adminapi.StatusError
	if errors.As(err, &se) {
		fmt.Println(se.Code, se.Message)
	}
	// Output:
	// 503 starting: the database is not open yet (recovering its log)
}
