package operator_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/operator"
	"github.com/writeonce/wo/internal/operator/render"
)

// The suite runs against a real kube-apiserver and etcd started by envtest
// from KUBEBUILDER_ASSETS (hack/envtest-binaries.sh builds them). There is no
// kube-controller-manager and no kubelet: no garbage collector, no
// StatefulSet controller, no pods. The tests play those parts where they
// matter (they write the StatefulSet's status) and say so.
var (
	testEnv    *envtest.Environment
	restConfig *rest.Config
	k8s        client.Client // a direct, uncached client for assertions
	scheme     = runtime.NewScheme()
	kubeconfig string // a kubeconfig file for the real kubectl
	kubectl    string // path of the kubectl binary
	// operatorConfig authenticates as a user bound only to the ClusterRole
	// in config/rbac/role.yaml, so the tests prove the generated RBAC is
	// enough.
	operatorConfig *rest.Config
	skipReason     string
)

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(wov1.AddToScheme(scheme))
}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	flag.Parse()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		skipReason = "KUBEBUILDER_ASSETS is unset: the envtest suite (real kube-apiserver + etcd) is SKIPPED. " +
			"Run hack/operator-test.sh, or KUBEBUILDER_ASSETS=\"$(hack/envtest-binaries.sh)\" go test ./internal/operator/..."
		banner := strings.Repeat("!", 100)
		fmt.Fprintf(os.Stderr, "\n%s\n!!! %s\n%s\n\n", banner, skipReason, banner)
		return m.Run()
	}
	// controller-runtime logs through logr; send it to stderr only when the
	// test is verbose, so a passing run stays quiet.
	level := slog.LevelError
	if testing.Verbose() {
		level = slog.LevelInfo
	}
	ctrl.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))

	testEnv = newEnv(assets)
	var err error
	restConfig, err = testEnv.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "start envtest from %s: %v\n", assets, err)
		return 1
	}
	code := func() int {
		defer func() {
			if err := testEnv.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "stop envtest: %v\n", err)
			}
		}()
		if err := setup(assets); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(filepath.Dir(kubeconfig))
		return m.Run()
	}()
	if code != 0 {
		return code
	}
	// Every manager, informer and client of the tests must be gone once
	// they are stopped. No library goroutine needed ignoring with
	// controller-runtime v0.25.3 and client-go v0.37.0; add an
	// IgnoreTopFunction here, naming the library, if that changes.
	if err := goleak.Find(); err != nil {
		fmt.Fprintf(os.Stderr, "goroutines leaked: %v\n", err)
		return 1
	}
	return 0
}

// newEnv is an API server with wo's CRDs and those in extraCRDs (the
// cert-manager test's, which must own its cluster-scoped CRDs and so runs
// an API server of its own).
func newEnv(assets string, extraCRDs ...string) *envtest.Environment {
	return &envtest.Environment{
		CRDDirectoryPaths:     append([]string{filepath.Join("..", "..", "config", "crd", "bases")}, extraCRDs...),
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
		// The 20 s default is short for a shared 2-core machine.
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
}

func setup(assets string) error {
	var err error
	k8s, err = client.New(restConfig, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	kubectl = filepath.Join(assets, "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		return fmt.Errorf("kubectl binary: %w", err)
	}
	if err := bindOperatorRole(); err != nil {
		return err
	}
	user, err := testEnv.AddUser(envtest.User{Name: "wo-test-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("add kubectl user: %w", err)
	}
	raw, err := user.KubeConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	dir, err := os.MkdirTemp("", "wo-envtest-kubeconfig")
	if err != nil {
		return fmt.Errorf("kubeconfig dir: %w", err)
	}
	kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, raw, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

// bindOperatorRole installs the generated ClusterRole and binds it to a new
// user whose config the operator under test uses.
func bindOperatorRole() error {
	cfg, err := bindOperatorRoleIn(testEnv, k8s)
	operatorConfig = cfg
	return err
}

// bindOperatorRoleIn is bindOperatorRole for any envtest environment (the
// cert-manager test runs its own).
func bindOperatorRoleIn(env *envtest.Environment, k8s client.Client) (*rest.Config, error) {
	ctx := context.Background()
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "role.yaml"))
	if err != nil {
		return nil, fmt.Errorf("read generated role: %w", err)
	}
	var role *rbacv1.ClusterRole
	for _, doc := range strings.Split(string(raw), "\n---") {
		var r rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(doc), &r); err != nil {
			return nil, fmt.Errorf("parse role.yaml: %w", err)
		}
		if r.Kind == "ClusterRole" {
			role = &r
		}
	}
	if role == nil {
		return nil, errors.New("config/rbac/role.yaml has no ClusterRole")
	}
	if err := k8s.Create(ctx, role); err != nil {
		return nil, fmt.Errorf("create ClusterRole: %w", err)
	}
	const userName = "wo-operator-under-test"
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "wo-operator-under-test"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: userName}},
	}
	if err := k8s.Create(ctx, binding); err != nil {
		return nil, fmt.Errorf("create ClusterRoleBinding: %w", err)
	}
	user, err := env.AddUser(envtest.User{Name: userName}, nil)
	if err != nil {
		return nil, fmt.Errorf("add operator user: %w", err)
	}
	return user.Config(), nil
}

// needEnv skips a test that needs the API server when there is none, loudly.
func needEnv(t *testing.T) {
	t.Helper()
	if testEnv == nil {
		t.Skip(skipReason)
	}
}

// newNamespace makes a namespace for one test, so tests do not see each
// other's objects, with the default ServiceAccount that the missing
// kube-controller-manager would have made (pods need it to be admitted).
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "wo-test-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns.Name}}
	if err := k8s.Create(context.Background(), sa); err != nil {
		t.Fatalf("create service account: %v", err)
	}
	// Without a namespace controller the namespace stays Terminating;
	// deleting it still marks the test's objects as garbage.
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), ns) })
	return ns.Name
}

// writeCounter counts mutating requests (anything but GET, HEAD, OPTIONS;
// watches are GETs) that go through a rest.Config.
type writeCounter struct {
	mu     sync.Mutex
	writes []string
}

func (w *writeCounter) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			switch req.Method {
			case http.MethodGet, http.MethodHead, http.MethodOptions:
			default:
				w.mu.Lock()
				w.writes = append(w.writes, req.Method+" "+req.URL.Path)
				w.mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	}
	return cfg
}

func (w *writeCounter) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.writes...)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// runningOperator is a manager with the Worker controller, watching one
// namespace.
type runningOperator struct {
	Reconciler *operator.Reconciler
	stop       func()
}

// startOperator runs the operator the way cmd/operator does (same cache
// options, controller and event recorder), restricted to ns, without leader
// election, metrics or probes (they would bind ports and write Leases).
func startOperator(t *testing.T, ns string, cfg *rest.Config, tune ...func(*operator.Reconciler)) *runningOperator {
	t.Helper()
	cacheOpts := operator.CacheOptions()
	cacheOpts.DefaultNamespaces = map[string]cache.Config{ns: {}}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  cacheOpts,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Each test starts its own manager with the same controller name.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatalf("new manager: %v", err)
	}
	r := &operator.Reconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder("wo-operator"),
		Options:  render.Options{DefaultImage: "example/wo-worker:test"},
		// Pods are whatever the test runs in their place, on loopback.
		AdminURL: testAdminURL,
	}
	for _, f := range tune {
		f(r)
	}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatalf("setup: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	op := &runningOperator{Reconciler: r}
	op.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("manager: %v", err)
			}
		})
	}
	t.Cleanup(op.stop)
	return op
}

// eventually polls check until it returns nil, failing the test with the
// last error after a generous bound. No assertion depends on how fast the
// machine is; the bound only ends a hung test.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	const bound = 2 * time.Minute
	deadline := time.Now().Add(bound)
	var last error
	for time.Now().Before(deadline) {
		if last = check(); last == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: not true after %s: %v", what, bound, last)
}

// runKubectl runs the real kubectl binary against the envtest API server.
func runKubectl(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

var workerSeq atomic.Int64

func workerName() string { return fmt.Sprintf("w%d", workerSeq.Add(1)) }
