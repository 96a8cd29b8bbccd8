package operator_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/adminapi"
	"github.com/writeonce/wo/internal/config"
	"github.com/writeonce/wo/internal/config/keys"
	"github.com/writeonce/wo/internal/operator/render"
	"github.com/writeonce/wo/internal/testport"
	"github.com/writeonce/wo/internal/tokenfile"
)

// The process tests run real worker processes in place of the pods the
// StatefulSet asks for. There is no kubelet: procKubelet starts a worker per
// pod on loopback, with the pod's rendered settings (the ConfigMap's
// worker.toml as its --config, so cluster.state follows the operator; the
// Secrets as volumes, projected and updated as the kubelet does, see
// projectVolume; WO_PEERS as rendered) and peer.dial_map mapping every
// pod's stable DNS name to the loopback port that stands in for it. It
// probes each pod's /readyz, as a readiness probe does, and the ready pods'
// data ports are the endpoints clients use, as they would the Service's.

// workerSettingsMissing names the worker settings the process tests need
// that this worker does not have; empty when it has them all.
func workerSettingsMissing() []string {
	have := map[string]bool{}
	for _, k := range config.Keys() {
		have[k] = true
	}
	var missing []string
	for _, k := range []keys.Key{keys.Peers, keys.ClusterState, keys.Ordinal, keys.PeerAddr, keys.PeerDialMap, keys.PeerCert, keys.PeerKey, keys.PeerCA, keys.AdminTokenFile} {
		if !have[k.File] {
			missing = append(missing, k.File)
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

// The pod's volumes, by the names the StatefulSet's template gives them.
const (
	volConfig     = "config"
	volPeerTLS    = "peer-tls"
	volAdminToken = "admin-token"
)

// maxSyncLag bounds the random delay before a running pod's volume shows
// a changed ConfigMap or Secret (a kubelet's takes up to its sync period
// plus its cache's TTL; short here, so that tests waiting for a rotation
// do not wait long, and random, so that the pods see a change at different
// times, as they do in a cluster).
const maxSyncLag = 1500 * time.Millisecond

// procKubelet runs worker processes for one Worker's StatefulSet.
type procKubelet struct {
	t         *testing.T
	ns, name  string
	bin, root string
	peerPorts []int // by ordinal, chosen before any worker starts
	probe     *http.Client

	mu    sync.Mutex
	procs map[int]*workerProc
	pvcs  map[int]bool
	all   []*workerProc // every process started, for their logs
	// terminating are the pods sent SIGTERM and not yet exited, by
	// ordinal: closed once the process is gone. Their ordinal starts no
	// new pod and their claim is not wiped until then.
	terminating map[int]chan struct{}

	// eps are the data-plane URLs of the ready pods (sorted).
	eps atomic.Pointer[[]string]

	loop *kubeletLoop
}

type workerProc struct {
	pod       string
	cmd       *exec.Cmd
	http, ops string
	exited    chan error
	logMu     sync.Mutex
	logs      bytes.Buffer // its stderr
	ready     bool
	// mounted is what each volume shows now; pending, a change the
	// pod's volume shows once its due time passes.
	mounted map[string]map[string][]byte
	pending map[string]*pendingVolume
}

type pendingVolume struct {
	files map[string][]byte
	due   time.Time
}

// freePorts reserves the pods' peer ports for the test's life: a pod
// restarted (or re-created after a scale-down) binds the port it had, which
// a port from the kernel's ephemeral range would not promise.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports, err := testport.Reserve(n)
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

func startProcKubelet(t *testing.T, ns, name string, maxPods int) *procKubelet {
	t.Helper()
	k := &procKubelet{t: t, ns: ns, name: name, bin: workerBinary(t), root: t.TempDir(),
		peerPorts: freePorts(t, maxPods), probe: &http.Client{Timeout: time.Second, Transport: http.DefaultTransport.(*http.Transport).Clone()},
		procs: map[int]*workerProc{}, pvcs: map[int]bool{}, terminating: map[int]chan struct{}{}}
	k.eps.Store(&[]string{})
	k.loop = startKubeletLoop(200*time.Millisecond, k.pass)
	t.Cleanup(k.stop)
	return k
}

func (k *procKubelet) stop() {
	k.loop.stop()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.killLocked(slices.Collect(maps.Keys(k.procs))...)
	for _, gone := range k.terminating {
		<-gone
	}
	k.probe.CloseIdleConnections()
}

func (k *procKubelet) pass(ctx context.Context) {
	var sts appsv1.StatefulSet
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: k.ns, Name: k.name}, &sts); err != nil {
		return
	}
	want := int(*sts.Spec.Replicas)
	vols, volErr := k.volumes(ctx)
	k.mu.Lock()
	defer k.mu.Unlock()
	for ord, gone := range k.terminating {
		select {
		case <-gone:
			delete(k.terminating, ord)
		default:
		}
	}
	var gone []int
	for ord := range k.procs {
		if ord >= want {
			gone = append(gone, ord)
		}
	}
	k.killLocked(gone...)
	for ord := 0; ord < want && ord < len(k.peerPorts); ord++ {
		if p := k.procs[ord]; p != nil {
			select {
			case err := <-p.exited:
				k.t.Logf("pod %s exited: %v\n%s", p.pod, err, p.log())
				k.forgetLocked(ord)
			default:
				if volErr == nil {
					k.syncVolumesLocked(p, vols)
				}
				continue
			}
		}
		if _, busy := k.terminating[ord]; busy || volErr != nil {
			continue
		}
		if err := k.startLocked(ctx, ord, vols); err != nil {
			k.t.Logf("start pod %d: %v", ord, err)
		}
	}
	// Claims: one per started pod; a claim the operator deleted wipes the
	// pod's data directory (the pod is gone by then).
	for ord := range k.pvcs {
		if _, busy := k.terminating[ord]; busy {
			continue // its data directory is wiped once the process is gone
		}
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
				continue
			}
			os.RemoveAll(filepath.Join(k.root, "data", strconv.Itoa(ord)))
			delete(k.pvcs, ord)
			if err == nil {
				pvc.Finalizers = nil
				_ = k8s.Update(ctx, &pvc)
			}
		}
	}
	k.probeLocked(ctx)
}

// volumes reads what the pods' volumes should show now: the whole
// ConfigMap and the whole Secrets, as the StatefulSet's template mounts
// them.
func (k *procKubelet) volumes(ctx context.Context) (map[string]map[string][]byte, error) {
	var cm corev1.ConfigMap
	var tlsSecret, token corev1.Secret
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: k.ns, Name: k.name + "-config"}, &cm); err != nil {
		return nil, err
	}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: k.ns, Name: k.name + "-peer-tls"}, &tlsSecret); err != nil {
		return nil, err
	}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: k.ns, Name: k.name + "-admin-token"}, &token); err != nil {
		return nil, err
	}
	config := map[string][]byte{}
	for name, v := range cm.Data {
		config[name] = []byte(v)
	}
	return map[string]map[string][]byte{volConfig: config, volPeerTLS: tlsSecret.Data, volAdminToken: token.Data}, nil
}

func (k *procKubelet) podDir(pod, vol string) string { return filepath.Join(k.root, "pods", pod, vol) }

// syncVolumesLocked brings a running pod's volumes to vols, each change
// after a random lag of its own.
func (k *procKubelet) syncVolumesLocked(p *workerProc, vols map[string]map[string][]byte) {
	now := time.Now()
	for vol, files := range vols {
		if sameFiles(p.mounted[vol], files) {
			delete(p.pending, vol)
			continue
		}
		pend := p.pending[vol]
		if pend == nil {
			p.pending[vol] = &pendingVolume{files: files, due: now.Add(rand.N(maxSyncLag))}
			continue
		}
		// The kubelet shows what is current when its sync comes.
		pend.files = files
		if now.Before(pend.due) {
			continue
		}
		if err := projectVolume(k.podDir(p.pod, vol), files); err != nil {
			k.t.Errorf("pod %s: %v", p.pod, err)
			continue
		}
		p.mounted[vol] = files
		delete(p.pending, vol)
		k.t.Logf("pod %s: volume %s updated (%s)", p.pod, vol, strings.Join(slices.Sorted(maps.Keys(files)), " "))
	}
}

// startLocked starts the worker for one pod with the volumes it would
// mount.
func (k *procKubelet) startLocked(ctx context.Context, ord int, vols map[string]map[string][]byte) error {
	pod := fmt.Sprintf("%s-%d", k.name, ord)
	for _, need := range []struct{ vol, key string }{
		{volConfig, render.ConfigFile}, {volPeerTLS, render.PeerCAFile}, {volPeerTLS, pod + ".crt"}, {volPeerTLS, pod + ".key"},
		{volAdminToken, render.AdminTokenFile},
	} {
		if len(vols[need.vol][need.key]) == 0 {
			return fmt.Errorf("pod %s: nothing for %s/%s yet", pod, need.vol, need.key)
		}
	}
	for vol, files := range vols {
		if err := projectVolume(k.podDir(pod, vol), files); err != nil {
			return fmt.Errorf("pod %s: %w", pod, err)
		}
	}
	data := filepath.Join(k.root, "data", strconv.Itoa(ord))
	if err := os.MkdirAll(data, 0o700); err != nil {
		return err
	}
	var dial []string
	for i, port := range k.peerPorts {
		dial = append(dial, fmt.Sprintf("%s-%d.%s-headless.%s.svc:%d=127.0.0.1:%d", k.name, i, k.name, k.ns, render.PortPeer, port))
	}
	tlsDir := k.podDir(pod, volPeerTLS)
	cmd := exec.Command(k.bin, "--config", filepath.Join(k.podDir(pod, volConfig), render.ConfigFile), "--data-dir", data,
		"--http-addr", "127.0.0.1:0", "--ops-addr", "127.0.0.1:0", "--chat-addr", "127.0.0.1:0")
	// The environment the pod template renders, with the pod-specific
	// paths made local; WO_ORDINAL because this host's name is not the pod's.
	cmd.Env = append(os.Environ(),
		"WO_SHARDS=1",
		"WO_ORDINAL="+strconv.Itoa(ord),
		"WO_PEERS=0="+fmt.Sprintf("%s-0.%s-headless.%s.svc:%d", k.name, k.name, k.ns, render.PortPeer),
		"WO_PEER_ADDR=127.0.0.1:"+strconv.Itoa(k.peerPorts[ord]),
		"WO_PEER_DIAL_MAP="+strings.Join(dial, ","),
		"WO_PEER_CERT="+filepath.Join(tlsDir, pod+".crt"),
		"WO_PEER_KEY="+filepath.Join(tlsDir, pod+".key"),
		"WO_PEER_CA="+filepath.Join(tlsDir, render.PeerCAFile),
		"WO_ADMIN_TOKEN_FILE="+filepath.Join(k.podDir(pod, volAdminToken), render.AdminTokenFile),
	)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	p := &workerProc{pod: pod, cmd: cmd, exited: make(chan error, 1),
		mounted: maps.Clone(vols), pending: map[string]*pendingVolume{}}
	k.all = append(k.all, p)
	addrs := make(chan [2]string, 1)
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.logMu.Lock()
			p.logs.WriteString(sc.Text() + "\n")
			p.logMu.Unlock()
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
		p.ops, p.http = "http://"+a[0], "http://"+a[1]
		podURLs.Store(k.ns+"/"+pod, p.ops)
	case err := <-p.exited:
		return fmt.Errorf("pod %s exited before listening: %v\n%s", pod, err, p.log())
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		<-p.exited
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

// probeLocked asks every pod's /readyz, as a readiness probe, and
// publishes the ready pods' data ports as the endpoints.
func (k *procKubelet) probeLocked(ctx context.Context) {
	for _, p := range k.procs {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.ops+"/readyz", nil)
		if err != nil {
			k.t.Errorf("readiness probe of %s: %v", p.pod, err)
			continue
		}
		resp, err := k.probe.Do(req)
		p.ready = err == nil && resp.StatusCode == http.StatusOK
		if err == nil {
			resp.Body.Close()
		}
	}
	k.publishLocked()
}

func (k *procKubelet) publishLocked() {
	eps := []string{}
	for _, p := range k.procs {
		if p.ready {
			eps = append(eps, p.http)
		}
	}
	slices.Sort(eps)
	k.eps.Store(&eps)
}

// forgetLocked drops a pod from the kubelet's books and the endpoints.
func (k *procKubelet) forgetLocked(ord int) {
	if p := k.procs[ord]; p != nil {
		podURLs.Delete(k.ns + "/" + p.pod)
	}
	delete(k.procs, ord)
	k.publishLocked()
}

// killLocked ends pods as the kubelet does on a scale-down: out of the
// endpoints, SIGTERM, and SIGKILL for one still running past the pod's
// grace period. It does not wait: the passes go on probing and updating
// the other pods while these drain.
func (k *procKubelet) killLocked(ords ...int) {
	for _, ord := range ords {
		p := k.procs[ord]
		k.forgetLocked(ord)
		_ = p.cmd.Process.Signal(os.Interrupt)
		gone := make(chan struct{})
		k.terminating[ord] = gone
		go func() {
			defer close(gone)
			select {
			case <-p.exited:
			case <-time.After(time.Duration(render.TerminationGracePeriodSeconds) * time.Second):
				k.t.Logf("pod %s still runs %ds after SIGTERM: SIGKILL", p.pod, render.TerminationGracePeriodSeconds)
				_ = p.cmd.Process.Kill()
				<-p.exited
			}
		}()
	}
}

// tokens are the admin tokens the Secret holds now (newest first) and
// the Secret's annotations.
func (k *procKubelet) tokens(ctx context.Context) ([]string, map[string]string, error) {
	var sec corev1.Secret
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: k.ns, Name: k.name + "-admin-token"}, &sec); err != nil {
		return nil, nil, err
	}
	tokens, err := tokenfile.Parse(sec.Data[render.AdminTokenFile])
	if err != nil {
		return nil, nil, fmt.Errorf("admin token Secret %s: %w", sec.Name, err)
	}
	return tokens, sec.Annotations, nil
}

// admin is a client of pod ord's admin API with the newest token the admin
// Secret holds now.
func (k *procKubelet) admin(ctx context.Context, ord int) (*adminapi.Client, error) {
	tokens, _, err := k.tokens(ctx)
	if err != nil {
		return nil, err
	}
	return k.adminWith(ord, tokens[0])
}

// adminWith is a client of pod ord's admin API with a given token.
func (k *procKubelet) adminWith(ord int, token string) (*adminapi.Client, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	p := k.procs[ord]
	if p == nil {
		return nil, fmt.Errorf("pod %d does not run", ord)
	}
	// The probes' transport, a longer timeout: a leader transfer waits
	// for the target to catch up.
	return &adminapi.Client{Base: p.ops, Token: token, HTTP: &http.Client{Timeout: 15 * time.Second, Transport: k.probe.Transport}}, nil
}

func (p *workerProc) log() string {
	p.logMu.Lock()
	defer p.logMu.Unlock()
	return p.logs.String()
}

// logErrors logs the error lines of every worker the kubelet started:
// what to read when a pod gave an answer no correct member gives.
func (k *procKubelet) logErrors() {
	k.mu.Lock()
	all := slices.Clone(k.all)
	k.mu.Unlock()
	for _, p := range all {
		for line := range strings.Lines(p.log()) {
			if strings.Contains(line, "level=ERROR") {
				k.t.Logf("pod %s: %s", p.pod, strings.TrimSpace(line))
			}
		}
	}
}

// endpoints are the data-plane URLs of the ready pods.
func (k *procKubelet) endpoints() []string { return *k.eps.Load() }

// running is how many pods run, ready or not.
func (k *procKubelet) running() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.procs)
}

// TestRealWorkersFollowKubectlScale is the end-to-end test with
// real worker processes as the pods, under a steady load of concurrent
// clients (procLoad): kubectl scale 1 -> 3 -> 5; voters 3 -> 5 -> 3 at 5
// pods (the demotion with pod 4 leading, so leadership moves first); an
// admin token rotation and a peer CA rotation, each checked on the pods
// themselves; kubectl scale 5 -> 3 -> 1. In the middle of the scale-down 5 -> 3 the operator is
// stopped (right after its first member removal took effect, before it
// heard so), stays down while the load goes on, and a new operator
// finishes the scale-down. After every step
// the members are what the spec asks for, the group serves, no
// acknowledged write is lost on any pod, and the whole history of register
// writes and linearizable reads so far is linearizable.
func TestRealWorkersFollowKubectlScale(t *testing.T) {
	needEnv(t)
	if missing := workerSettingsMissing(); len(missing) > 0 {
		t.Skipf("SKIPPED: the worker has no %s setting yet (internal/config); this test needs the worker side of issue 13 "+
			"(branch r3-core STAGE2: cluster.peers/state/ordinal, peer.addr/cert/key/ca and peer.dial_map wired into the worker; "+
			"branch r3-api: the admin API behind admin.token_file)", strings.Join(missing, ", "))
	}
	began := time.Now()
	ns := newNamespace(t)
	w := newWorker(ns, workerName(), "1", wov1.PinningNone)
	hold := newRemovalHold(t, w)
	op := startOperator(t, ns, operatorConfig, hold.tune)
	createWorker(t, w)
	getStatefulSet(t, ns, w.Name)
	k := startProcKubelet(t, ns, w.Name, 5)
	l := startProcLoad(t, k, 5)

	scale := func(n int) []string { return []string{"scale", "worker/" + w.Name, "--replicas=" + strconv.Itoa(n)} }
	voters := func(n int) []string {
		return []string{"patch", "worker/" + w.Name, "--type=merge", "-p", fmt.Sprintf(`{"spec":{"voters":%d}}`, n)}
	}
	var oldToken string
	var oldTLS map[int]adminapi.PeerTLS
	steps := []struct {
		name   string
		before func() // what the test does before the change
		change []string
		want   []string // the members, ORDINAL:ROLE, sorted
		// restart: stop the operator right after the first removal
		// (restartMidScaleDown), start a new one.
		restart bool
		after   func() // more checks once the step is done
	}{
		{name: "at 1 pod", change: scale(1), want: []string{"0:voter"}},
		{name: "at 3 pods", change: scale(3), want: []string{"0:voter", "1:voter", "2:voter"}},
		{name: "at 5 pods", change: scale(5), want: []string{"0:voter", "1:voter", "2:voter", "3:learner", "4:learner"}},
		{name: "at 5 voters", change: voters(5), want: []string{"0:voter", "1:voter", "2:voter", "3:voter", "4:voter"}},
		{
			name: "at 3 voters (demoted)", change: voters(3),
			before: func() { moveLeader(t, k, 4) },
			want:   []string{"0:voter", "1:voter", "2:voter", "3:learner", "4:learner"},
			after: func() {
				if l := getWorker(t, w).Status.Leader; l == w.Name+"-3" || l == w.Name+"-4" {
					t.Errorf("leader %s is a learner now", l)
				}
				eventually(t, "a MemberDemoted event", func() error { return findEvent(ns, w.Name, "MemberDemoted") })
			},
		},
		{
			name: "admin token rotated", change: []string{"annotate", "worker/" + w.Name, wov1.AnnotationRotateAdminToken + "=e2e-1", "--overwrite"},
			before: func() { oldToken = currentToken(t, k) },
			want:   []string{"0:voter", "1:voter", "2:voter", "3:learner", "4:learner"},
			after:  func() { waitTokenRotated(t, k, w, oldToken, "e2e-1") },
		},
		{
			name: "peer CA rotated", change: []string{"annotate", "worker/" + w.Name, wov1.AnnotationRotatePeerCA + "=e2e-1", "--overwrite"},
			before: func() { oldTLS = peerTLSViews(t, k) },
			want:   []string{"0:voter", "1:voter", "2:voter", "3:learner", "4:learner"},
			after:  func() { waitCARotated(t, k, w, oldTLS) },
		},
		// The operator drives membership with the new token.
		{name: "at 3 pods again", change: scale(3), want: []string{"0:voter", "1:voter", "2:voter"}, restart: true},
		{name: "at 1 pod again", change: scale(1), want: []string{"0:voter"}},
	}
	for _, s := range steps {
		l.beginStep(s.name)
		if s.before != nil {
			s.before()
		}
		stepStart := time.Now()
		if s.restart {
			op = restartMidScaleDown(t, l, hold, op, w, ns, s.change)
		} else {
			runKubectl(t, append([]string{"-n", ns}, s.change...)...)
		}
		waitMembers(t, s.name, w, k, s.want)
		t.Logf("%s: kubectl %s done after %s", s.name, strings.Join(s.change, " "), time.Since(stepStart).Round(time.Millisecond))
		if s.after != nil {
			s.after()
		}
		// The group serves in its new shape before it is judged.
		l.waitAnswered(t, s.name+": the load is answered", 200)
		l.check(t, s.name)
	}
	l.stop()
	l.beginStep("after the load")
	l.check(t, "after the load")
	t.Logf("%d steps under %d clients, with an operator restart: %s", len(steps), l.clients, time.Since(began).Round(time.Second))
}

func currentToken(t *testing.T, k *procKubelet) string {
	t.Helper()
	tokens, _, err := k.tokens(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(tokens) != 1 {
		t.Fatalf("admin token Secret holds %d tokens before a rotation, want 1", len(tokens))
	}
	return tokens[0]
}

// waitTokenRotated waits until the rotation asked for by the annotation
// value is done (the Secret says it handled it, holds one token, not old,
// and no phase, in the annotations docs/kubernetes.md names; the Worker's
// AdminTokenRotating is False), then until every
// running pod refuses the old token (its file updated) and accepts the
// new.
func waitTokenRotated(t *testing.T, k *procKubelet, w *wov1.Worker, old, value string) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	var newToken string
	eventually(t, "the admin token rotation is done", func() error {
		tokens, ann, err := k.tokens(ctx)
		if err != nil {
			return err
		}
		c := condition(getWorker(t, w), wov1.ConditionAdminTokenRotating)
		if len(tokens) != 1 || tokens[0] == old || ann["wo.writeonce.dev/rotate-admin-token-handled"] != value || ann["wo.writeonce.dev/admin-token-phase"] != "" ||
			c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("%d tokens (the old one first: %v), annotations %v, condition %+v", len(tokens), len(tokens) > 0 && tokens[0] == old, ann, c)
		}
		newToken = tokens[0]
		return nil
	})
	done := time.Since(start)
	for ord := range k.peerPorts {
		if _, err := k.adminWith(ord, old); err != nil {
			continue // not running
		}
		eventually(t, fmt.Sprintf("pod %d refuses the old admin token and accepts the new", ord), func() error {
			withOld, err := k.adminWith(ord, old)
			if err != nil {
				return err
			}
			var se *adminapi.StatusError
			if _, err := withOld.Cluster(ctx); !errors.As(err, &se) || se.Code != http.StatusUnauthorized {
				return fmt.Errorf("the old token: %v, want 401", err)
			}
			withNew, err := k.adminWith(ord, newToken)
			if err != nil {
				return err
			}
			_, err = withNew.Cluster(ctx)
			return err
		})
	}
	t.Logf("admin token rotated in %s; every pod refuses the old token %s after the annotation", done.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

// peerTLSViews is what every running pod's peer port presents and trusts
// now (GET /admin/cluster's peer_tls), by ordinal.
func peerTLSViews(t *testing.T, k *procKubelet) map[int]adminapi.PeerTLS {
	t.Helper()
	views := map[int]adminapi.PeerTLS{}
	for ord := range k.peerPorts {
		c, err := k.admin(context.Background(), ord)
		if err != nil {
			continue // not running
		}
		eventually(t, fmt.Sprintf("pod %d's peer TLS view", ord), func() error {
			v, err := c.Cluster(context.Background())
			if err != nil {
				return err
			}
			if v.PeerTLS == nil || v.PeerTLS.Cert == "" || len(v.PeerTLS.CAs) == 0 {
				return fmt.Errorf("peer_tls %+v", v.PeerTLS)
			}
			views[ord] = *v.PeerTLS
			return nil
		})
	}
	return views
}

// waitCARotated waits until the Worker's PeerCARotating is False again and
// every pod that ran before trusts one CA, not the old one, and presents a
// leaf other than its old one: the rotation went through every phase on
// the pods themselves, with the load running.
func waitCARotated(t *testing.T, k *procKubelet, w *wov1.Worker, old map[int]adminapi.PeerTLS) {
	t.Helper()
	start := time.Now()
	eventually(t, "the peer CA rotation is done on every pod", func() error {
		if c := condition(getWorker(t, w), wov1.ConditionPeerCARotating); c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("PeerCARotating %+v", c)
		}
		now := peerTLSViews(t, k)
		for ord, was := range old {
			v, ok := now[ord]
			switch {
			case !ok:
				return fmt.Errorf("pod %d gave no peer TLS view", ord)
			case len(v.CAs) != 1 || slices.Contains(was.CAs, v.CAs[0]):
				return fmt.Errorf("pod %d trusts %v (before: %v)", ord, v.CAs, was.CAs)
			case v.Cert == was.Cert:
				return fmt.Errorf("pod %d presents its old leaf %s", ord, v.Cert)
			}
		}
		return nil
	})
	t.Logf("peer CA rotated on %d pods in %s", len(old), time.Since(start).Round(time.Millisecond))
}

// moveLeader makes pod ord the group's leader through the admin API (as a
// person would, to test the operator's handling of a leader it must
// move), retrying a transfer that did not take.
func moveLeader(t *testing.T, k *procKubelet, ord int) {
	t.Helper()
	ctx := context.Background()
	eventually(t, fmt.Sprintf("pod %d leads", ord), func() error {
		target, err := k.admin(ctx, ord)
		if err != nil {
			return err
		}
		v, err := target.Cluster(ctx)
		if err != nil {
			return err
		}
		if v.Role == "leader" {
			return nil
		}
		if v.Leader == 0 {
			return fmt.Errorf("pod %d knows no leader", ord)
		}
		leader, err := k.admin(ctx, v.Leader.Ordinal())
		if err != nil {
			return err
		}
		if _, err := leader.TransferLeader(ctx, v.Self); err != nil {
			return fmt.Errorf("transfer to pod %d: %w", ord, err)
		}
		return fmt.Errorf("pod %d was %s, transfer asked", ord, v.Role)
	})
}

// waitMembers waits until the Worker's status lists exactly want (each
// "ordinal:role", sorted), nothing is draining, and as many pods run and
// are ready as want names.
func waitMembers(t *testing.T, step string, w *wov1.Worker, k *procKubelet, want []string) {
	t.Helper()
	eventually(t, step, func() error {
		got := getWorker(t, w)
		var roles []string
		for _, m := range got.Status.Members {
			roles = append(roles, strings.TrimPrefix(m.Pod, w.Name+"-")+":"+m.Role)
		}
		slices.Sort(roles)
		if !slices.Equal(roles, want) || len(got.Status.Draining) != 0 || k.running() != len(want) || len(k.endpoints()) != len(want) {
			return fmt.Errorf("members %v draining %v pods %d ready %d", roles, got.Status.Draining, k.running(), len(k.endpoints()))
		}
		return nil
	})
}
