package clustertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Record is a record of the records API (docs/api.md).
type Record struct {
	Key     string            `json:"key"`
	Fields  map[string]string `json:"fields"`
	Version uint64            `json:"version"`
}

// HTTPError is an answer other than 2xx from the records API.
type HTTPError struct {
	Method, URL string
	Code        int
	Message     string // the body's "error", or the body
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.URL, e.Code, http.StatusText(e.Code), e.Message)
}

// Code returns the HTTP status of an *HTTPError, and 0 for any other error
// (the request got no answer: a refused or cut connection, a timeout).
func Code(err error) int {
	var e *HTTPError
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// Request sends one request to the member's data port (path starts with
// "/") and returns the status and body. An
// error means no answer.
func (m *Member) Request(ctx context.Context, method, path string, body []byte, hdr http.Header) (int, []byte, error) {
	return m.c.do(ctx, method, m.HTTPURL()+path, bytes.NewReader(body), hdr)
}

// Put stores fields under key (PUT /v1/records/{key}), answered once
// committed and applied on this member.
func (m *Member) Put(ctx context.Context, key string, fields map[string]string) (Record, error) {
	b, err := json.Marshal(fields)
	if err != nil {
		return Record{}, err
	}
	return m.record(ctx, http.MethodPut, "/v1/records/"+url.PathEscape(key), b)
}

// Get reads key: a linearizable read, or with stale the member's local
// state (?consistency=stale). No such record is an *HTTPError with Code
// 404.
func (m *Member) Get(ctx context.Context, key string, stale bool) (Record, error) {
	p := "/v1/records/" + url.PathEscape(key)
	if stale {
		p += "?consistency=stale"
	}
	return m.record(ctx, http.MethodGet, p, nil)
}

func (m *Member) record(ctx context.Context, method, path string, body []byte) (Record, error) {
	var r Record
	return r, m.call(ctx, method, path, body, &r)
}

// List returns every record whose key starts with prefix, following the
// pages' cursors; stale reads the member's local state.
func (m *Member) List(ctx context.Context, prefix string, stale bool) ([]Record, error) {
	var out []Record
	after := ""
	for {
		q := url.Values{"prefix": {prefix}, "limit": {"1000"}}
		if after != "" {
			q.Set("after", after)
		}
		if stale {
			q.Set("consistency", "stale")
		}
		var page struct {
			Records []Record `json:"records"`
			Next    string   `json:"next"`
		}
		if err := m.call(ctx, http.MethodGet, "/v1/records?"+q.Encode(), nil, &page); err != nil {
			return out, err
		}
		out = append(out, page.Records...)
		if page.Next == "" {
			return out, nil
		}
		after = page.Next
	}
}

func (m *Member) call(ctx context.Context, method, path string, body []byte, out any) error {
	var hdr http.Header
	if body != nil {
		hdr = http.Header{"Content-Type": {"application/json"}}
	}
	code, b, err := m.Request(ctx, method, path, body, hdr)
	if err != nil {
		return fmt.Errorf("%s: %s %s: %w", m, method, path, err)
	}
	if code/100 != 2 {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(b))
		}
		return &HTTPError{Method: method, URL: m.HTTPURL() + path, Code: code, Message: e.Error}
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s: %s %s: bad answer %.200q: %w", m, method, path, b, err)
	}
	return nil
}
