package adminapi

import (
	"encoding/json"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A view with no leader known (Leader 0, as a joining member or an
// election reports it) survives the wire; ParseID, for IDs people type,
// still refuses 0.
func TestZeroIDOnTheWire(t *testing.T) {
	in := Cluster{Self: 3<<48 | 5, State: StateJoining, Members: []Member{}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out Cluster
	if err := json.Unmarshal(b, &out); err != nil || out.Leader != 0 || out.Self != in.Self {
		t.Fatalf("%s -> %+v, %v", b, out, err)
	}
	for _, s := range []string{`{"to":"0"}`, `{"to":"0000000000000000"}`} {
		var tl TransferLeader
		if err := json.Unmarshal([]byte(s), &tl); err != nil || tl.To != 0 {
			t.Fatalf("%s: %+v %v", s, tl, err)
		}
	}
	var tl TransferLeader
	if err := json.Unmarshal([]byte(`{"to":"00000000000000000"}`), &tl); err == nil {
		t.Fatal("17 digits accepted")
	}
	if _, err := ParseID("0"); err == nil {
		t.Fatal("ParseID accepted 0")
	}
}
