package admin

import (
	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/replication/node"
)

// The database's errors the API maps onto statuses (statusOf).
var (
	errUnknownMember = node.ErrUnknownMember // 404
	errConflict      = node.ErrConflict      // 409
	errNoQuorum      = dbowner.ErrNoQuorum   // 503
	errJoining       = dbowner.ErrJoining    // 503
	errRemoved       = dbowner.ErrRemoved    // 503
)

// *dbowner.DB is what the worker attaches.
var _ DB = (*dbowner.DB)(nil)
