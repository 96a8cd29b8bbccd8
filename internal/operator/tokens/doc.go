// Package tokens is the admin API token of a Worker and the state of its
// rotation. Everything the rotation knows is in the Secret NAME-admin-token:
// the file the pods mount (key "token", one token a line, newest first, the
// worker accepts any: adminapi's contract) and three annotations (the phase,
// when the newest token was made, and the Worker's rotate annotation value
// last acted on). The operator keeps nothing in memory, so one restarted in
// the middle of a rotation reads the phase back and continues.
//
// A rotation goes through two phases and ends in a third step:
//
//	trusted  the file is "new\nold"; the operator still calls with old,
//	         because the kubelet updates a mounted Secret with a delay (up
//	         to a minute or two) and a pod may not know new yet;
//	in-use   every running pod answered GET /admin/cluster with new: the
//	         operator calls with new;
//	(done)   the file is "new" alone.
//
// A pod that does not answer holds the phase (it might still have an old
// file); one that refuses both tokens is reported by an event, and the old
// token stays until it accepts the new one. This package is pure: the
// reconciler asks the pods and writes the Secret.
package tokens
