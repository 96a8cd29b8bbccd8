package jaegertest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"sigs.k8s.io/yaml"
)

// The configuration is YAML whose listeners are the endpoints asked for,
// with the UI's assets only when a directory is given.
func TestConfig(t *testing.T) {
	for _, ui := range []string{"", "/srv/ui"} {
		var c struct {
			Extensions struct {
				Query struct {
					HTTP struct{ Endpoint string } `json:"http"`
					GRPC struct{ Endpoint string } `json:"grpc"`
					UI   *struct {
						AssetsPath string `json:"assets_path"`
					} `json:"ui"`
				} `json:"jaeger_query"`
			} `json:"extensions"`
			Receivers struct {
				OTLP struct {
					Protocols struct {
						GRPC struct{ Endpoint string } `json:"grpc"`
					} `json:"protocols"`
				} `json:"otlp"`
			} `json:"receivers"`
		}
		conf := Config(Endpoints{OTLP: "a:1", QueryHTTP: "b:2", QueryGRPC: "c:3", UI: ui})
		if err := yaml.Unmarshal([]byte(conf), &c); err != nil {
			t.Fatalf("not YAML: %v\n%s", err, conf)
		}
		q := c.Extensions.Query
		if q.HTTP.Endpoint != "b:2" || q.GRPC.Endpoint != "c:3" || c.Receivers.OTLP.Protocols.GRPC.Endpoint != "a:1" {
			t.Errorf("endpoints %+v %+v\n%s", q, c.Receivers, conf)
		}
		if (q.UI != nil) != (ui != "") || (q.UI != nil && q.UI.AssetsPath != ui) {
			t.Errorf("ui %q: %+v\n%s", ui, q.UI, conf)
		}
	}
}

// Search asks for the service, operation, limit and an hour back, and
// reads the spans, their tags and parents, and the processes.
func TestSearch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.URL.Path != "/api/traces" || q.Get("service") != "wo-worker" || q.Get("operation") != "PUT /v1/records/{key}" ||
			q.Get("limit") != "5" || q.Get("lookback") != "1h" {
			http.Error(w, "unexpected "+r.URL.String(), http.StatusBadRequest)
			return
		}
		w.Write([]byte(`{"data":[{"traceID":"t1","spans":[
			{"spanID":"s1","operationName":"PUT /v1/records/{key}","processID":"p1","tags":[{"key":"span.kind","type":"string","value":"server"}]},
			{"spanID":"s2","operationName":"put","processID":"p1","references":[{"refType":"CHILD_OF","traceID":"t1","spanID":"s1"}],
			 "tags":[{"key":"db.system.name","type":"string","value":"wo"},{"key":"wo.shard","type":"int64","value":1}]}],
			"processes":{"p1":{"serviceName":"wo-worker","tags":[{"key":"k8s.pod.name","type":"string","value":"w-0"}]}}}]}`))
	}))
	defer srv.Close()
	ts, err := Query{Base: srv.URL}.Search(context.Background(), "wo-worker", "PUT /v1/records/{key}", 5)
	if err != nil || len(ts) != 1 {
		t.Fatalf("%v %v", ts, err)
	}
	tr := ts[0]
	srvSpan, db := tr.Spans[0], tr.Spans[1]
	if srvSpan.Kind() != "server" || db.Parent() != "s1" || srvSpan.Parent() != "" {
		t.Errorf("kind %q, parents %q %q", srvSpan.Kind(), db.Parent(), srvSpan.Parent())
	}
	if v, ok := db.Tag("wo.shard"); !ok || v != "1" {
		t.Errorf("wo.shard %q %v", v, ok)
	}
	if v, _ := tr.Processes["p1"].Tag("k8s.pod.name"); v != "w-0" {
		t.Errorf("pod %q", v)
	}
	if _, err := (Query{Base: srv.URL}).Search(context.Background(), "other", "x", 5); err == nil {
		t.Error("a 400 answer read as traces")
	}
}
