package render_test

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/config"
	"github.com/writeonce/wo/internal/config/keys"
	"github.com/writeonce/wo/internal/operator/optest"
	"github.com/writeonce/wo/internal/operator/render"
)

// What the operator renders for a pod, its worker.toml and its
// environment, the worker's own loader reads without an error and to the
// values the operator meant: a key the operator spells differently from the
// worker would be refused here (an unknown file key) or silently ignored
// (an unknown variable, which the last check catches).
func TestWorkerLoadsRenderedConfig(t *testing.T) {
	known := map[string]bool{}
	for _, k := range keys.All {
		known[k.Env] = true
		t.Setenv(k.Env, "") // empty is unset to the loader: only what is rendered counts
	}
	for _, bootstrapped := range []bool{false, true} {
		w := optest.Worker("2")
		w.Spec.Pinning = wov1.PinningExclusive
		w.Spec.Reductions = ptr.To(int32(500))
		w.Spec.Partitions = ptr.To(int32(4))
		objs, err := render.Render(w, render.Options{}, render.Cluster{Bootstrapped: bootstrapped})
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), render.ConfigFile)
		if err := os.WriteFile(file, []byte(objs.ConfigMap.Data[render.ConfigFile]), 0o600); err != nil {
			t.Fatal(err)
		}
		const pod = "chat-1"
		for _, e := range objs.StatefulSet.Spec.Template.Spec.Containers[0].Env {
			if e.ValueFrom != nil {
				continue
			}
			if strings.HasPrefix(e.Name, "WO_") && !known[e.Name] {
				t.Errorf("the operator sets %s, which the worker does not read", e.Name)
			}
			// As the kubelet expands it.
			t.Setenv(e.Name, strings.ReplaceAll(e.Value, "$(POD_NAME)", pod))
		}
		cfg, err := config.Load([]string{"--config", file}, io.Discard)
		if err != nil {
			t.Fatalf("bootstrapped %t: the worker refuses what the operator rendered: %v\n%s", bootstrapped, err, objs.ConfigMap.Data[render.ConfigFile])
		}
		state := map[bool]string{false: "new", true: "existing"}[bootstrapped]
		for _, c := range []struct {
			key       keys.Key
			got, want any
		}{
			{keys.Shards, cfg.Shards, objs.Shards},
			{keys.Pin, string(cfg.Pin), "on"},
			{keys.Reductions, cfg.Reductions, 500},
			{keys.DataDir, cfg.DataDir, render.DataDir},
			{keys.Partitions, cfg.Partitions, 4},
			{keys.ClusterState, cfg.ClusterState, state},
			{keys.PeerAddr, cfg.PeerAddr, ":7080"},
			{keys.PeerCert, cfg.PeerCert, render.PeerTLSDir + "/" + pod + ".crt"},
			{keys.PeerKey, cfg.PeerKey, render.PeerTLSDir + "/" + pod + ".key"},
			{keys.PeerCA, cfg.PeerCA, render.PeerTLSDir + "/" + render.PeerCAFile},
			{keys.AdminTokenFile, cfg.AdminTokenFile, render.AdminTokenDir + "/" + render.AdminTokenFile},
			{keys.Peers, len(cfg.Peers), 1},
		} {
			if c.got != c.want {
				t.Errorf("bootstrapped %t: %s is %v, the operator rendered %v", bootstrapped, c.key.File, c.got, c.want)
			}
		}
		// cluster.state is in the file alone (a mounted ConfigMap follows
		// its changes, an env var would not); the rest is in both.
		if src := cfg.Sources[keys.ClusterState.File]; src != "file "+file {
			t.Errorf("cluster.state comes from %s, want the file", src)
		}
		if len(cfg.Peers) == 1 && cfg.Peers[0].Addr != render.PeerAddr(w, 0) {
			t.Errorf("cluster.peers is %+v, want pod 0 at %s", cfg.Peers, render.PeerAddr(w, 0))
		}
	}
}
