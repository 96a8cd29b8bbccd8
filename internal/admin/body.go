package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/writeonce/wo/internal/adminapi"
	"github.com/writeonce/wo/internal/config"
)

// The bodies are decoded strictly: a typo in a field name must not turn
// into a conf change with a zero value. IDs are decoded as strings and
// parsed here (not by adminapi.ID's UnmarshalText) so the message says which
// field was wrong and how.

// parseAddMember decodes POST /admin/members: {"id": "<hex>", "addr":
// "host:port"}, both required.
func parseAddMember(b []byte) (adminapi.AddMember, error) {
	var raw struct {
		ID   *json.RawMessage `json:"id"`
		Addr *json.RawMessage `json:"addr"`
	}
	if err := decodeStrict(b, &raw); err != nil {
		return adminapi.AddMember{}, err
	}
	if raw.ID == nil {
		return adminapi.AddMember{}, errors.New(`bad body: "id" is missing (the member ID, 16 hex digits, from the new member's GET /admin/cluster self)`)
	}
	id, err := fieldID("id", *raw.ID, false)
	if err != nil {
		return adminapi.AddMember{}, err
	}
	if raw.Addr == nil {
		return adminapi.AddMember{}, errors.New(`bad body: "addr" is missing (the new member's peer address, host:port)`)
	}
	addr, err := fieldString("addr", *raw.Addr)
	if err != nil {
		return adminapi.AddMember{}, err
	}
	if err := config.CheckPeerAddr(addr); err != nil {
		return adminapi.AddMember{}, fmt.Errorf("bad body: \"addr\" %q: %w", addr, err)
	}
	return adminapi.AddMember{ID: id, Addr: addr}, nil
}

// parseTransferLeader decodes POST /admin/leader: {"to": "<hex>"}. An empty
// body, {}, "to": null or a zero ID ("0", "0000000000000000": what adminapi.Client sends
// for 0) ask for the most caught-up other voter.
func parseTransferLeader(b []byte) (adminapi.TransferLeader, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return adminapi.TransferLeader{}, nil
	}
	var raw struct {
		To *json.RawMessage `json:"to"`
	}
	if err := decodeStrict(b, &raw); err != nil {
		return adminapi.TransferLeader{}, err
	}
	if raw.To == nil {
		return adminapi.TransferLeader{}, nil
	}
	id, err := fieldID("to", *raw.To, true)
	if err != nil {
		return adminapi.TransferLeader{}, err
	}
	return adminapi.TransferLeader{To: id}, nil
}

// decodeStrict decodes one JSON object into v: unknown fields, a value that
// is not an object and anything after the object are errors.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var se *json.SyntaxError
		var ute *json.UnmarshalTypeError
		switch {
		case errors.Is(err, io.EOF):
			return errors.New("bad body: empty; want a JSON object")
		case errors.Is(err, io.ErrUnexpectedEOF):
			return errors.New("bad body: not JSON: it ends inside the object")
		case errors.As(err, &se):
			return fmt.Errorf("bad body: not JSON: %v at byte %d", se, se.Offset)
		case errors.As(err, &ute):
			return fmt.Errorf("bad body: want a JSON object, got %s", ute.Value)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return fmt.Errorf("bad body: unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
		}
		return fmt.Errorf("bad body: %v", err)
	}
	if dec.More() {
		return errors.New("bad body: data after the JSON object")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("bad body: data after the JSON object")
	}
	return nil
}

func fieldString(name string, raw json.RawMessage) (string, error) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", fmt.Errorf("bad body: %q: want a string, got %s", name, kind(raw))
	}
	return s, nil
}

// fieldID parses a member ID field; zeroOK lets 0 through (transfer's "any
// voter").
func fieldID(name string, raw json.RawMessage, zeroOK bool) (adminapi.ID, error) {
	s, err := fieldString(name, raw)
	if err != nil {
		return 0, fmt.Errorf("%w (a member ID is a string of 1 to 16 hex digits)", err)
	}
	if zeroOK && s != "" && len(s) <= 16 && strings.Trim(s, "0") == "" {
		return 0, nil
	}
	id, err := adminapi.ParseID(s)
	if err != nil {
		return 0, fmt.Errorf("bad body: %q: %w", name, err)
	}
	return id, nil
}

func kind(raw json.RawMessage) string {
	switch {
	case len(raw) == 0:
		return "nothing"
	case raw[0] == '"':
		return "a bad string"
	case raw[0] == '{':
		return "an object"
	case raw[0] == '[':
		return "an array"
	case raw[0] == 't' || raw[0] == 'f':
		return "a boolean"
	case raw[0] == 'n':
		return "null"
	}
	return "a number"
}
