package dbowner

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/writeonce/wo/runtime"
)

// TestOffloadLowRunsOnANicedThreadOfItsOwn: a snapshot's serialization
// runs at nice backgroundNice on a thread that is neither the shard's nor
// given back to Go afterwards (its priority could not be raised again),
// while plain offload leaves the priority alone.
func TestOffloadLowRunsOnANicedThreadOfItsOwn(t *testing.T) {
	var shardTid, lowTid, lowNice, plainNice int
	var lowErr, plainErr error
	runtime.Run(runtime.Config{Shards: 1}, func(f *runtime.Fiber) int {
		shardTid = unix.Gettid()
		if err := offloadLow(f, func() error {
			lowTid = unix.Gettid()
			lowNice, lowErr = threadNice()
			return nil
		}); err != nil {
			t.Error(err)
		}
		if err := offload(f, func() error {
			plainNice, plainErr = threadNice()
			return nil
		}); err != nil {
			t.Error(err)
		}
		return 0
	})
	if lowErr != nil || plainErr != nil {
		t.Fatal(lowErr, plainErr)
	}
	if lowTid == shardTid {
		t.Fatalf("offloadLow ran on the shard's thread %d", shardTid)
	}
	if lowNice != backgroundNice {
		t.Errorf("offloadLow ran at nice %d, want %d", lowNice, backgroundNice)
	}
	if plainNice == backgroundNice {
		t.Errorf("offload ran at nice %d: a niced thread went back to Go's pool", plainNice)
	}
	// Go ends the thread just after the goroutine exits, which is after
	// the answer: wait for it, bounded. Unless the goroutine ran on the
	// process's main thread: Go never ends that one, it parks it for good
	// (runtime.mexit: "This is the main thread. Just wedge it."), and a
	// thread that runs no Go code again holds nothing at any priority.
	if lowTid == os.Getpid() {
		t.Logf("offloadLow ran on the main thread %d, which Go parks instead of ending", lowTid)
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(lowTid)); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("offloadLow's thread %d outlived its work", lowTid)
		}
		time.Sleep(time.Millisecond)
	}
}

// threadNice reads the calling thread's nice value (field 19 of its stat).
func threadNice() (int, error) {
	b, err := os.ReadFile("/proc/thread-self/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return strconv.Atoi(fields[16])
}
