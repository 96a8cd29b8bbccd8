package admin

import "errors"

// The database's errors the API maps onto statuses (statusOf). They are
// the sentinels of dbowner and replication/node; until branch r3-core lands
// they are local stand-ins with the same meaning.
var (
	errUnknownMember = errors.New("node: unknown member")                               // 404
	errConflict      = errors.New("node: the membership change conflicts")              // 409
	errNoQuorum      = errors.New("dbowner: no quorum")                                 // 503
	errJoining       = errors.New("dbowner: joining: waiting to be added to the group") // 503
	errRemoved       = errors.New("dbowner: this member was removed from the group")    // 503
)
