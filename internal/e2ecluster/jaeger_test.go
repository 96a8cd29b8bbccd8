package e2ecluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// jaegerImage is the image hack/cluster-up.sh packs from
// hack/jaeger-binary.sh's static binary and imports into the node's
// containerd (the node pulls nothing).
const jaegerImage = "wo.local/jaeger:1"

// jaegerOTLP is the collector address the chart's Worker exports to: the
// Service's cluster DNS name, which the pods resolve through CoreDNS.
const jaegerOTLP = "http://jaeger." + ns + ".svc.cluster.local:4317"

// jaegerManifest runs Jaeger all-in-one (OTLP/gRPC in, memory storage,
// the query API) as a pod behind a Service, the way a user would run a
// collector beside wo.
const jaegerManifest = `apiVersion: v1
kind: ConfigMap
metadata:
  name: jaeger
data:
  config.yaml: |
    service:
      extensions: [jaeger_storage, jaeger_query]
      pipelines:
        traces:
          receivers: [otlp]
          processors: [batch]
          exporters: [jaeger_storage_exporter]
      telemetry:
        metrics:
          level: none
    extensions:
      jaeger_storage:
        backends:
          memstore:
            memory:
              max_traces: 10000
      jaeger_query:
        storage:
          traces: memstore
        http:
          endpoint: 0.0.0.0:16686
        grpc:
          endpoint: 0.0.0.0:16685
    receivers:
      otlp:
        protocols:
          grpc:
            endpoint: 0.0.0.0:4317
    processors:
      batch:
        timeout: 200ms
    exporters:
      jaeger_storage_exporter:
        trace_storage: memstore
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: jaeger
spec:
  replicas: 1
  selector:
    matchLabels: {app: jaeger}
  template:
    metadata:
      labels: {app: jaeger}
    spec:
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        seccompProfile: {type: RuntimeDefault}
      containers:
      - name: jaeger
        image: ` + jaegerImage + `
        imagePullPolicy: IfNotPresent
        args: [--config, /etc/jaeger/config.yaml]
        ports:
        - {name: otlp-grpc, containerPort: 4317}
        - {name: query, containerPort: 16686}
        readinessProbe:
          httpGet: {path: /api/services, port: 16686}
          periodSeconds: 2
        resources:
          requests: {cpu: 20m, memory: 64Mi}
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities: {drop: [ALL]}
        volumeMounts:
        - {name: config, mountPath: /etc/jaeger}
      volumes:
      - name: config
        configMap: {name: jaeger}
---
apiVersion: v1
kind: Service
metadata:
  name: jaeger
spec:
  selector: {app: jaeger}
  ports:
  - {name: otlp-grpc, port: 4317}
  - {name: query, port: 16686}
`

// startJaeger applies the manifest and waits for the pod to serve its
// query API; it returns the API's base URL (the pod's address, reachable
// from this machine through the node's routes).
func startJaeger(ctx context.Context, t *testing.T, c *Cluster) string {
	t.Helper()
	if err := c.Apply(ctx, ns, jaegerManifest); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(ctx, c.Kubectl, "-n", ns, "rollout", "status", "deployment/jaeger", "--timeout=3m"); err != nil {
		t.Fatal(err)
	}
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=jaeger"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && podReady(&p) {
			return fmt.Sprintf("http://%s:16686", p.Status.PodIP)
		}
	}
	t.Fatalf("no ready jaeger pod among %d", len(pods.Items))
	return ""
}

// The part of Jaeger's query API JSON (the model its UI reads) the check
// needs.
type jaegerTraces struct {
	Data []struct {
		TraceID string `json:"traceID"`
		Spans   []struct {
			Operation string      `json:"operationName"`
			ProcessID string      `json:"processID"`
			Tags      []jaegerTag `json:"tags"`
		} `json:"spans"`
		Processes map[string]struct {
			ServiceName string      `json:"serviceName"`
			Tags        []jaegerTag `json:"tags"`
		} `json:"processes"`
	} `json:"data"`
}

type jaegerTag struct {
	Key   string `json:"key"`
	Value any    `json:"value"`
}

func tagValue(tags []jaegerTag, key string) (string, bool) {
	for _, t := range tags {
		if t.Key == key {
			return fmt.Sprint(t.Value), true
		}
	}
	return "", false
}

func jaegerSearch(ctx context.Context, base, service, operation string) (jaegerTraces, error) {
	var out jaegerTraces
	q := url.Values{"service": {service}, "operation": {operation}, "limit": {"50"}, "lookback": {"1h"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/traces?"+q.Encode(), nil)
	if err != nil {
		return out, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return out, err
	}
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("GET /api/traces: %s: %s", resp.Status, b)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return out, fmt.Errorf("decode /api/traces: %w", err)
	}
	return out, nil
}

// checkTraces: the PUT that checkService sent through the Service is a
// trace in the Jaeger pod, sent by the pinned Worker's pod over the
// cluster's DNS and network: the HTTP SERVER span, the database call's
// span (db.system.name wo) under it, and the resource the operator gave
// the pod (its Worker, namespace and pod name, the kubelet having
// expanded $(POD_NAME)).
func checkTraces(ctx context.Context, t *testing.T, jaeger string) {
	const op = "PUT /v1/records/{key}"
	var why error
	err := Poll(ctx, 2*time.Second, func(ctx context.Context) error {
		found, err := jaegerSearch(ctx, jaeger, "wo-worker", op)
		if err != nil {
			return err
		}
		for _, tr := range found.Data {
			http, db := false, false
			var pid string
			for _, s := range tr.Spans {
				if s.Operation == op {
					http, pid = true, s.ProcessID
				}
				if _, ok := tagValue(s.Tags, "db.system.name"); ok {
					db = true
				}
			}
			if !http || !db {
				why = fmt.Errorf("trace %s: HTTP span %v, database span %v", tr.TraceID, http, db)
				continue
			}
			proc := tr.Processes[pid]
			want := map[string]string{"wo.worker": pinned, "k8s.namespace.name": ns, "k8s.pod.name": pinned + "-0"}
			for k, v := range want {
				if got, _ := tagValue(proc.Tags, k); got != v {
					why = fmt.Errorf("trace %s: process %s has %s=%q, want %q (tags %v)", tr.TraceID, proc.ServiceName, k, got, v, proc.Tags)
					return why
				}
			}
			t.Logf("trace %s in the Jaeger pod: %d spans, process %s %v", tr.TraceID, len(tr.Spans), proc.ServiceName, proc.Tags)
			return nil
		}
		if why != nil {
			return why
		}
		return fmt.Errorf("no %q trace of wo-worker among %d", op, len(found.Data))
	})
	if err != nil {
		t.Fatalf("traces in the Jaeger pod (%s): %v", jaeger, err)
	}
}
