package records

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/internal/httpd"
	"github.com/writeonce/wo/internal/testport"
	"github.com/writeonce/wo/replication/identity"
	"github.com/writeonce/wo/replication/transport/transporttest"
	"github.com/writeonce/wo/runtime"
)

func doH(t testing.TB, method, url, body string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func errMsg(t testing.TB, body string) string {
	t.Helper()
	var e struct{ Error string }
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == "" {
		t.Fatalf("not the JSON error shape: %q", body)
	}
	return e.Error
}

// consistency= on GET and list: linearizable (the default, or named) and
// stale both read the record; any other value is a 400 naming the two.
func TestConsistencyParam(t *testing.T) {
	base := start(t, t.TempDir(), httpd.Options{})
	u := base + "/v1/records/"
	if code, body := do(t, "PUT", u+"ada", `{"name":"Ada"}`); code != 200 {
		t.Fatalf("put: %d %s", code, body)
	}
	_, want := do(t, "GET", u+"ada", "")
	for _, q := range []string{"?consistency=linearizable", "?consistency=stale"} {
		if code, body := do(t, "GET", u+"ada"+q, ""); code != 200 || body != want {
			t.Errorf("GET %s: %d %s, want %s", q, code, body, want)
		}
		if code, body := do(t, "GET", base+"/v1/records"+q, ""); code != 200 || !strings.Contains(body, `"key":"ada"`) {
			t.Errorf("list %s: %d %s", q, code, body)
		}
	}
	for _, url := range []string{u + "ada?consistency=eventual", base + "/v1/records?limit=5&consistency=eventual"} {
		code, _, body := doH(t, "GET", url, "")
		if code != 400 || errMsg(t, body) != `consistency="eventual": want linearizable (the default) or stale` {
			t.Errorf("GET %s: %d %s", url, code, body)
		}
	}
}

// A PUT or DELETE retried with its Idempotency-Key is applied once and
// answered like the first try, even after another write changed the
// record; the key on a different request is a new write.
func TestIdempotencyKey(t *testing.T) {
	base := start(t, t.TempDir(), httpd.Options{})
	u := base + "/v1/records/"
	type rec struct {
		Fields  map[string]string
		Version uint64
	}
	put := func(body string, hdr ...string) rec {
		t.Helper()
		code, _, b := doH(t, "PUT", u+"carol", body, hdr...)
		var r rec
		if code != 200 || json.Unmarshal([]byte(b), &r) != nil {
			t.Fatalf("PUT %s %v: %d %s", body, hdr, code, b)
		}
		return r
	}
	first := put(`{"name":"Carol"}`, IdempotencyKey, "order-17")
	other := put(`{"name":"Carol","team":"ops"}`)
	retry := put(`{"name":"Carol"}`, IdempotencyKey, "order-17")
	if retry.Version != first.Version || retry.Fields["name"] != "Carol" || other.Version <= first.Version {
		t.Fatalf("retry answered %+v; first %+v, the write between %+v", retry, first, other)
	}
	if _, body := do(t, "GET", u+"carol", ""); !strings.Contains(body, `"team":"ops"`) {
		t.Fatalf("the retry was applied again: %s", body)
	}
	if reused := put(`{"name":"Carol B."}`, IdempotencyKey, "order-17"); reused.Version <= other.Version || reused.Fields["name"] != "Carol B." {
		t.Fatalf("the key on another request: %+v", reused)
	}

	for i := range 2 {
		if code, _, body := doH(t, "DELETE", u+"carol", "", IdempotencyKey, "del-1"); code != 204 {
			t.Fatalf("DELETE try %d with its key: %d %s", i+1, code, body)
		}
	}
	if code, _, _ := doH(t, "DELETE", u+"carol", ""); code != 404 {
		t.Fatalf("DELETE without a key after the delete: %d, want 404", code)
	}

	for _, tc := range []struct {
		hdr  []string
		want string
	}{
		{[]string{IdempotencyKey, strings.Repeat("k", 129)}, "Idempotency-Key is 129 bytes; want 1 to 128 printable ASCII characters"},
		{[]string{IdempotencyKey, "caf\u00e9"}, "Idempotency-Key has byte 0xc3 at offset 3; want printable ASCII (0x20 to 0x7e)"},
		{[]string{IdempotencyKey, "a", IdempotencyKey, "b"}, "Idempotency-Key is given 2 times; give it once"},
	} {
		for _, method := range []string{"PUT", "DELETE"} {
			code, _, body := doH(t, method, u+"dan", `{"a":"b"}`, tc.hdr...)
			if code != 400 || errMsg(t, body) != tc.want {
				t.Errorf("%s with %q: %d %s, want 400 %q", method, tc.hdr, code, body, tc.want)
			}
		}
	}
	if code, _ := do(t, "GET", u+"dan", ""); code != 404 {
		t.Fatalf("a refused write was applied: %d", code)
	}
}

// A member that waits to join a group answers every data request 503,
// saying so (Setup let it start: the table comes with the group's state).
func TestJoiningMemberAnswers503(t *testing.T) {
	const id = 3<<48 | 1764659000000
	base := startDB(t, dbowner.Options{Dir: t.TempDir(), Cluster: dbowner.Cluster{ID: id, Join: true, RequestTimeout: 200 * time.Millisecond}}, httpd.Options{})
	u := base + "/v1/records/"
	want := "joining: this member (0003019adddf72c0) waits to be added to the group; it serves nothing until then"
	for _, req := range [][3]string{
		{"PUT", u + "ada", `{"a":"b"}`}, {"GET", u + "ada", ""}, {"GET", u + "ada?consistency=stale", ""},
		{"DELETE", u + "ada", ""}, {"GET", base + "/v1/records", ""},
	} {
		code, _, body := doH(t, req[0], req[1], req[2])
		if code != 503 || errMsg(t, body) != want {
			t.Errorf("%s %s: %d %s, want 503 %q", req[0], req[1], code, body, want)
		}
	}
}

// Three members in one runtime over loopback TCP, the records API served
// by one of them: cut off from the other two by a partition, it answers
// writes and linearizable reads 503 with Retry-After and the voters it
// reaches, serves consistency=stale reads, and after the partition heals a
// retry of the refused write (same Idempotency-Key) succeeds once.
func TestPartitionedMember(t *testing.T) {
	addrs, err := testport.Addrs(3)
	if err != nil {
		t.Fatal(err)
	}
	ids := []uint64{identity.BootstrapID(0), identity.BootstrapID(1), identity.BootstrapID(2)}
	peers := map[uint64]string{}
	for i, id := range ids {
		peers[id] = addrs[i]
	}
	faults := transporttest.NewFaults(1)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	opts := func(i int, dir string) dbowner.Options {
		return dbowner.Options{Dir: dir, Logger: quiet, Cluster: dbowner.Cluster{ID: ids[i], Peers: peers, PeerAddr: addrs[i], Faults: faults,
			RequestTimeout: time.Second, Tick: 20 * time.Millisecond}}
	}
	// Members 1 and 2 run beside the API's member 0, in the same runtime.
	others := make(chan []*dbowner.DB, 1)
	base := startDBWith(t, opts(0, t.TempDir()), httpd.Options{}, func(f *runtime.Fiber) func(*runtime.Fiber) {
		var dbs []*dbowner.DB
		for i := 1; i < 3; i++ {
			db, err := dbowner.Open(f, opts(i, t.TempDir()))
			if err != nil {
				t.Error(err)
				continue
			}
			dbs = append(dbs, db)
		}
		others <- dbs
		return func(f *runtime.Fiber) {
			for _, db := range dbs {
				db.Close(f)
			}
		}
	})
	if dbs := <-others; len(dbs) != 2 {
		t.Fatal("the other members did not open")
	}
	u := base + "/v1/records/"
	var first string
	eventually(t, "a write through member 0", func() (bool, string) {
		code, _, body := doH(t, "PUT", u+"ada", `{"name":"Ada"}`)
		first = body
		return code == 200, body
	})

	faults.Partition([]uint64{ids[0]}, []uint64{ids[1], ids[2]})
	code, hdr, body := doH(t, "PUT", u+"bob", `{"name":"Bob"}`, IdempotencyKey, "bob-1")
	if code != 503 || hdr.Get("Retry-After") != "1" || !strings.HasPrefix(errMsg(t, body), "no quorum: 1 of 3 voters reachable") ||
		!strings.HasSuffix(errMsg(t, body), "; the write may still be applied: retry it with the same Idempotency-Key") {
		t.Fatalf("PUT in the minority: %d %v %s", code, hdr, body)
	}
	code, hdr, body = doH(t, "GET", u+"ada", "")
	if code != 503 || hdr.Get("Retry-After") != "1" || !strings.HasPrefix(errMsg(t, body), "no quorum: ") || !strings.HasSuffix(errMsg(t, body), "; retry later") {
		t.Fatalf("linearizable GET in the minority: %d %v %s", code, hdr, body)
	}
	if code, body := do(t, "GET", u+"ada?consistency=stale", ""); code != 200 || body != first {
		t.Fatalf("stale GET in the minority: %d %s, want %s", code, body, first)
	}
	if code, body := do(t, "GET", base+"/v1/records?consistency=stale", ""); code != 200 || !strings.Contains(body, `"key":"ada"`) {
		t.Fatalf("stale list in the minority: %d %s", code, body)
	}

	faults.Heal()
	var bob string
	eventually(t, "the retried write after healing", func() (bool, string) {
		code, _, body := doH(t, "PUT", u+"bob", `{"name":"Bob"}`, IdempotencyKey, "bob-1")
		bob = body
		return code == 200, body
	})
	if code, _, again := doH(t, "PUT", u+"bob", `{"name":"Bob"}`, IdempotencyKey, "bob-1"); code != 200 || again != bob {
		t.Fatalf("one more retry: %d %s, want the first answer %s", code, again, bob)
	}
	if code, body := do(t, "GET", u+"bob", ""); code != 200 || body != bob {
		t.Fatalf("linearizable GET after healing: %d %s, want %s", code, body, bob)
	}
}

// eventually polls cond every 20ms, at most 1500 times (30s: a bound, not a
// timing assertion).
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	last := ""
	for range 1500 {
		ok, s := cond()
		if ok {
			return
		}
		last = s
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: never happened; last: %s", what, last)
}
