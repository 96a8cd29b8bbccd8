package dirlock

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Name is the lock file's name inside the directory.
const Name = "LOCK"

// ErrLocked is wrapped by the error Lock returns when another process (or
// another Lock in this one) holds the directory.
var ErrLocked = errors.New("dirlock: the data directory is in use by another process")

// HeldError is Lock's error when the directory is held: it names the
// directory and the holder's pid as the lock file says (0 when the file
// could not be read, e.g. the holder had not written it yet).
type HeldError struct {
	Dir string
	PID int
	// Draining: the holder said it is stopping (MarkDraining), so the lock
	// is about to be free; AcquireWait waits for such a holder.
	Draining bool
}

func (e *HeldError) Error() string {
	holder := "another process (pid unknown)"
	if e.PID > 0 {
		holder = "pid " + strconv.Itoa(e.PID)
	}
	if e.Draining {
		holder += ", draining"
	}
	return fmt.Sprintf("data directory %s is locked by %s (%s): one process per data directory; stop that one first", e.Dir, holder, filepath.Join(e.Dir, Name))
}

func (e *HeldError) Unwrap() error { return ErrLocked }

// Lock is a held directory lock. Its zero value is not useful.
//
// It holds a raw descriptor, not an *os.File: an *os.File that becomes
// unreachable is closed by its finalizer, which would drop the lock in the
// middle of the process's life.
type Lock struct {
	fd  int
	dir string
}

// Acquire takes the exclusive lock on dir, which must exist, without
// waiting: if another process holds it, the error is a *HeldError
// (errors.Is ErrLocked). On success the lock file holds this process's
// pid, and the lock lasts until the process's end (the tests release it:
// export_test.go).
func Acquire(dir string) (*Lock, error) {
	path := filepath.Join(dir, Name)
	// No O_TRUNC: truncating before the lock is ours would wipe the
	// holder's pid. O_CLOEXEC: a child process must not inherit the lock.
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("dirlock: open %s: %w", path, err)
	}
	if err := flock(fd); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EWOULDBLOCK) {
			pid, draining := readHolder(path)
			return nil, &HeldError{Dir: dir, PID: pid, Draining: draining}
		}
		return nil, fmt.Errorf("dirlock: flock %s: %w", path, err)
	}
	// Ours now: say who holds it. A directory where a 10-byte write fails
	// is no place to start a database in either, so a failure refuses.
	if err := writeHolder(fd, ""); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("dirlock: write pid to %s: %w", path, err)
	}
	return &Lock{fd: fd, dir: dir}, nil
}

// flock takes the exclusive lock without blocking, retrying EINTR.
func flock(fd int) error {
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err != unix.EINTR {
			return err
		}
	}
}

// drainingWord follows the pid in the lock file of a holder that is
// stopping: "1234 draining".
const drainingWord = "draining"

// writeHolder writes this process's pid, and state if not empty, as the
// lock file's one line.
func writeHolder(fd int, state string) error {
	if err := unix.Ftruncate(fd, 0); err != nil {
		return err
	}
	line := strconv.Itoa(os.Getpid())
	if state != "" {
		line += " " + state
	}
	b := []byte(line + "\n")
	n, err := unix.Pwrite(fd, b, 0)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	return err
}

// readHolder reads the holder's pid (0 if it cannot) and whether it said
// it is draining from the lock file.
func readHolder(path string) (pid int, draining bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 0, false
	}
	pid, err = strconv.Atoi(fields[0])
	if err != nil || pid <= 0 {
		pid = 0
	}
	return pid, len(fields) > 1 && fields[1] == drainingWord
}

// AcquireWait is Acquire that, when the holder has said it is draining
// (MarkDraining), waits up to wait for it to go, calling waiting once
// first (to log it). A holder that is not draining is refused at once, as
// by Acquire: a second process on a directory is a mistake, while a new
// process started during the old one's drain (a restart) is not.
func AcquireWait(dir string, wait time.Duration, waiting func(*HeldError)) (*Lock, error) {
	deadline := time.Now().Add(wait)
	told := false
	for {
		l, err := Acquire(dir)
		var held *HeldError
		if err == nil || !errors.As(err, &held) || !held.Draining || !time.Now().Before(deadline) {
			return l, err
		}
		if !told && waiting != nil {
			waiting(held)
			told = true
		}
		time.Sleep(pollEvery)
	}
}

// pollEvery is how often AcquireWait tries again: flock has no timed wait,
// and a blocking flock could not be given up at the deadline.
const pollEvery = 20 * time.Millisecond

// MarkDraining says in the lock file that this holder is stopping, so
// that a process started now (AcquireWait) waits for the lock instead of
// refusing.
func (l *Lock) MarkDraining() error {
	if err := writeHolder(l.fd, drainingWord); err != nil {
		return fmt.Errorf("dirlock: mark %s draining: %w", l.dir, err)
	}
	return nil
}
