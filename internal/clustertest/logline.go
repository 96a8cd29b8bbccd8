package clustertest

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/writeonce/wo/internal/adminapi"
)

// ParseLogLine parses one line of the worker's text log (log/slog's
// TextHandler, the worker's default log.format): space-separated key=value
// pairs, a value that holds a space, a quote, '=' or a control character
// written as a quoted Go string. It returns the pairs in order; an error
// names the byte offset of what does not parse.
func ParseLogLine(line string) ([][2]string, error) {
	var out [][2]string
	i := 0
	for {
		for i < len(line) && line[i] == ' ' {
			i++
		}
		if i == len(line) {
			return out, nil
		}
		start := i
		for i < len(line) && line[i] != '=' && line[i] != ' ' && line[i] != '"' {
			i++
		}
		if i == start || i == len(line) || line[i] != '=' {
			return nil, fmt.Errorf("log line: offset %d: want key=value", start)
		}
		key := line[start:i]
		i++ // '='
		var val string
		if i < len(line) && line[i] == '"' {
			end, err := quotedEnd(line, i)
			if err != nil {
				return nil, err
			}
			v, err := strconv.Unquote(line[i:end])
			if err != nil {
				return nil, fmt.Errorf("log line: offset %d: value of %q: %v", i, key, err)
			}
			val, i = v, end
		} else {
			vs := i
			for i < len(line) && line[i] != ' ' {
				if line[i] == '"' {
					return nil, fmt.Errorf("log line: offset %d: a quote inside the unquoted value of %q", i, key)
				}
				i++
			}
			val = line[vs:i]
		}
		if i < len(line) && line[i] != ' ' {
			return nil, fmt.Errorf("log line: offset %d: want a space after the value of %q", i, key)
		}
		out = append(out, [2]string{key, val})
	}
}

// quotedEnd returns the offset just after the Go string literal that starts
// at line[i] == '"'.
func quotedEnd(line string, i int) (int, error) {
	for j := i + 1; j < len(line); j++ {
		switch line[j] {
		case '\\':
			j++
		case '"':
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("log line: offset %d: unterminated quoted value", i)
}

// Listening is what the worker's "worker: listening" line says: the bound
// addresses of its ports and, for a replicated worker, its peer address and
// member ID.
type Listening struct {
	Ops, HTTP, Chat string // host:port
	Peer            string // host:port; "" when the worker has no peer port
	Member          adminapi.ID
}

// MsgListening is the message of the line the worker logs once every port
// is bound.
const MsgListening = "worker: listening"

// errNotListening: the line is another message.
var errNotListening = errors.New("not the listening line")

// ParseListening reads the listening line. It returns errNotListening (test
// with IsNotListening) for any other line of the log, and an error naming
// the attribute for a listening line that lacks one or has a bad one.
func ParseListening(line string) (Listening, error) {
	if !strings.Contains(line, MsgListening) {
		return Listening{}, errNotListening
	}
	kv, err := ParseLogLine(line)
	if err != nil {
		return Listening{}, err
	}
	attrs := map[string]string{}
	for _, p := range kv {
		attrs[p[0]] = p[1]
	}
	if attrs["msg"] != MsgListening {
		return Listening{}, errNotListening
	}
	var l Listening
	for _, a := range []struct {
		key string
		dst *string
		opt bool
	}{{"ops", &l.Ops, false}, {"http", &l.HTTP, false}, {"chat", &l.Chat, false}, {"peer", &l.Peer, true}} {
		v, ok := attrs[a.key]
		if a.opt && (!ok || v == "") {
			continue // no peer port: a worker without peers that does not join
		}
		if i := strings.LastIndexByte(v, ':'); i <= 0 || i == len(v)-1 {
			return Listening{}, fmt.Errorf("listening line: %s=%q: want host:port", a.key, v)
		}
		*a.dst = v
	}
	if v, ok := attrs["member"]; ok {
		id, err := adminapi.ParseID(v)
		if err != nil {
			return Listening{}, fmt.Errorf("listening line: member: %w", err)
		}
		l.Member = id
	}
	return l, nil
}

// IsNotListening reports whether ParseListening's error means "another
// line".
func IsNotListening(err error) bool { return errors.Is(err, errNotListening) }
