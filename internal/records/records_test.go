package records

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/runtime"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start runs a runtime with the database and the records actor and returns
// an httptest server for the API; cleanup stops everything.
func start(t *testing.T, dir string) *httptest.Server {
	t.Helper()
	type wired struct {
		addr runtime.Addr[Request]
		err  error
	}
	handoff := make(chan wired, 1)
	stop := make(chan runtime.Reply[int], 1)
	rt, err := runtime.Start(context.Background(), runtime.Config{}, func(f *runtime.Fiber) int {
		db, err := dbowner.Open(f, dbowner.Options{Dir: dir})
		if err != nil {
			handoff <- wired{err: err}
			return 1
		}
		defer db.Close(f)
		addr, err := Start(f, db)
		rep, fu := runtime.NewFuture[int](f)
		stop <- rep
		handoff <- wired{addr: addr, err: err}
		code, _ := fu.Wait(f, 0)
		return code
	})
	if err != nil {
		t.Fatal(err)
	}
	w := <-handoff
	if w.err != nil {
		t.Fatal(w.err)
	}
	srv := httptest.NewServer(NewHandler(rt, w.addr, Options{}))
	rep := <-stop
	t.Cleanup(func() {
		srv.Close()
		http.DefaultClient.CloseIdleConnections()
		rep.Send(nil, 0)
		if code := rt.Wait(); code != 0 {
			t.Errorf("runtime exit %d", code)
		}
	})
	return srv
}

func do(t *testing.T, method, url, body string) (int, string) {
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

func TestCRUD(t *testing.T) {
	dir := t.TempDir()
	srv := start(t, dir)
	u := srv.URL + "/v1/records/"

	if code, body := do(t, "GET", u+"ada", ""); code != 404 || !strings.Contains(body, `no record \"ada\"`) {
		t.Fatalf("get missing: %d %s", code, body)
	}
	code, body := do(t, "PUT", u+"ada", `{"name":"Ada","role":"engineer"}`)
	if code != 201 || body != `{"key":"ada","fields":{"name":"Ada","role":"engineer"},"version":2}`+"\n" {
		t.Fatalf("put new: %d %s", code, body)
	}
	if code, body = do(t, "PUT", u+"ada", `{"role":"lead", "name":"Ada"}`); code != 200 || !strings.Contains(body, `"fields":{"name":"Ada","role":"lead"}`) {
		t.Fatalf("put again: %d %s", code, body)
	}
	if code, body = do(t, "GET", u+"ada", ""); code != 200 || !strings.Contains(body, `"role":"lead"`) {
		t.Fatalf("get: %d %s", code, body)
	}
	for _, k := range []string{"bob", "bea", "cy"} {
		if code, body := do(t, "PUT", u+k, `{"n":"`+k+`"}`); code != 201 {
			t.Fatalf("put %s: %d %s", k, code, body)
		}
	}
	code, body = do(t, "GET", srv.URL+"/v1/records?prefix=b&limit=1", "")
	var page listPage
	if err := json.Unmarshal([]byte(body), &page); code != 200 || err != nil || len(page.Records) != 1 || page.Records[0].Key != "bea" || page.Next == "" {
		t.Fatalf("list page 1: %d %s", code, body)
	}
	code, body = do(t, "GET", srv.URL+"/v1/records?prefix=b&limit=10&after="+page.Next, "")
	if code != 200 || !strings.Contains(body, `"key":"bob"`) || strings.Contains(body, "bea") || strings.Contains(body, `"next"`) {
		t.Fatalf("list page 2: %d %s", code, body)
	}
	if code, body = do(t, "GET", srv.URL+"/v1/records", ""); code != 200 || strings.Count(body, `"key"`) != 4 {
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

func TestBadRequests(t *testing.T) {
	srv := start(t, t.TempDir())
	u := srv.URL + "/v1/records/k"
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
		{`{"a":"` + strings.Repeat("x", MaxBody) + `"}`, 413, "too large"},
	} {
		code, body := do(t, "PUT", u, tc.body)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("PUT %.40q: %d %s, want %d containing %q", tc.body, code, body, tc.code, tc.want)
		}
	}
	if code, body := do(t, "GET", srv.URL+"/v1/records?limit=0", ""); code != 400 || !strings.Contains(body, "limit") {
		t.Errorf("limit=0: %d %s", code, body)
	}
	if code, body := do(t, "GET", srv.URL+"/v1/records?after=!!", ""); code != 400 || !strings.Contains(body, "cursor") {
		t.Errorf("bad cursor: %d %s", code, body)
	}
	if code, _ := do(t, "GET", srv.URL+"/v1/records/"+strings.Repeat("k", MaxKey+1), ""); code != 400 {
		t.Errorf("long key: %d", code)
	}
}

// Concurrent PUTs of one key from many goroutines: every one succeeds (the
// upsert retries between insert and update) and exactly one creates.
func TestConcurrentUpsert(t *testing.T) {
	srv := start(t, t.TempDir())
	var wg sync.WaitGroup
	var mu sync.Mutex
	created := 0
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("PUT", srv.URL+"/v1/records/same", strings.NewReader(`{"i":"`+string(rune('a'+i))+`"}`))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			mu.Lock()
			defer mu.Unlock()
			switch resp.StatusCode {
			case 201:
				created++
			case 200:
			default:
				t.Errorf("status %d", resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	if created != 1 {
		t.Fatalf("%d PUTs created the key, want 1", created)
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
