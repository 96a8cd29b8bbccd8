package e2ecluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/writeonce/wo/internal/jaegertest"
)

// jaegerImage is the image hack/cluster-up.sh packs from
// hack/jaeger-binary.sh's static binary and imports into the node's
// containerd (the node pulls nothing).
const jaegerImage = "wo.local/jaeger:1"

// jaegerOTLP is the collector address the chart's Worker exports to: the
// Service's cluster DNS name, which the pods resolve through CoreDNS.
const jaegerOTLP = "http://jaeger." + ns + ".svc.cluster.local:4317"

// jaegerManifest runs Jaeger all-in-one (OTLP/gRPC in, memory storage,
// the query API: jaegertest.Config) as a pod behind a Service, the way a
// user would run a collector beside wo.
var jaegerManifest = `apiVersion: v1
kind: ConfigMap
metadata:
  name: jaeger
data:
  config.yaml: |
` + indent(jaegertest.Config(jaegertest.Endpoints{OTLP: "0.0.0.0:4317", QueryHTTP: "0.0.0.0:16686", QueryGRPC: "0.0.0.0:16685"}), "    ") + `
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

// indent prefixes every line of s with p.
func indent(s, p string) string {
	return p + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+p)
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
		found, err := jaegertest.Query{Base: jaeger}.Search(ctx, "wo-worker", op, 50)
		if err != nil {
			return err
		}
		for _, tr := range found {
			http, db := false, false
			var pid string
			for _, s := range tr.Spans {
				if s.Operation == op {
					http, pid = true, s.ProcessID
				}
				if _, ok := s.Tag("db.system.name"); ok {
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
				if got, _ := proc.Tag(k); got != v {
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
		return fmt.Errorf("no %q trace of wo-worker among %d", op, len(found))
	})
	if err != nil {
		t.Fatalf("traces in the Jaeger pod (%s): %v", jaeger, err)
	}
}
