package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/internal/adminapi"
	"github.com/writeonce/wo/replication/identity"
)

// subcommand runs "worker backup" or "worker restore" (etcdctl snapshot
// save / etcdutl snapshot restore); ok is false for any other first
// argument, which is the worker's own command line.
func subcommand(args []string, stdout, stderr io.Writer) (code int, ok bool) {
	if len(args) == 0 {
		return 0, false
	}
	switch args[0] {
	case "backup":
		return runBackup(args[1:], stdout, stderr), true
	case "restore":
		return runRestore(args[1:], stdout, stderr), true
	}
	return 0, false
}

// runBackup is "worker backup --from http://OPS --out FILE": the member's
// backup (GET /admin/backup) streamed to FILE.part, verified (length,
// format, SHA-256), fsynced and only then renamed to FILE. An interrupted
// backup leaves no FILE; the .part it may leave is refused by restore.
func runBackup(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("worker backup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	from := fs.String("from", "", "the member's ops address, http://HOST:PORT (required)")
	out := fs.String("out", "", "the backup file to write (required; FILE.part until verified)")
	tokenFile := fs.String("token-file", "", "a file holding the admin API's bearer token (admin.token_file's format; the first token is used)")
	stale := fs.Bool("stale", false, "take the member's applied state without a quorum's ReadIndex (a member of a group that lost its quorum)")
	timeout := fs.Duration("timeout", 30*time.Minute, "bound on the whole backup")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *from == "" || *out == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "worker backup: --from and --out are required, and nothing else")
		return 2
	}
	token, err := firstToken(*tokenFile)
	if err != nil {
		fmt.Fprintln(stderr, "worker backup:", err)
		return 2
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, *timeout)
	defer cancelT()
	h, n, err := backupTo(ctx, &adminapi.Client{Base: *from, Token: token}, *out, *stale)
	if err != nil {
		fmt.Fprintln(stderr, "worker backup:", err)
		return 1
	}
	fmt.Fprintf(stdout, "backup %s: %d bytes, %s, from member %x (voters %x), sha256 verified\n",
		*out, n, h.Point(), h.Member, h.Voters)
	return 0
}

// backupTo writes the backup to out via out.part.
func backupTo(ctx context.Context, c *adminapi.Client, out string, stale bool) (dbowner.BackupHeader, int64, error) {
	part := out + ".part"
	f, err := os.OpenFile(part, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return dbowner.BackupHeader{}, 0, err
	}
	fail := func(err error) (dbowner.BackupHeader, int64, error) {
		f.Close()
		os.Remove(part)
		return dbowner.BackupHeader{}, 0, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	n, err := c.Backup(ctx, w, stale)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		return fail(err)
	}
	h, _, err := dbowner.VerifyBackup(part)
	if err != nil {
		os.Remove(part)
		return dbowner.BackupHeader{}, 0, err
	}
	if err := os.Rename(part, out); err != nil {
		return dbowner.BackupHeader{}, 0, err
	}
	return h, n, nil
}

// firstToken is the first token of a token file ("" for no file).
func firstToken(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	for line := range strings.Lines(string(b)) {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
			return t, nil
		}
	}
	return "", fmt.Errorf("--token-file %s: no token in it", path)
}

// runRestore is "worker restore --from FILE --data-dir DIR [--ordinal N]
// [--peer-addr ADDR]": the backup verified first, then a fresh data dir for
// a new one-member group: member.id of ordinal N, incarnation 1 (the ID a
// new group's member N has), the WAL's snapshot the backup's state.
func runRestore(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("worker restore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	from := fs.String("from", "", "the backup file (required)")
	dir := fs.String("data-dir", "", "the data dir to create; empty or missing (required)")
	ord := fs.Int("ordinal", 0, "the ordinal of the worker that will start on the dir (cluster.ordinal; a pod's -N)")
	peerAddr := fs.String("peer-addr", "", "its peer address (peer.addr) when it is to grow into a group; empty for a single worker")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *from == "" || *dir == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "worker restore: --from and --data-dir are required, and nothing else")
		return 2
	}
	if *ord < 0 || *ord > identity.MaxOrdinal {
		fmt.Fprintf(stderr, "worker restore: --ordinal %d out of range 0..%d\n", *ord, identity.MaxOrdinal)
		return 2
	}
	// The identity a new group's member of ordinal ord bootstraps with:
	// members that join find it by cluster.peers (ordinal -> address).
	// What keeps it out of the old group is the new group's cluster ID
	// (cluster.peers) and its one-member ConfState (docs/operations.md).
	now := time.Now()
	want := identity.Member{Ordinal: *ord, Incarnation: identity.BootstrapIncarnation}
	h, err := dbowner.RestoreBackup(*from, *dir, want.ID(), *peerAddr, func(tmp string) error {
		m, _, err := identity.Ensure(tmp, *ord, true, now)
		if err == nil && m.ID() != want.ID() {
			err = fmt.Errorf("member.id: %s, expected %s", m, want)
		}
		return err
	})
	if err != nil {
		fmt.Fprintln(stderr, "worker restore:", err)
		if errors.Is(err, dbowner.ErrDirNotEmpty) {
			return 2
		}
		return 1
	}
	fmt.Fprintf(stdout, "restored %s into %s: %s, a new one-member group of member %s\n", *from, *dir, h.Point(), want)
	return 0
}
