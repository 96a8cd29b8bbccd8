package records

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/internal/httpd"
	"github.com/writeonce/wo/runtime"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start runs a runtime (two shards) with the database and the records API
// on httpd, and returns its base URL; cleanup stops everything.
func start(t testing.TB, dir string, opts httpd.Options) string {
	t.Helper()
	return startDB(t, dbowner.Options{Dir: dir}, opts)
}

// startDB is start with the database's options (a member that joins a
// group, a short request timeout).
func startDB(t testing.TB, dbOpts dbowner.Options, opts httpd.Options) string {
	t.Helper()
	return startDBWith(t, dbOpts, opts, nil)
}

// startDBWith is startDB with more running beside the API's database:
// beside runs on main's fiber before the API starts, and the function it
// returns at the end, before the database closes.
func startDBWith(t testing.TB, dbOpts dbowner.Options, opts httpd.Options, beside func(*runtime.Fiber) func(*runtime.Fiber)) string {
	t.Helper()
	addrs := make(chan string, 1)
	stop := make(chan runtime.Reply[struct{}], 1)
	rt, err := runtime.Start(context.Background(), runtime.Config{Shards: 2}, func(f *runtime.Fiber) int {
		done := func(*runtime.Fiber) {}
		if beside != nil {
			done = beside(f)
		}
		defer func() { done(f) }()
		db, err := dbowner.Open(f, dbOpts)
		if err != nil {
			t.Error(err)
			addrs <- ""
			return 1
		}
		defer db.Close(f)
		if err := Setup(f, db); err != nil {
			t.Error(err)
			addrs <- ""
			return 1
		}
		srv := httpd.New(opts)
		Register(srv, db, nil)
		if err := srv.Start(f, "127.0.0.1:0"); err != nil {
			t.Error(err)
			addrs <- ""
			return 1
		}
		rep, fu := runtime.NewFuture[struct{}](f)
		stop <- rep
		addrs <- "http://" + srv.Addr().String()
		_, _ = fu.Wait(f, 0)
		srv.Shutdown(f, 0)
		return 0
	})
	if err != nil {
		t.Fatal(err)
	}
	u := <-addrs
	if u == "" {
		rt.Wait()
		t.FailNow()
	}
	rep := <-stop
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		rep.Send(nil, struct{}{})
		if code := rt.Wait(); code != 0 {
			t.Errorf("runtime exit %d", code)
		}
	})
	return u
}

func do(t testing.TB, method, url, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

type page struct {
	Records []Record `json:"records"`
	Next    string   `json:"next"`
}

func TestCRUD(t *testing.T) {
	base := start(t, t.TempDir(), httpd.Options{})
	u := base + "/v1/records/"

	if code, body := do(t, "GET", u+"ada", ""); code != 404 || body != `{"error":"no record \"ada\""}`+"\n" {
		t.Fatalf("get missing: %d %s", code, body)
	}
	code, body := do(t, "PUT", u+"ada", `{"role":"engineer","name":"Ada"}`)
	if code != 200 || body != `{"key":"ada","fields":{"name":"Ada","role":"engineer"},"version":2}`+"\n" {
		t.Fatalf("put new: %d %s", code, body)
	}
	if code, body = do(t, "PUT", u+"ada", `{"role":"lead", "name":"Ada"}`); code != 200 || !strings.Contains(body, `"fields":{"name":"Ada","role":"lead"}`) {
		t.Fatalf("put again: %d %s", code, body)
	}
	if code, body = do(t, "GET", u+"ada", ""); code != 200 || !strings.Contains(body, `"role":"lead"`) {
		t.Fatalf("get: %d %s", code, body)
	}
	for _, k := range []string{"bob", "bea", "cy"} {
		if code, body := do(t, "PUT", u+k, `{"n":"`+k+`"}`); code != 200 {
			t.Fatalf("put %s: %d %s", k, code, body)
		}
	}
	code, body = do(t, "GET", base+"/v1/records?prefix=b&limit=1", "")
	var p page
	if err := json.Unmarshal([]byte(body), &p); code != 200 || err != nil || len(p.Records) != 1 || p.Records[0].Key != "bea" || p.Next == "" {
		t.Fatalf("list page 1: %d %s", code, body)
	}
	code, body = do(t, "GET", base+"/v1/records?prefix=b&limit=10&after="+p.Next, "")
	if code != 200 || !strings.Contains(body, `"key":"bob"`) || strings.Contains(body, "bea") || strings.Contains(body, `"next"`) {
		t.Fatalf("list page 2: %d %s", code, body)
	}
	if code, body = do(t, "GET", base+"/v1/records", ""); code != 200 || strings.Count(body, `"key"`) != 4 {
		t.Fatalf("list all: %d %s", code, body)
	}
	if code, _ = do(t, "DELETE", u+"bob", ""); code != 204 {
		t.Fatalf("delete: %d", code)
	}
	if code, _ = do(t, "DELETE", u+"bob", ""); code != 404 {
		t.Fatalf("delete again: %d", code)
	}
	if code, _ = do(t, "GET", u+"bob", ""); code != 404 {
		t.Fatalf("get deleted: %d", code)
	}
}

// Every page is capped in bytes as well as in records, and the cursor
// walks the whole table without a gap or a repeat.
func TestListCappedInBytes(t *testing.T) {
	base := start(t, t.TempDir(), httpd.Options{})
	big := strings.Repeat("x", 300<<10)
	for i := range 10 {
		if code, body := do(t, "PUT", fmt.Sprintf("%s/v1/records/k%02d", base, i), `{"v":"`+big+`"}`); code != 200 {
			t.Fatalf("put: %d %s", code, body)
		}
	}
	seen := 0
	after := ""
	for pages := 0; ; pages++ {
		code, body := do(t, "GET", base+"/v1/records?limit=1000&after="+after, "")
		var p page
		if err := json.Unmarshal([]byte(body), &p); code != 200 || err != nil {
			t.Fatalf("list: %d %v", code, err)
		}
		if len(body) > MaxPageBytes+4096 {
			t.Fatalf("page of %d bytes, cap %d", len(body), MaxPageBytes)
		}
		for _, r := range p.Records {
			if want := fmt.Sprintf("k%02d", seen); r.Key != want {
				t.Fatalf("page %d: key %s, want %s", pages, r.Key, want)
			}
			seen++
		}
		if p.Next == "" {
			break
		}
		after = p.Next
	}
	if seen != 10 {
		t.Fatalf("walked %d records, want 10", seen)
	}
}

func TestBadRequests(t *testing.T) {
	base := start(t, t.TempDir(), httpd.Options{MaxBody: 1 << 16})
	u := base + "/v1/records/k"
	for _, tc := range []struct {
		body string
		code int
		want string
	}{
		{`{"a":`, 400, "unexpected end"},
		{`{"a" 1}`, 400, "at byte"},
		{``, 400, "empty body"},
		{`[1,2]`, 400, "got an array"},
		{`null`, 400, "got null"},
		{`{"a":1}`, 400, `field \"a\": want a string, got a number`},
		{`{"a":"x"} {}`, 400, "data after the object"},
		{"{\"a\":\"\xff\"}", 400, "invalid UTF-8 at byte 6"},
		{"{\"\xc3\":\"x\"}", 400, "invalid UTF-8 at byte 2"},
		{`{"a":"\ud800"}`, 400, "lone surrogate"},
		{`{"\udc00":"x"}`, 400, "lone surrogate"},
		{`{"a":"` + strings.Repeat("x", 1<<16) + `"}`, 413, "too large"},
	} {
		code, body := do(t, "PUT", u, tc.body)
		if code != tc.code || !strings.Contains(body, tc.want) || !strings.HasPrefix(body, `{"error":`) {
			t.Errorf("PUT %.40q: %d %s, want %d containing %q", tc.body, code, body, tc.code, tc.want)
		}
	}
	// A replacement character the client did send is kept.
	if code, body := do(t, "PUT", u, `{"a":"\ufffd�"}`); code != 200 {
		t.Errorf("U+FFFD sent by the client: %d %s", code, body)
	}
	for _, tc := range []struct {
		method, path string
		code         int
		want         string
	}{
		{"GET", "/v1/records?limit=0", 400, `limit=\"0\"`},
		{"GET", "/v1/records?after=!!", 400, `after=\"!!\": not a cursor`},
		{"GET", "/v1/records?after=eHl6", 400, `after=\"eHl6\"`},
		{"GET", "/v1/records/" + strings.Repeat("k", MaxKey+1), 400, "at most 1024"},
		{"GET", "/v1/records/a%00b", 400, "control character (byte 0x00 at offset 1)"},
		{"PUT", "/v1/records/a%0d%0ab", 400, "control character (byte 0x0d"},
		{"GET", "/v1/records/%ff", 400, "not valid UTF-8"},
		{"GET", "/v1/records/", 404, "no route for GET /v1/records/"},
		{"GET", "/nothing", 404, "no route"},
		{"POST", "/v1/records/k", 405, "not allowed"},
	} {
		code, body := do(t, tc.method, base+tc.path, `{}`)
		if code != tc.code || !strings.Contains(body, tc.want) || !strings.HasPrefix(body, `{"error":`) {
			t.Errorf("%s %s: %d %s, want %d containing %q", tc.method, tc.path, code, body, tc.code, tc.want)
		}
	}
	req, _ := http.NewRequest("PATCH", base+"/v1/records/k", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 || !strings.Contains(resp.Header.Get("Allow"), "PUT") {
		t.Errorf("PATCH: %d Allow=%q", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

// Concurrent PUTs of one key: each is one upsert, all succeed, and the
// record ends as one of them with the highest version answered.
func TestConcurrentUpsert(t *testing.T) {
	base := start(t, t.TempDir(), httpd.Options{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var top uint64
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("PUT", base+"/v1/records/same", strings.NewReader(`{"i":"`+string(rune('a'+i))+`"}`))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			var r Record
			if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != 200 {
				t.Errorf("status %d %v", resp.StatusCode, err)
				return
			}
			mu.Lock()
			top = max(top, r.Version)
			mu.Unlock()
		}()
	}
	wg.Wait()
	_, body := do(t, "GET", base+"/v1/records/same", "")
	var r Record
	if err := json.Unmarshal([]byte(body), &r); err != nil || r.Version != top {
		t.Fatalf("final %s, want version %d", body, top)
	}
}

// Pipelined requests on one connection are answered in order.
func TestPipelined(t *testing.T) {
	base := start(t, t.TempDir(), httpd.Options{})
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var script strings.Builder
	const n = 20
	for i := range n {
		body := fmt.Sprintf(`{"i":"%d"}`, i)
		fmt.Fprintf(&script, "PUT /v1/records/p%02d HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", i, len(body), body)
		fmt.Fprintf(&script, "GET /v1/records/p%02d HTTP/1.1\r\nHost: x\r\n\r\n", i)
	}
	if _, err := io.WriteString(c, script.String()); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	for i := range 2 * n {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		want := fmt.Sprintf(`"key":"p%02d","fields":{"i":"%d"}`, i/2, i/2)
		if resp.StatusCode != 200 || !strings.Contains(string(b), want) {
			t.Fatalf("response %d: %d %s, want %s", i, resp.StatusCode, b, want)
		}
	}
}

func TestPrefixEnd(t *testing.T) {
	for in, want := range map[string]string{"a": "b", "ab": "ac", "a\xff": "b"} {
		if got, ok := prefixEnd(in); !ok || got != want {
			t.Errorf("prefixEnd(%q) = %q, %v", in, got, ok)
		}
	}
	if _, ok := prefixEnd("\xff\xff"); ok {
		t.Error("prefixEnd of 0xff bytes has an end")
	}
}

// FuzzFields: the body decoder never panics, and what it accepts is
// canonical (decoding it again gives it back) and valid UTF-8.
func FuzzFields(f *testing.F) {
	for _, s := range []string{`{"a":"b"}`, `{}`, `{"a":1}`, `[]`, `{"a":"\ud800"}`, "{\"a\":\"\xff\"}", `{"b":"x","a":"y"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, status, msg := canonicalFields(in)
		if status != 0 {
			if msg == "" {
				t.Fatalf("status %d without a message", status)
			}
			return
		}
		again, status, msg := canonicalFields([]byte(out))
		if status != 0 || string(again) != string(out) {
			t.Fatalf("canonical %q decodes to %q (%d %s)", out, again, status, msg)
		}
	})
}

// canonicalFields copies a plain value as the body spells it and encodes
// the others: either way its answer is json.Marshal of the fields as a
// map[string]string, byte for byte (what was stored before, what an
// Idempotency-Key's digest covers).
func FuzzFieldsAsMarshal(f *testing.F) {
	for _, s := range []string{`{"b":"x","a":"y"}`, ` { "a" : "x" } `, `{"a":"<&>"}`, `{"a":"\u003c"}`, "{\"a\":\"\u2028\u2029\"}", `{"a":"\u2028"}`,
		`{"a":"x\"y\\z\/"}`, `{"a":"\n\t"}`, `{"é":"ü€𝄞"}`, `{"a":"1","a":"2"}`, `{"<k>":"v"}`, `{"a":"\ufffd"}`, "{\"a\":\"\xe2\x82\xac\"}", `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, status, _ := canonicalFields(in)
		if status != 0 {
			return
		}
		var m map[string]string
		if err := json.Unmarshal(in, &m); err != nil {
			t.Fatalf("%q accepted as %q, but json.Unmarshal says %v", in, out, err)
		}
		want, _ := json.Marshal(m)
		if out != string(want) {
			t.Fatalf("%q: canonical %q, json.Marshal %q", in, out, want)
		}
	})
}
