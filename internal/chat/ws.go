package chat

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/gobwas/ws"
	"go.opentelemetry.io/otel/trace"

	"github.com/writeonce/wo/runtime"
)

// ServeWebSocket runs the JSON protocol on a connection whose HTTP upgrade
// to WebSocket is done (the 101 response written). buffered is what the
// HTTP server read past the request, if anything; the session consumes it
// before reading the socket. It returns when the connection ends; the
// caller closes c. c is a fiber connection, or TLS over one (wss).
func (s *Service) ServeWebSocket(f *runtime.Fiber, c Conn, buffered []byte) {
	s.serveWebSocket(f, c, buffered, trace.SpanContext{})
}

// serveWebSocket is ServeWebSocket whose spans link to upgrade, the HTTP
// upgrade's span (if valid).
func (s *Service) serveWebSocket(f *runtime.Fiber, c Conn, buffered []byte, upgrade trace.SpanContext) {
	ss := newSession(f, s, c, &wsCodec{})
	ss.link = upgrade
	ss.serve(buffered)
}

// wsCodec is the WebSocket transport: frames read and written by gobwas/ws
// (header parsing, checks, masking), one JSON text message per event.
// Frames are parsed from the session's buffer, never from the socket
// directly, so a read interrupted to write never splits a frame's state.
type wsCodec struct {
	rd   bytes.Reader
	frag []byte    // a fragmented text message being assembled
	op   ws.OpCode // the opcode of the message in frag
	tmp  []byte    // JSON encoding scratch
}

func (w *wsCodec) maxUnit(o *Options) int { return o.LineMax + ws.MaxHeaderSize }

var errTooBig = errors.New("frame too large")

func (w *wsCodec) consume(s *session, buf []byte) (int, error) {
	used := 0
	for !s.done && used < len(buf) {
		w.rd.Reset(buf[used:])
		h, err := ws.ReadHeader(&w.rd)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break // the rest of the header is on its way
		}
		if err != nil {
			return used, w.protocolError(s, ws.StatusProtocolError, err.Error())
		}
		state := ws.StateServerSide
		if w.frag != nil {
			state |= ws.StateFragmented
		}
		if err := ws.CheckHeader(h, state); err != nil {
			return used, w.protocolError(s, ws.StatusProtocolError, err.Error())
		}
		limit := int64(s.svc.opts.LineMax)
		if h.Length > limit || int64(len(w.frag))+h.Length > limit {
			return used, w.protocolError(s, ws.StatusMessageTooBig,
				fmt.Sprintf("message larger than %d bytes", limit))
		}
		hlen := len(buf[used:]) - w.rd.Len()
		if int64(len(buf)-used-hlen) < h.Length {
			break // the payload is on its way
		}
		payload := buf[used+hlen : used+hlen+int(h.Length)]
		used += hlen + int(h.Length)
		ws.Cipher(payload, h.Mask, 0)
		switch h.OpCode {
		case ws.OpPing:
			s.queue = append(s.queue, &wire{frame: string(appendFrame(nil, ws.OpPong, payload))})
		case ws.OpPong:
		case ws.OpClose:
			code, reason := ws.ParseCloseFrameData(payload)
			if len(payload) >= 2 {
				if err := ws.CheckCloseFrameData(code, reason); err != nil {
					return used, w.protocolError(s, ws.StatusProtocolError, err.Error())
				}
			}
			s.queue = append(s.queue, &wire{frame: string(appendFrame(nil, ws.OpClose, ws.NewCloseFrameBody(ws.StatusNormalClosure, "")))})
			s.done = true
		case ws.OpText, ws.OpBinary, ws.OpContinuation:
			if h.OpCode != ws.OpContinuation {
				w.op = h.OpCode
			}
			if !h.Fin {
				w.frag = append(w.frag, payload...)
				if w.frag == nil {
					w.frag = []byte{}
				}
				continue
			}
			msg := payload
			if w.frag != nil {
				msg = append(w.frag, payload...)
				w.frag = nil
			}
			if w.op == ws.OpBinary {
				s.input(Command{}, badInput("binary frames are not part of the protocol: send JSON text frames"))
				continue
			}
			s.input(ParseFrame(msg))
		}
	}
	return used, nil
}

// protocolError queues a close frame with code and returns the error that
// ends the session (also sent to the client as a JSON error first).
func (w *wsCodec) protocolError(s *session, code ws.StatusCode, reason string) error {
	s.svc.stats.badInput.Add(1)
	s.queueLocal(Event{Kind: EvError, Text: "websocket: " + reason + "; disconnecting", Fatal: true})
	if len(reason) > 100 {
		reason = reason[:100]
	}
	s.queue = append(s.queue, &wire{frame: string(appendFrame(nil, ws.OpClose, ws.NewCloseFrameBody(code, reason)))})
	s.done = true
	return errProtocol
}

var errProtocol = errors.New("websocket protocol error")

func (w *wsCodec) encode(ev Event) *wire {
	w.tmp = ev.AppendJSON(w.tmp[:0])
	f := &wire{fatal: ev.Fatal, frame: string(appendFrame(nil, ws.OpText, w.tmp))}
	if cap(w.tmp) > 16<<10 {
		w.tmp = nil
	}
	return f
}

func (w *wsCodec) bytes(f *wire) string { return f.frame }

func (w *wsCodec) transport() string { return "websocket" }

// appendFrame appends one unmasked, final frame (the server's kind).
func appendFrame(b []byte, op ws.OpCode, payload []byte) []byte {
	h := ws.Header{Fin: true, OpCode: op, Length: int64(len(payload))}
	var hb [ws.MaxHeaderSize]byte
	w := sliceWriter{hb[:0]}
	if err := ws.WriteHeader(&w, h); err != nil { // a slice does not fail
		panic("chat: websocket header: " + err.Error())
	}
	b = append(b, w.b...)
	return append(b, payload...)
}

type sliceWriter struct{ b []byte }

func (w *sliceWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}
