package admin

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/runtime"
)

// BackupDB is what GET /admin/backup needs of the database: *dbowner.DB.
// A DB without it answers 501.
type BackupDB interface {
	Backup(f *runtime.Fiber) (dbowner.Backup, error)
	Stale() *dbowner.DB
}

// backupTimeout bounds a backup's capture and serialization (the ReadIndex
// round inside is bounded by cluster.request_timeout): a large state takes
// far longer to serialize than a membership change takes to commit.
const backupTimeout = 10 * time.Minute

var errNoBackup = errors.New("this database does not take backups")

// backup runs on the bridge's fiber.
func backup(f *runtime.Fiber, db DB, stale bool) (dbowner.Backup, error) {
	bdb, ok := db.(BackupDB)
	if !ok {
		return dbowner.Backup{}, errNoBackup
	}
	if stale {
		return bdb.Stale().Backup(f)
	}
	return bdb.Backup(f)
}

// getBackup is GET /admin/backup[?stale=true]: the backup file
// (dbowner.Backup.WriteTo), with its length and raft point in the headers.
// Without stale, the state is at a ReadIndex point (a quorum confirms it:
// every write acknowledged before the request is in it); stale takes this
// member's applied state as it is, for a member that lost its quorum.
func (s *Server) getBackup(w http.ResponseWriter, r *http.Request) {
	stale := false
	if v := r.URL.Query().Get("stale"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("stale=%q: want true or false", v))
			return
		}
		stale = b
	}
	ans, err := s.callWithin(r.Context(), call{op: opBackup, stale: stale}, max(backupTimeout, s.opts.Timeout))
	if err == nil {
		err = ans.err
	}
	if errors.Is(err, errNoBackup) {
		writeError(w, http.StatusNotImplemented, err.Error())
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	b := ans.backup
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.FormatInt(b.Size(), 10))
	h.Set("X-Wo-Backup-Index", strconv.FormatUint(b.Header.Index, 10))
	h.Set("X-Wo-Backup-Term", strconv.FormatUint(b.Header.Term, 10))
	if n := len(b.Header.Partitions); n > 0 {
		h.Set("X-Wo-Backup-Partitions", strconv.Itoa(n))
	}
	w.WriteHeader(http.StatusOK)
	if _, err := b.WriteTo(w); err != nil {
		// The client sees a short body (Content-Length): nothing to answer.
		s.log.WarnContext(r.Context(), "admin: backup stream cut", "point", b.Header.Point(), "err", err)
		return
	}
	s.log.InfoContext(r.Context(), "admin: backup sent", "point", b.Header.Point(), "bytes", b.Size(), "stale", stale)
}
