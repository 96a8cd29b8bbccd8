package wal

import (
	"errors"
	"fmt"
)

// ReadSnapshot returns the body of the log's snapshot (the one SnapshotLSN
// names), read from its file and checked as recovery checks it. The caller
// keeps no copy of a snapshot it has written: it reads it back in the rare
// case it is needed again (a follower too far behind for entries), so the
// memory of a database holds its state once, not twice.
func (l *Log) ReadSnapshot() ([]byte, error) {
	lsn := l.snapLSN
	if lsn == 0 {
		return nil, errors.New("wal: read snapshot: the log has none")
	}
	name := l.path(snapName(lsn))
	b, err := l.fs.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("wal: read snapshot %s: %w", name, err)
	}
	got, body, err := parseSnapshot(b)
	if err == nil && got != lsn {
		err = fmt.Errorf("covers LSN %d, name says %d", got, lsn)
	}
	if err != nil {
		return nil, fmt.Errorf("wal: read snapshot %s: %w", name, err)
	}
	return body, nil
}
