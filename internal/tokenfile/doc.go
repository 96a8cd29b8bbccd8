// Package tokenfile is the worker's bearer tokens: auth.token_file (the data
// plane and the ops port's /debug endpoints) and admin.token_file (the admin
// API), one type for both, and the file format internal/adminapi specifies.
//
// # Format
//
// One or more tokens, one per line. Blank lines and lines whose first
// non-blank character is # are ignored; the whitespace around a token is
// dropped. A token may not hold whitespace or control characters (a file
// with one is refused, naming the line: never a token silently cut in
// two). A file with no token is refused: an empty set would otherwise mean
// that no request is let in, or, worse, read as "no auth".
//
// # Rotation
//
// Any token of the set is accepted, so a token is rotated without a restart
// and without a moment where a client is refused: write the new token
// beside the old one, move the clients to it, remove the old line. The file
// is read again when it changes (its fileid.ID: a Kubernetes Secret volume
// swaps a symlink; an editor rewrites in place). Tokens looks at the file at
// most once a second (Interval), on the request that comes due: a time
// check per request, a stat per second, a read only when the file changed.
// The look is one stat (and, when changed, one small read) on the calling
// goroutine or shard, made by one caller while the others go on with the
// set they have.
//
// A file that cannot be read again, or that no longer parses (caught
// between two writes, emptied, removed), keeps the set loaded last and logs
// once until the file is good again: a broken rotation must not open the
// door, and must not lock every client out either.
//
// Tokens are compared in constant time: the presented token's SHA-256
// against each token's, every token looked at whichever matches.
package tokenfile
