//go:build linux

package iobackend_test

import (
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/writeonce/wo/iobackend"
	"golang.org/x/sys/unix"
)

// A shard's start-up and loop in miniature: parse WO_IO, select a backend,
// open it, park a receive, and wait for its completion.
func Example() {
	mode, err := iobackend.ParseMode(os.Getenv("WO_IO"))
	if err != nil {
		fmt.Println(err)
		return
	}
	sel, err := iobackend.Select(mode)
	if err != nil {
		fmt.Println(err) // WO_IO=uring where io_uring is refused: exit non-zero
		return
	}
	// sel.Reason goes to the startup log. A backend is opened, driven and
	// closed by one OS thread, as a shard's is.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b, err := iobackend.Open(sel.Kind, iobackend.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()

	fds, _ := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])

	buf := make([]byte, 16) // referenced by the backend until the completion
	const token = 42
	res, done := b.Recv(fds[0], buf, token)
	unix.Write(fds[1], []byte("hello"))
	for !done {
		out := make([]iobackend.Completion, 8)
		n, err := b.Wait(time.Second, out)
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, c := range out[:n] {
			if c.Token == token {
				res, done = c.Res, true
			}
		}
	}
	fmt.Printf("%d bytes: %s\n", res, buf[:res])
	// Output: 5 bytes: hello
}

// A multishot receive where the backend has one (io_uring on Linux 6.0+),
// else a one-shot Recv: one submission for every chunk of the connection,
// each in a backend buffer that goes back once its bytes are used.
func ExampleAsMultishot() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	sel, err := iobackend.Select(iobackend.ModeAuto)
	if err != nil {
		fmt.Println(err)
		return
	}
	b, err := iobackend.Open(sel.Kind, iobackend.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	fds, _ := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])

	const token = 7
	m := iobackend.AsMultishot(b)
	own := make([]byte, 64) // the one-shot path's buffer
	if m != nil {
		m.RecvMultishot(fds[0], token)
	} else if res, done := b.Recv(fds[0], own, token); done {
		fmt.Println("recv:", res)
		return
	}
	unix.Write(fds[1], []byte("chunk"))
	out := make([]iobackend.Completion, 1)
	for {
		n, err := b.Wait(time.Second, out)
		if err != nil {
			fmt.Println(err)
			return
		}
		if n == 0 {
			continue
		}
		c := out[0]
		if id, ok := c.Buffer(); ok {
			fmt.Printf("%s\n", m.RecvBuffer(id, int(c.Res)))
			m.ReleaseRecvBuffer(id) // the bytes are used: the kernel may refill it
		} else {
			fmt.Printf("%s\n", own[:c.Res])
		}
		return
	}
	// Output: chunk
}
