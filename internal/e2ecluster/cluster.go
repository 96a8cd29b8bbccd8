package e2ecluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/operator/render"
	"github.com/writeonce/wo/internal/ops"
)

// EnvCluster names the cluster's state directory (hack/cluster-up.sh's
// WO_CLUSTER_DIR); the tests skip without it. EnvHelm is the helm binary,
// EnvVersion the image tag `make image` built.
const (
	EnvCluster = "WO_E2E_CLUSTER"
	EnvHelm    = "WO_HELM"
	EnvVersion = "WO_E2E_VERSION"
)

// Cluster is the running one-node cluster: its kubeconfig, kubectl, helm,
// and a client.
type Cluster struct {
	Dir        string
	Kubeconfig string
	Kubectl    string
	Helm       string
	Version    string
	Client     kubernetes.Interface
}

// Open connects to the cluster of dir (hack/cluster-up.sh's state
// directory).
func Open(dir, helm, version string) (*Cluster, error) {
	c := &Cluster{
		Dir:        dir,
		Kubeconfig: filepath.Join(dir, "admin.kubeconfig"),
		Kubectl:    filepath.Join(dir, "bin", "kubectl"),
		Helm:       helm,
		Version:    version,
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s (is hack/cluster-up.sh's cluster up?): %w", c.Kubeconfig, err)
	}
	if c.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("client for %s: %w", c.Kubeconfig, err)
	}
	return c, nil
}

// Run runs a command (kubectl or helm) against the cluster and returns its
// combined output; a failure's error carries the output.
func (c *Cluster) Run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig, "WO_CLUSTER_DIR="+c.Dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// RestartDaemon restarts one of the node's daemons (kubelet, containerd,
// kube-proxy...) with hack/cluster-restart.sh: stopped, then started again
// with the same command line, as a node's init system would.
func (c *Cluster) RestartDaemon(ctx context.Context, name string) error {
	script, err := filepath.Abs("../../hack/cluster-restart.sh")
	if err != nil {
		return err
	}
	_, err = c.Run(ctx, "bash", script, name)
	return err
}

// Worker reads a Worker through kubectl (the CRD's own client is the
// operator's; kubectl's JSON into the Go type is what a user sees).
func (c *Cluster) Worker(ctx context.Context, ns, name string) (*wov1.Worker, error) {
	out, err := c.Run(ctx, c.Kubectl, "-n", ns, "get", "worker", name, "-o", "json")
	if err != nil {
		return nil, err
	}
	var w wov1.Worker
	if err := json.Unmarshal([]byte(out), &w); err != nil {
		return nil, fmt.Errorf("decode Worker %s/%s: %w", ns, name, err)
	}
	return &w, nil
}

// AdminToken is the bearer token of a Worker's ops and admin endpoints,
// from the Secret the operator keeps.
func (c *Cluster) AdminToken(ctx context.Context, ns, worker string) (string, error) {
	s, err := c.Client.CoreV1().Secrets(ns).Get(ctx, worker+"-admin-token", metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("admin token of %s/%s: %w", ns, worker, err)
	}
	return strings.TrimSpace(string(s.Data[render.AdminTokenFile])), nil
}

// DebugRuntime reads a pod's /debug/runtime on its ops port.
func DebugRuntime(ctx context.Context, podIP, token string) (ops.RuntimeInfo, error) {
	var info ops.RuntimeInfo
	url := fmt.Sprintf("http://%s:%d/debug/runtime", podIP, render.PortOps)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return info, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return info, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return info, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		return info, fmt.Errorf("decode %s: %w", url, err)
	}
	return info, nil
}

// Container is a running container seen from the node: its cgroup and
// its first process.
type Container struct {
	ID        string
	CgroupDir string // in the cpuset hierarchy
	PID       int
}

// FindContainer finds a pod's container in the node's cgroup v1 cpuset
// hierarchy (kubelet's cgroupfs driver: kubepods[/QOS]/pod<UID>/<ID>).
func FindContainer(pod *corev1.Pod, container string) (Container, error) {
	var id string
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == container {
			_, id, _ = strings.Cut(s.ContainerID, "://")
		}
	}
	if id == "" {
		return Container{}, fmt.Errorf("pod %s: no container %s running", pod.Name, container)
	}
	pattern := filepath.Join("/sys/fs/cgroup/cpuset/kubepods*", "*pod"+string(pod.UID), id)
	dirs, _ := filepath.Glob(pattern)
	if more, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/cpuset/kubepods/*", "pod"+string(pod.UID), id)); len(more) > 0 {
		dirs = append(dirs, more...)
	}
	if len(dirs) != 1 {
		return Container{}, fmt.Errorf("pod %s container %s: %d cgroups match %s", pod.Name, id, len(dirs), pattern)
	}
	procs, err := os.ReadFile(filepath.Join(dirs[0], "cgroup.procs"))
	if err != nil {
		return Container{}, fmt.Errorf("container %s: %w", id, err)
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(procs)), "\n")
	pid, err := strconv.Atoi(first)
	if err != nil {
		return Container{}, fmt.Errorf("container %s: no process in %s", id, dirs[0])
	}
	return Container{ID: id, CgroupDir: dirs[0], PID: pid}, nil
}

// CPUs is the container cgroup's cpuset.cpus, expanded.
func (c Container) CPUs() ([]int, error) {
	b, err := os.ReadFile(filepath.Join(c.CgroupDir, "cpuset.cpus"))
	if err != nil {
		return nil, fmt.Errorf("cpuset of %s: %w", c.ID, err)
	}
	return ParseCPUList(strings.TrimSpace(string(b)))
}

// Status is the container process's /proc/PID/status, by field.
func (c Container) Status() (map[string]string, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", c.PID))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out, sc.Err()
}

// ParseCPUList parses a Linux CPU list ("0-2,5").
func ParseCPUList(s string) ([]int, error) {
	var cpus []int
	if s == "" {
		return nil, nil
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("cpu list %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return nil, fmt.Errorf("cpu list %q: %w", s, err)
			}
		}
		for i := a; i <= b; i++ {
			cpus = append(cpus, i)
		}
	}
	return cpus, nil
}

// Poll calls f every interval until it returns nil or the context ends,
// and then returns f's last error.
func Poll(ctx context.Context, interval time.Duration, f func(context.Context) error) error {
	var last error
	for {
		if last = f(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-time.After(interval):
		}
	}
}

// jsonBody is a request body of a JSON value.
func jsonBody(v any) *bytes.Reader {
	b, _ := json.Marshal(v)
	return bytes.NewReader(b)
}

// Apply runs kubectl apply -f - with manifest on stdin.
func (c *Cluster) Apply(ctx context.Context, ns, manifest string) error {
	cmd := exec.CommandContext(ctx, c.Kubectl, "-n", ns, "apply", "-f", "-")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig, "WO_CLUSTER_DIR="+c.Dir)
	cmd.Stdin = strings.NewReader(manifest)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl apply: %w\n%s", err, out)
	}
	return nil
}

// RecycleVolumes gives back the local PersistentVolumes that claims of
// namespace ns held: hack/cluster-up.sh's volumes are Retain (a pod's
// volume is its database), so once the test is done with them each is
// deleted, its directory emptied, and created again unbound. Without this
// a second run would find the first run's raft log on a fresh claim.
func (c *Cluster) RecycleVolumes(ctx context.Context, ns string) error {
	pvs, err := c.Client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list volumes: %w", err)
	}
	for _, pv := range pvs.Items {
		if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Namespace != ns || pv.Spec.Local == nil {
			continue
		}
		if err := c.Client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("delete volume %s: %w", pv.Name, err)
		}
		err := Poll(ctx, 200*time.Millisecond, func(ctx context.Context) error {
			_, err := c.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
			if err == nil {
				return fmt.Errorf("volume %s still there", pv.Name)
			}
			return nil
		})
		if err != nil {
			return err
		}
		entries, _ := os.ReadDir(pv.Spec.Local.Path)
		for _, e := range entries {
			if err := os.RemoveAll(filepath.Join(pv.Spec.Local.Path, e.Name())); err != nil {
				return fmt.Errorf("empty volume %s: %w", pv.Name, err)
			}
		}
		fresh := corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: pv.Name, Labels: pv.Labels},
			Spec:       *pv.Spec.DeepCopy(),
		}
		fresh.Spec.ClaimRef = nil
		if _, err := c.Client.CoreV1().PersistentVolumes().Create(ctx, &fresh, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create volume %s again: %w", pv.Name, err)
		}
	}
	return nil
}
