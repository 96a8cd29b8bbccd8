package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gobwas/ws"
)

// Limits on names, so that every line a client receives stays readable and a
// name can never dominate a message.
const (
	MaxNick = 32
	MaxRoom = 64
	// MaxHistory bounds /history N.
	MaxHistory = 500
)

// CmdKind is what a client line or frame asks for.
type CmdKind uint8

const (
	CmdSay     CmdKind = iota + 1 // a message to the current room
	CmdNick                       // /nick NAME
	CmdJoin                       // /join ROOM
	CmdLeave                      // /leave
	CmdRooms                      // /rooms
	CmdHistory                    // /history [N]
	CmdQuit                       // /quit
	CmdAuth                       // /auth TOKEN (TCP, when the server wants a token)
)

// Command is one parsed client request, the same whatever the transport.
type Command struct {
	Kind CmdKind
	Arg  string // nick, room, message text or token
	N    int    // /history: how many; 0 means the room's default
	// Since (/join, /history) asks for the messages after this seq
	// instead of the last N: what a client that saw message Since missed
	// (the web page after a reconnect). 0: not asked.
	Since uint64
}

// ErrBadInput is wrapped by every parse error; the text after it is what the
// client is told.
var ErrBadInput = errors.New("bad input")

func badInput(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadInput, fmt.Sprintf(format, args...))
}

// ParseLine parses one line of the TCP protocol (without its newline; a
// trailing CR is dropped). A line that starts with "/" is a command; "//"
// escapes a message that starts with a slash; any other line is a message.
// An empty line is a Command with Kind 0: nothing to do.
func ParseLine(line []byte) (Command, error) {
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if !utf8.Valid(line) {
		return Command{}, badInput("line is not valid UTF-8")
	}
	s := string(line)
	if strings.TrimSpace(s) == "" {
		return Command{}, nil
	}
	if !strings.HasPrefix(s, "/") {
		return say(s)
	}
	if strings.HasPrefix(s, "//") {
		return say(s[1:])
	}
	name, arg, _ := strings.Cut(s[1:], " ")
	arg = strings.TrimSpace(arg)
	return command(strings.ToLower(name), arg, arg != "")
}

// command builds the Command for a named request; hasArg says whether an
// argument was given at all (for /history, whose N is optional).
func command(name, arg string, hasArg bool) (Command, error) {
	switch name {
	case "nick":
		if err := ValidNick(arg); err != nil {
			return Command{}, err
		}
		return Command{Kind: CmdNick, Arg: arg}, nil
	case "join":
		room, err := ValidRoom(arg)
		if err != nil {
			return Command{}, err
		}
		return Command{Kind: CmdJoin, Arg: room}, nil
	case "leave", "part":
		return Command{Kind: CmdLeave}, nil
	case "rooms", "list":
		return Command{Kind: CmdRooms}, nil
	case "history":
		if !hasArg {
			return Command{Kind: CmdHistory}, nil
		}
		if rest, ok := strings.CutPrefix(arg, "since "); ok {
			since, err := parseSince(strings.TrimSpace(rest))
			if err != nil {
				return Command{}, err
			}
			return Command{Kind: CmdHistory, Since: since}, nil
		}
		n, err := strconv.Atoi(arg)
		if err != nil || n < 1 || n > MaxHistory {
			return Command{}, badInput("/history takes a count from 1 to %d, got %q", MaxHistory, clip(arg))
		}
		return Command{Kind: CmdHistory, N: n}, nil
	case "quit":
		return Command{Kind: CmdQuit}, nil
	case "auth":
		// The token is never quoted back: an error names what is wrong
		// with it, not what it is.
		if arg == "" {
			return Command{}, badInput("/auth needs the token: /auth TOKEN")
		}
		if strings.ContainsFunc(arg, isControl) || strings.ContainsRune(arg, ' ') {
			return Command{}, badInput("/auth: a token is one word without control characters")
		}
		return Command{Kind: CmdAuth, Arg: arg}, nil
	case "":
		return Command{}, badInput("empty command (a message starting with / is sent as //text)")
	}
	return Command{}, badInput("unknown command /%s (known: /nick NAME, /join ROOM, /leave, /rooms, /history [N], /quit)", clip(name))
}

// parseSince parses the seq of /history since SEQ.
func parseSince(s string) (uint64, error) {
	n, err := strconv.ParseUint(s, 10, 63)
	if err != nil || n < 1 {
		return 0, badInput("/history since takes a message number (seq) from 1, got %q", clip(s))
	}
	return n, nil
}

func say(text string) (Command, error) {
	if strings.ContainsFunc(text, isControl) {
		return Command{}, badInput("message contains control characters")
	}
	return Command{Kind: CmdSay, Arg: text}, nil
}

func isControl(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }

// ValidNick checks a nick: 1 to MaxNick letters, digits, '-', '_' or '.'.
func ValidNick(s string) error {
	if s == "" {
		return badInput("/nick needs a name")
	}
	if len(s) > MaxNick || !nameChars(s) {
		return badInput("nick %q: want 1 to %d letters, digits, '-', '_' or '.'", clip(s), MaxNick)
	}
	return nil
}

// ValidRoom checks a room name and returns it without a leading '#': 1 to
// MaxRoom letters, digits, '-', '_' or '.'. Names are case-sensitive.
func ValidRoom(s string) (string, error) {
	s = strings.TrimPrefix(s, "#")
	if s == "" {
		return "", badInput("/join needs a room name")
	}
	if len(s) > MaxRoom || !nameChars(s) {
		return "", badInput("room %q: want 1 to %d letters, digits, '-', '_' or '.'", clip(s), MaxRoom)
	}
	return s, nil
}

func nameChars(s string) bool {
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
		default:
			return false
		}
	}
	return true
}

// clip shortens what a client sent before it is quoted back in an error.
func clip(s string) string {
	if len(s) <= 40 {
		return s
	}
	cut := 40
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// inFrame is a client's WebSocket frame: {"type":"join","room":"lobby"}.
type inFrame struct {
	Type  string  `json:"type"`
	Nick  string  `json:"nick,omitempty"`
	Room  string  `json:"room,omitempty"`
	Text  string  `json:"text,omitempty"`
	N     *int    `json:"n,omitempty"`
	Since *uint64 `json:"since,omitempty"`
}

// ParseFrame decodes one WebSocket text frame of the JSON protocol into the
// same Command a TCP line gives. Types: say {text}, nick {nick}, join {room,
// since?}, leave, rooms, history {n? | since?}, quit. Unknown fields are refused, so a typo is
// an error and not a silent no-op.
func ParseFrame(p []byte) (Command, error) {
	if !utf8.Valid(p) {
		return Command{}, badInput("frame is not valid UTF-8")
	}
	var in inFrame
	dec := json.NewDecoder(strings.NewReader(string(p)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return Command{}, badInput("frame is not a JSON object of the chat protocol: %s", clip(err.Error()))
	}
	if dec.More() {
		return Command{}, badInput("frame holds more than one JSON value")
	}
	switch in.Type {
	case "say":
		if strings.TrimSpace(in.Text) == "" {
			return Command{}, nil
		}
		return say(in.Text)
	case "nick":
		return command("nick", in.Nick, true)
	case "join":
		c, err := command("join", in.Room, true)
		if err == nil && in.Since != nil {
			c.Since, err = parseSince(strconv.FormatUint(*in.Since, 10))
		}
		return c, err
	case "history":
		switch {
		case in.Since != nil && in.N != nil:
			return Command{}, badInput(`history takes "n" or "since", not both`)
		case in.Since != nil:
			return command("history", "since "+strconv.FormatUint(*in.Since, 10), true)
		case in.N == nil:
			return Command{Kind: CmdHistory}, nil
		}
		return command("history", strconv.Itoa(*in.N), true)
	case "leave", "rooms", "quit":
		return command(in.Type, "", false)
	case "":
		return Command{}, badInput(`frame has no "type"`)
	}
	return Command{}, badInput("unknown frame type %q (known: say, nick, join, leave, rooms, history, quit)", clip(in.Type))
}

// EventKind is what the server tells a client.
type EventKind uint8

const (
	EvMessage EventKind = iota + 1 // a chat message, live or replayed
	EvInfo                         // a notice from the server (joined, left, rooms, ...)
	EvError                        // a refused request; Fatal ones end the connection
)

// ServerNick is the sender of everything the server itself says.
const ServerNick = "*server*"

// NoRoom names the room of a line that belongs to none (before /join).
const NoRoom = "*"

// Event is one thing a client receives. It holds only strings and numbers,
// so it crosses shards as a plain value.
type Event struct {
	Kind    EventKind
	Room    string // never empty: NoRoom outside a room
	Nick    string // the sender; ServerNick for info and errors
	Text    string
	Seq     uint64 // EvMessage: the message's number in its room
	At      int64  // EvMessage: when the room accepted it, Unix nanoseconds
	History bool   // EvMessage: replayed from the database, not live
	Fatal   bool   // EvError: the server closes the connection after it
}

// wire is an event as it goes out: its bytes on each transport (a line; a
// WebSocket frame of JSON), encoded once by the room and shared by every
// member it is sent to. It is immutable once built, so the pointer may
// cross shards; a mailbox entry is one word, not the whole event.
//
//wo:shardsafe
type wire struct {
	fatal bool   // the connection ends after it
	line  string // TCP; "" for WebSocket-only control frames
	frame string // WebSocket
}

// wire encodes e for both transports.
func (e Event) wire() *wire {
	return &wire{fatal: e.Fatal, line: string(e.AppendLine(nil)), frame: string(appendFrame(nil, ws.OpText, e.AppendJSON(nil)))}
}

func (e Event) room() string {
	if e.Room == "" {
		return NoRoom
	}
	return e.Room
}

// AppendLine appends e as a line of the TCP protocol:
//
//	#lobby <alice> hello
//	#lobby <alice> [history 2026-12-02T03:04:05Z] earlier words
//	#lobby <*server*> bob joined
//	* <*server*> error: unknown command /foo (...)
func (e Event) AppendLine(b []byte) []byte {
	r := e.room()
	if r != NoRoom {
		b = append(b, '#')
	}
	b = append(b, r...)
	b = append(b, " <"...)
	b = append(b, e.Nick...)
	b = append(b, "> "...)
	switch {
	case e.Kind == EvError:
		b = append(b, "error: "...)
	case e.History:
		b = append(b, "[history "...)
		b = time.Unix(0, e.At).UTC().AppendFormat(b, time.RFC3339)
		b = append(b, "] "...)
	}
	b = append(b, e.Text...)
	return append(b, '\n')
}

// outFrame is the JSON form of an Event.
type outFrame struct {
	Type    string `json:"type"` // message, info, error
	Room    string `json:"room"`
	Nick    string `json:"nick"`
	Text    string `json:"text"`
	Seq     uint64 `json:"seq,omitempty"`
	At      string `json:"at,omitempty"`
	History bool   `json:"history,omitempty"`
	Fatal   bool   `json:"fatal,omitempty"`
}

// AppendJSON appends e as a JSON frame of the WebSocket protocol.
func (e Event) AppendJSON(b []byte) []byte {
	o := outFrame{Room: e.room(), Nick: e.Nick, Text: e.Text, Fatal: e.Fatal}
	switch e.Kind {
	case EvMessage:
		o.Type, o.Seq, o.History = "message", e.Seq, e.History
		o.At = time.Unix(0, e.At).UTC().Format(time.RFC3339Nano)
	case EvError:
		o.Type = "error"
	default:
		o.Type = "info"
	}
	out, err := json.Marshal(o)
	if err != nil { // strings and numbers only: cannot happen
		panic(fmt.Sprintf("chat: encoding an event: %v", err))
	}
	return append(b, out...)
}
