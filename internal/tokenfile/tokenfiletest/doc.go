// Package tokenfiletest gives tests a token set without writing the token
// file themselves: Static writes the tokens to a file in the test's
// temporary directory and loads it with tokenfile.Load, so the set a test
// serves with is built by the code the worker runs, not by a constructor
// only tests call.
package tokenfiletest
