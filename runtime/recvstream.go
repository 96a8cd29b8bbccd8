package runtime

import (
	"golang.org/x/sys/unix"

	"github.com/writeonce/wo/iobackend"
)

// Multishot receive: on a backend that has it (io_uring on Linux 6.0+,
// iobackend.AsMultishot), a connection's first Read arms one multishot RECV
// that stays in the kernel for as long as data flows. Each chunk lands in a
// buffer of the backend's provided buffer ring and its completion is queued
// on the connection's recvStream; Read copies out of the oldest chunk and
// gives the buffer back only once every byte of it has been read (a short
// Read leaves the rest for the next). One submission serves every message
// of a connection where one-shot Recv costs one per message, plus the
// kernel's internal poll arm and teardown each time.
//
// The multishot ends when the kernel posts a completion without More:
//
//   - EOF (0) or an error: the stream has ended, and once the queued bytes
//     are read every Read reports it;
//   - -ENOBUFS: every buffer of the shard is out (thousands of connections
//     readable at once, or readers that do not read). The bytes stay in
//     the socket; the next Read is a one-shot Recv into the caller's buffer,
//     which always makes progress, and the Read after it arms again;
//   - data without More (the kernel disarmed it, e.g. on CQ overflow), or
//     -ECANCELED: the next Read arms again.
//
// The slot (and so the token) of a multishot stays taken until its last
// completion: a completion can never reach a slot that has been reused,
// and the token's generation (io.go) covers the completion of a slot freed
// and taken again in the same batch. Close cancels the multishot and hands
// the queued buffers back; buffers of completions that arrive after the
// close go straight back to the ring.

// recvChunk is a filled buffer not yet read: n bytes of buffer id, of which
// off have been read.
type recvChunk struct {
	id     uint16
	off, n int32
}

// recvStream is a connection's multishot receive.
type recvStream struct {
	nfd    *netFD
	tok    uint64 // token of the armed multishot, 0 when none
	slot   int32
	chunks []recvChunk // filled buffers, oldest first, from head on
	head   int
	// ended is set by a last completion of EOF (endRes 0) or an error
	// (endRes < 0): the stream is over once chunks are read.
	ended  bool
	endRes int32
	// noBufs: the last multishot ended with -ENOBUFS, so the next Read is
	// a one-shot Recv.
	noBufs bool
	waiter *Fiber // the fiber parked in Read, nil when none
}

// streamCompletion queues one completion of rs's multishot and wakes its
// reader.
func (sh *shard) streamCompletion(slot int32, rs *recvStream, c iobackend.Completion) {
	if id, ok := c.Buffer(); ok {
		if c.Res > 0 && !rs.nfd.closed {
			rs.chunks = append(rs.chunks, recvChunk{id: id, n: c.Res})
		} else {
			sh.ms.ReleaseRecvBuffer(id)
		}
	}
	if !c.More() {
		rs.tok = 0
		sh.io.put(slot)
		switch {
		case c.Res == -int32(unix.ENOBUFS):
			rs.noBufs = true
		case c.Res > 0, c.Res == -int32(unix.ECANCELED):
			// Disarmed with data, or cancelled (Close; the next Read
			// sees closed): arm again if read again.
		default:
			rs.ended, rs.endRes = true, c.Res
		}
	}
	if rs.waiter != nil {
		sh.ready(rs.waiter)
	}
}

// readStream is Read on a multishot backend: the bytes of queued chunks, or
// the stream's end, parking f until one of them is there.
func (nfd *netFD) readStream(f *Fiber, p []byte) int32 {
	sh := nfd.sh
	rs := nfd.rs
	if rs == nil {
		rs = &recvStream{nfd: nfd}
		nfd.rs = rs
	}
	d := &nfd.r
	for {
		// A passed deadline wins over queued bytes, as on the one-shot
		// path (do) and in package net; the bytes stay for the next Read.
		switch {
		case nfd.closed:
			return -int32(unix.ECANCELED)
		case d.when != 0 && sh.rt.now() >= d.when:
			return resTimedOut
		case d.woken:
			d.woken = false
			return resWoken
		case rs.head < len(rs.chunks):
			return rs.copyOut(sh.ms, p)
		case rs.ended:
			return rs.endRes
		case f.unwinding:
			return -int32(unix.ECANCELED)
		}
		if rs.tok == 0 {
			if rs.noBufs {
				rs.noBufs = false
				return nfd.do(f, d, sockRecv, p)
			}
			t := sh.io.getStream(rs)
			if res, done := sh.ms.RecvMultishot(nfd.fd, t.tok); done {
				sh.io.put(t.slot)
				return res
			}
			rs.tok, rs.slot = t.tok, t.slot
		}
		rs.waiter = f
		if d.when != 0 {
			nfd.armDeadline(d)
		}
		f.park()
		rs.waiter = nil
	}
}

// copyOut copies from the oldest chunks into p and releases every buffer it
// emptied.
func (rs *recvStream) copyOut(ms iobackend.MultishotRecver, p []byte) int32 {
	n := 0
	for n < len(p) && rs.head < len(rs.chunks) {
		c := &rs.chunks[rs.head]
		k := copy(p[n:], ms.RecvBuffer(c.id, int(c.n))[c.off:])
		n += k
		c.off += int32(k)
		if c.off == c.n {
			ms.ReleaseRecvBuffer(c.id)
			rs.head++
		}
	}
	if rs.head == len(rs.chunks) {
		rs.chunks, rs.head = rs.chunks[:0], 0
	}
	return int32(n)
}

// close cancels the multishot and gives the queued buffers back. The
// multishot's slot stays taken until its last completion arrives.
func (rs *recvStream) close(sh *shard) {
	if rs.tok != 0 {
		_ = sh.be.Cancel(rs.tok)
	}
	for _, c := range rs.chunks[rs.head:] {
		sh.ms.ReleaseRecvBuffer(c.id)
	}
	rs.chunks, rs.head = nil, 0
}
