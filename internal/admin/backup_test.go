package admin

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/internal/adminapi"
	"github.com/writeonce/wo/runtime"
)

// GET /admin/backup of a one-member database: the file verifies (length,
// version, checksum), stale or not; a bad stale value is 400; a database
// that takes no backups is 501.
func TestBackupRoute(t *testing.T) {
	dir := t.TempDir()
	_, url, stop := serveOpen(t, Options{}, func(f *runtime.Fiber) (DB, func()) {
		db, err := dbowner.Open(f, dbowner.Options{Dir: dir})
		if err != nil {
			t.Error(err)
			return nil, func() {}
		}
		return db, func() { db.Close(f) }
	})
	defer stop()
	defer http.DefaultClient.CloseIdleConnections()
	c := &adminapi.Client{Base: url}
	for _, stale := range []bool{false, true} {
		var buf bytes.Buffer
		n, err := c.Backup(context.Background(), &buf, stale)
		if err != nil || n != int64(buf.Len()) {
			t.Fatalf("backup (stale %v): %d %v", stale, n, err)
		}
		file := filepath.Join(t.TempDir(), "b")
		os.WriteFile(file, buf.Bytes(), 0o600)
		if h, _, err := dbowner.VerifyBackup(file); err != nil || h.Index == 0 || len(h.Voters) != 1 {
			t.Errorf("the backup (stale %v): %+v %v", stale, h, err)
		}
	}
	if code, _, body := raw(t, "GET", url+adminapi.PathBackup+"?stale=maybe", "", ""); code != 400 || !strings.Contains(body, "stale") {
		t.Errorf("stale=maybe: %d %s", code, body)
	}

	_, furl, fstop := serve(t, Options{}, newFake())
	defer fstop()
	if code, _, body := raw(t, "GET", furl+adminapi.PathBackup, "", ""); code != 501 {
		t.Errorf("a database without backups: %d %s", code, body)
	}
}
