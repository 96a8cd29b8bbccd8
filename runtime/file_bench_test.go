package runtime

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/writeonce/wo/runtime/runtimetest"
)

// BenchmarkSyncFilesTogether: what the appends of several logs on one
// shard cost when each is made durable on its own file, against the same
// bytes appended to one file under one fdatasync (issue 27, item 3:
// "batched appends across groups on a shard sharing one fsync"). Each
// round, "separate" runs one fiber a file, each a 4 KiB WriteAtSync, all
// started in the same tick so that the shard's ring submits them together
// (what a shard's partitions, each with its own log, do); "prealloc" is
// the same on files filled with zeros and synced before the round, as the
// WAL's segments are (wal.Options.Preallocate), so that an append
// overwrites blocks the file already has and its fdatasync commits no
// metadata; "one" is one WriteAtSync of files × 4 KiB to one file (a log
// shared by them), and "one-prealloc" the same on a preallocated file. An
// op is a round: its time is the latency of a group commit of that many
// partitions. On a disk whose fdatasyncs of different files do not share
// the device flush, "separate" grows with the file count and "one" does
// not.
//
//	go test -run '^$' -bench SyncFilesTogether -benchtime 400x -count 5 ./runtime/
func BenchmarkSyncFilesTogether(b *testing.B) {
	const block = 4 << 10
	for _, n := range []int{1, 4, 16} {
		for _, mode := range []string{"separate", "prealloc", "one", "one-prealloc"} {
			b.Run(fmt.Sprintf("files=%d/%s", n, mode), func(b *testing.B) {
				dir := b.TempDir()
				bench(b, 1, func(f *Fiber) {
					count := n
					if mode == "one" || mode == "one-prealloc" {
						count = 1
					}
					files := make([]*File, count)
					for i := range files {
						fl, err := OpenFile(filepath.Join(dir, fmt.Sprintf("log%d", i)), os.O_CREATE|os.O_RDWR, 0o644)
						if err != nil {
							b.Error(err)
							return
						}
						defer fl.Close()
						files[i] = fl
					}
					buf := bytes.Repeat([]byte{'x'}, block*n/count)
					if mode == "prealloc" || mode == "one-prealloc" {
						zeros := make([]byte, len(buf)*b.N)
						for _, fl := range files {
							if err := fl.WriteAtSync(f, zeros, 0); err != nil {
								b.Error(err)
								return
							}
						}
					}
					var off int64
					var done Signal
					left := 0
					b.ResetTimer()
					cpu0 := runtimetest.CPUTime()
					for range b.N {
						left = count
						for _, fl := range files {
							Go(f, func(g *Fiber) {
								if err := fl.WriteAtSync(g, buf, off); err != nil {
									b.Error(err)
								}
								if left--; left == 0 {
									done.Notify(g)
								}
							})
						}
						done.Wait(f, 0)
						off += int64(len(buf))
					}
					b.StopTimer()
					// The process's CPU (the kernel's, mostly: on this
					// machine's virtio disk an fdatasync costs about as
					// much CPU as a round of inserts it makes durable).
					b.ReportMetric(float64((runtimetest.CPUTime()-cpu0)/time.Microsecond)/float64(b.N), "cpu-µs/op")
				})
			})
		}
	}
}
