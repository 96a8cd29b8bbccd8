package dbowner_test

import (
	"os"
	"os/exec"
	"testing"
)

// execSelf returns a command that runs one test of this test binary in a
// child process with extra environment.
func execSelf(t *testing.T, test string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	return cmd
}
