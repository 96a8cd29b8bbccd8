package admin_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/writeonce/wo/internal/admin"
	"github.com/writeonce/wo/internal/adminapi"
	"github.com/writeonce/wo/internal/tokenfile"
)

// The worker mounts the admin API under /admin/ on its ops port, behind
// the tokens of admin.token_file, and attaches the database once it is open
// (admin.Server.Attach, from main's fiber); until then every route answers
// 503.
func Example() {
	dir, err := os.MkdirTemp("", "admin-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "admin-token")
	if err := os.WriteFile(path, []byte("s3cret\n"), 0o600); err != nil {
		fmt.Println(err)
		return
	}
	tokens, err := tokenfile.Load("admin.token_file", path, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	adm := admin.New(admin.Options{Tokens: tokens})
	mux := http.NewServeMux()
	mux.Handle("/admin/", adm)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	c := &adminapi.Client{Base: srv.URL, Token: "s3cret"}
	_, err = c.Cluster(context.Background())
	var se *adminapi.StatusError
	if errors.As(err, &se) {
		fmt.Println(se.Code, se.Message)
	}
	// Output:
	// 503 starting: the database is not open yet (recovering its log)
}
