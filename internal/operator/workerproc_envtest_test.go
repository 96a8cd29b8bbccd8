package operator_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/config"
	"github.com/writeonce/wo/internal/operator"
)

// The process tests run real worker processes in place of the pods the
// StatefulSet asks for. There is no kubelet: procKubelet starts a worker per
// pod on loopback, with the pod's rendered settings (the ConfigMap's
// worker.toml as its --config, so cluster.state follows the operator; the
// Secrets' certificates and token as files; WO_PEERS as rendered) and
// peer.dial_map mapping every pod's stable DNS name to the loopback port
// that stands in for it.

// workerSettingsMissing names the worker settings the process tests need
// that this worker does not have; empty when it has them all.
func workerSettingsMissing() []string {
	have := map[string]bool{}
	for _, k := range config.Keys() {
		have[k] = true
	}
	var missing []string
	for _, k := range []string{"cluster.peers", "cluster.state", "cluster.ordinal", "peer.addr", "peer.dial_map", "peer.cert", "peer.key", "peer.ca", "admin.token_file"} {
		if !have[k] {
			missing = append(missing, k)
		}
	}
	return missing
}

var (
	workerBinOnce sync.Once
	workerBinPath string
	workerBinErr  error
)

// workerBinary builds cmd/worker once per test binary (without -race: the
// operator under test is what this package's race detector watches).
func workerBinary(t *testing.T) string {
	t.Helper()
	workerBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "wo-operator-worker")
		if err != nil {
			workerBinErr = err
			return
		}
		workerBinPath = filepath.Join(dir, "worker")
		out, err := exec.Command("go", "build", "-o", workerBinPath, "../../cmd/worker").CombinedOutput()
		if err != nil {
			workerBinErr = fmt.Errorf("go build ./cmd/worker: %v\n%s", err, out)
		}
	})
	if workerBinErr != nil {
		t.Fatal(workerBinErr)
	}
	return workerBinPath
}

var listeningLine = regexp.MustCompile(`worker: listening" ops=(\S+) http=(\S+) chat=(\S+)`)

// procKubelet runs worker processes for one Worker's StatefulSet.
type procKubelet struct {
	t         *testing.T
	ns, name  string
	bin, root string
	peerPorts []int // by ordinal, chosen before any worker starts

	mu    sync.Mutex
	procs map[int]*workerProc
	pvcs  map[int]bool

	cancel context.CancelFunc
	done   chan struct{}
}

type workerProc struct {
	cmd    *exec.Cmd
	http   string
	exited chan error
	logs   *bytes.Buffer
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

func startProcKubelet(t *testing.T, ns, name string, maxPods int) *procKubelet {
	t.Helper()
	k := &procKubelet{t: t, ns: ns, name: name, bin: workerBinary(t), root: t.TempDir(),
		peerPorts: freePorts(t, maxPods), procs: map[int]*workerProc{}, pvcs: map[int]bool{}, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	k.cancel = cancel
	go k.run(ctx)
	t.Cleanup(k.stop)
	return k
}

func (k *procKubelet) stop() {
	k.cancel()
	<-k.done
	k.mu.Lock()
	defer k.mu.Unlock()
	for ord := range k.procs {
		k.killLocked(ord)
	}
}

func (k *procKubelet) run(ctx context.Context) {
	defer close(k.done)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		k.pass(ctx)
	}
}

func (k *procKubelet) pass(ctx context.Context) {
	var sts appsv1.StatefulSet
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: k.ns, Name: k.name}, &sts); err != nil {
		return
	}
	want := int(*sts.Spec.Replicas)
	k.mu.Lock()
	defer k.mu.Unlock()
	for ord := range k.procs {
		if ord >= want {
			k.killLocked(ord)
		}
	}
	for ord := 0; ord < want && ord < len(k.peerPorts); ord++ {
		p := k.procs[ord]
		if p != nil {
			select {
			case err := <-p.exited:
				k.t.Logf("pod %d exited: %v\n%s", ord, err, p.logs)
				delete(k.procs, ord)
			default:
				continue
			}
		}
		if err := k.startLocked(ctx, ord); err != nil {
			k.t.Logf("start pod %d: %v", ord, err)
		}
	}
	// Claims: one per started pod; a claim the operator deleted wipes the
	// pod's data directory (the pod is gone by then).
	for ord := range k.pvcs {
		var pvc corev1.PersistentVolumeClaim
		err := k8s.Get(ctx, types.NamespacedName{Namespace: k.ns, Name: fmt.Sprintf("data-%s-%d", k.name, ord)}, &pvc)
		if apierrors.IsNotFound(err) || (err == nil && !pvc.DeletionTimestamp.IsZero()) {
			if k.procs[ord] != nil {
				// The operator shrinks the StatefulSet before it
				// deletes claims, maybe since this pass read it; the
				// pod then goes first, as pvc-protection makes a
				// kubelet's do.
				var now appsv1.StatefulSet
				if err := k8s.Get(ctx, types.NamespacedName{Namespace: k.ns, Name: k.name}, &now); err != nil || ord < int(*now.Spec.Replicas) {
					k.t.Errorf("claim of running pod %d deleted", ord)
					continue
				}
				k.killLocked(ord)
			}
			os.RemoveAll(filepath.Join(k.root, "data", strconv.Itoa(ord)))
			delete(k.pvcs, ord)
			if err == nil {
				pvc.Finalizers = nil
				_ = k8s.Update(ctx, &pvc)
			}
		}
	}
}

// startLocked starts the worker for one pod with the files the pod would
// mount, read from the operator's ConfigMap and Secrets now.
func (k *procKubelet) startLocked(ctx context.Context, ord int) error {
	var cm corev1.ConfigMap
	var tlsSecret, token corev1.Secret
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: k.ns, Name: k.name + "-config"}, &cm); err != nil {
		return err
	}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: k.ns, Name: k.name + "-peer-tls"}, &tlsSecret); err != nil {
		return err
	}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: k.ns, Name: k.name + "-admin-token"}, &token); err != nil {
		return err
	}
	pod := fmt.Sprintf("%s-%d", k.name, ord)
	dir := filepath.Join(k.root, "pods", pod)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	files := map[string][]byte{
		"worker.toml": []byte(cm.Data["worker.toml"]),
		"ca.crt":      tlsSecret.Data["ca.crt"],
		"tls.crt":     tlsSecret.Data[pod+".crt"],
		"tls.key":     tlsSecret.Data[pod+".key"],
		"token":       token.Data["token"],
	}
	for name, b := range files {
		if len(b) == 0 {
			return fmt.Errorf("pod %s: nothing for %s yet", pod, name)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return err
		}
	}
	data := filepath.Join(k.root, "data", strconv.Itoa(ord))
	if err := os.MkdirAll(data, 0o700); err != nil {
		return err
	}
	var dial []string
	for i, port := range k.peerPorts {
		dial = append(dial, fmt.Sprintf("%s-%d.%s-headless.%s.svc:%d=127.0.0.1:%d", k.name, i, k.name, k.ns, operator.PortPeer, port))
	}
	cmd := exec.Command(k.bin, "--config", filepath.Join(dir, "worker.toml"), "--data-dir", data,
		"--http-addr", "127.0.0.1:0", "--ops-addr", "127.0.0.1:0", "--chat-addr", "127.0.0.1:0")
	// The environment the pod template renders, with the pod-specific
	// paths made local; WO_ORDINAL because this host's name is not the pod's.
	cmd.Env = append(os.Environ(),
		"WO_SHARDS=1",
		"WO_ORDINAL="+strconv.Itoa(ord),
		"WO_PEERS=0="+fmt.Sprintf("%s-0.%s-headless.%s.svc:%d", k.name, k.name, k.ns, operator.PortPeer),
		"WO_PEER_ADDR=127.0.0.1:"+strconv.Itoa(k.peerPorts[ord]),
		"WO_PEER_DIAL_MAP="+strings.Join(dial, ","),
		"WO_PEER_CERT="+filepath.Join(dir, "tls.crt"),
		"WO_PEER_KEY="+filepath.Join(dir, "tls.key"),
		"WO_PEER_CA="+filepath.Join(dir, "ca.crt"),
		"WO_ADMIN_TOKEN_FILE="+filepath.Join(dir, "token"),
	)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	p := &workerProc{cmd: cmd, exited: make(chan error, 1), logs: &bytes.Buffer{}}
	addrs := make(chan [2]string, 1)
	var logMu sync.Mutex
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			logMu.Lock()
			p.logs.WriteString(sc.Text() + "\n")
			logMu.Unlock()
			if m := listeningLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addrs <- [2]string{m[1], m[2]}:
				default:
				}
			}
		}
	}()
	go func() {
		<-logDone
		p.exited <- cmd.Wait()
	}()
	select {
	case a := <-addrs:
		p.http = "http://" + a[1]
		podURLs.Store(k.ns+"/"+pod, "http://"+a[0])
	case err := <-p.exited:
		return fmt.Errorf("pod %s exited before listening: %v\n%s", pod, err, p.logs)
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		return fmt.Errorf("pod %s did not report its ports", pod)
	}
	k.procs[ord] = p
	if !k.pvcs[ord] {
		pvc := &corev1.PersistentVolumeClaim{}
		pvc.Namespace, pvc.Name = k.ns, "data-"+pod
		pvc.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
		pvc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resourceOneGi}
		if err := k8s.Create(ctx, pvc); err == nil || apierrors.IsAlreadyExists(err) {
			k.pvcs[ord] = true
		}
	}
	return nil
}

// killLocked ends a pod: SIGTERM, as the kubelet does on a scale-down.
func (k *procKubelet) killLocked(ord int) {
	p := k.procs[ord]
	delete(k.procs, ord)
	podURLs.Delete(fmt.Sprintf("%s/%s-%d", k.ns, k.name, ord))
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// httpURLs are the data-plane URLs of the running pods.
func (k *procKubelet) httpURLs() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for _, p := range k.procs {
		out = append(out, p.http)
	}
	slices.Sort(out)
	return out
}

// TestRealWorkersFollowKubectlScale is the end-to-end test: kubectl
// scale 1 -> 3 -> 5 -> 3 -> 1 with real worker processes as the pods, under
// a steady write load; every acknowledged write is read back (a
// linearizable read, the default) from the group at every step.
func TestRealWorkersFollowKubectlScale(t *testing.T) {
	needEnv(t)
	if missing := workerSettingsMissing(); len(missing) > 0 {
		t.Skipf("SKIPPED: the worker has no %s setting yet (internal/config); this test needs the worker side of issue 13 "+
			"(branch r3-core STAGE2: cluster.peers/state/ordinal, peer.addr/cert/key/ca and peer.dial_map wired into the worker; "+
			"branch r3-api: the admin API behind admin.token_file)", strings.Join(missing, ", "))
	}
	ns := newNamespace(t)
	startOperator(t, ns, operatorConfig)
	ctx := context.Background()

	w := newWorker(ns, workerName(), "1", wov1.PinningNone)
	if err := k8s.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	getStatefulSet(t, ns, w.Name)
	k := startProcKubelet(t, ns, w.Name, 5)

	// The load: one writer, keys in sequence, an acknowledged key recorded.
	var acked sync.Map
	var n atomic.Int64
	loadCtx, stopLoad := context.WithCancel(ctx)
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		hc := &http.Client{Timeout: 10 * time.Second}
		defer hc.CloseIdleConnections()
		for loadCtx.Err() == nil {
			urls := k.httpURLs()
			if len(urls) == 0 {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			i := n.Add(1)
			key := fmt.Sprintf("k%06d", i)
			req, _ := http.NewRequestWithContext(loadCtx, http.MethodPut, urls[int(i)%len(urls)]+"/v1/records/"+key, strings.NewReader(`{"n":"`+strconv.FormatInt(i, 10)+`"}`))
			if resp, err := hc.Do(req); err == nil {
				if resp.StatusCode == http.StatusOK {
					acked.Store(key, true)
				}
				resp.Body.Close()
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	defer func() { stopLoad(); <-loadDone }()

	checkAcked := func(step string) {
		t.Helper()
		urls := k.httpURLs()
		if len(urls) == 0 {
			t.Fatalf("%s: no pod runs", step)
		}
		hc := &http.Client{Timeout: 10 * time.Second}
		defer hc.CloseIdleConnections()
		lost, count := 0, 0
		acked.Range(func(key, _ any) bool {
			count++
			eventually(t, step+": read "+key.(string), func() error {
				resp, err := hc.Get(urls[count%len(urls)] + "/v1/records/" + key.(string))
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
					return nil
				case http.StatusNotFound:
					lost++
					return nil
				}
				return fmt.Errorf("GET %s: %d", key, resp.StatusCode)
			})
			return true
		})
		if lost > 0 {
			t.Errorf("%s: %d of %d acknowledged writes lost", step, lost, count)
		}
		t.Logf("%s: %d acknowledged writes read back", step, count)
	}

	steps := []struct {
		replicas int
		want     []string
	}{
		{1, []string{"0:voter"}},
		{3, []string{"0:voter", "1:voter", "2:voter"}},
		{5, []string{"0:voter", "1:voter", "2:voter", "3:learner", "4:learner"}},
		{3, []string{"0:voter", "1:voter", "2:voter"}},
		{1, []string{"0:voter"}},
	}
	for _, s := range steps {
		runKubectl(t, "-n", ns, "scale", "worker/"+w.Name, "--replicas="+strconv.Itoa(s.replicas))
		eventually(t, fmt.Sprintf("scale to %d", s.replicas), func() error {
			got := getWorker(t, w)
			var roles []string
			for _, m := range got.Status.Members {
				roles = append(roles, strings.TrimPrefix(m.Pod, w.Name+"-")+":"+m.Role)
			}
			slices.Sort(roles)
			if !slices.Equal(roles, s.want) || len(got.Status.Draining) != 0 || len(k.httpURLs()) != s.replicas {
				return fmt.Errorf("members %v draining %v pods %d", roles, got.Status.Draining, len(k.httpURLs()))
			}
			return nil
		})
		checkAcked(fmt.Sprintf("at %d pods", s.replicas))
	}
}
