package render_test

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/config"
	"github.com/writeonce/wo/internal/config/keys"
	"github.com/writeonce/wo/internal/operator/optest"
	"github.com/writeonce/wo/internal/operator/render"
)

// spec.clientTLS: the Secret is mounted read-only (tls.crt and tls.key
// alone), tls.cert_file and tls.key_file point at it in the file and the
// environment, and the worker's loader reads them so. Without it nothing
// of this is rendered (and worker.toml, hence the pods, stay as they were).
func TestRenderClientTLS(t *testing.T) {
	for _, k := range keys.All {
		t.Setenv(k.Env, "")
	}
	w := optest.Worker("2")
	plain, err := render.Render(w, render.Options{DefaultImage: "wo:test"}, render.Cluster{})
	if err != nil {
		t.Fatal(err)
	}
	w.Spec.ClientTLS = &wov1.ClientTLSSpec{SecretName: "chat-example-com"}
	objs, err := render.Render(w, render.Options{DefaultImage: "wo:test"}, render.Cluster{})
	if err != nil {
		t.Fatal(err)
	}
	pod := objs.StatefulSet.Spec.Template.Spec
	var vol *corev1.Volume
	for i := range pod.Volumes {
		if pod.Volumes[i].Secret != nil && pod.Volumes[i].Secret.SecretName == "chat-example-com" {
			vol = &pod.Volumes[i]
		}
	}
	if vol == nil {
		t.Fatalf("no volume of the Secret: %+v", pod.Volumes)
	}
	if items := vol.Secret.Items; len(items) != 2 || items[0].Key != "tls.crt" || items[1].Key != "tls.key" {
		t.Errorf("the volume projects %+v, want tls.crt and tls.key", items)
	}
	if !mountedAt(pod, vol.Name, render.ClientTLSDir) {
		t.Errorf("the Secret is not mounted read-only at %s: %+v", render.ClientTLSDir, pod.Containers[0].VolumeMounts)
	}

	cfg := loadRendered(t, objs)
	if want := (config.TLS{CertFile: render.ClientTLSDir + "/tls.crt", KeyFile: render.ClientTLSDir + "/tls.key"}); cfg.TLS != want {
		t.Errorf("the worker reads %+v, want %+v", cfg.TLS, want)
	}
	if src := cfg.Sources[keys.TLSCertFile.File]; src != "env "+keys.TLSCertFile.Env {
		t.Errorf("tls.cert_file comes from %s", src)
	}

	for _, v := range plain.StatefulSet.Spec.Template.Spec.Volumes {
		if v.Name == vol.Name {
			t.Error("a Worker without clientTLS mounts a client TLS volume")
		}
	}
	if plain.ConfigMap.Data[render.ConfigFile] == objs.ConfigMap.Data[render.ConfigFile] {
		t.Error("worker.toml does not name the client certificate")
	}

	// With the client CA: its ca.crt alone, mounted read-only at
	// ClientCADir, and the worker's loader reads tls.client_ca_file so.
	w.Spec.ClientTLS.ClientCASecretName = "chat-clients-ca"
	objs, err = render.Render(w, render.Options{DefaultImage: "wo:test"}, render.Cluster{})
	if err != nil {
		t.Fatal(err)
	}
	pod = objs.StatefulSet.Spec.Template.Spec
	var caVol *corev1.Volume
	for i := range pod.Volumes {
		if s := pod.Volumes[i].Secret; s != nil && s.SecretName == "chat-clients-ca" {
			caVol = &pod.Volumes[i]
		}
	}
	if caVol == nil || len(caVol.Secret.Items) != 1 || caVol.Secret.Items[0].Key != render.ClientCAFile {
		t.Fatalf("client CA volume %+v, want the Secret's %s alone", caVol, render.ClientCAFile)
	}
	if !mountedAt(pod, caVol.Name, render.ClientCADir) {
		t.Errorf("the client CA is not mounted read-only at %s: %+v", render.ClientCADir, pod.Containers[0].VolumeMounts)
	}
	cfg = loadRendered(t, objs)
	if want := render.ClientCADir + "/" + render.ClientCAFile; cfg.TLS.ClientCAFile != want {
		t.Errorf("the worker reads tls.client_ca_file %q, want %q", cfg.TLS.ClientCAFile, want)
	}
}

// mountedAt says the pod's container mounts volume vol read-only at dir.
func mountedAt(pod corev1.PodSpec, vol, dir string) bool {
	for _, m := range pod.Containers[0].VolumeMounts {
		if m.Name == vol {
			return m.MountPath == dir && m.ReadOnly
		}
	}
	return false
}

// loadRendered is what the worker's loader makes of the rendered
// worker.toml and the container's environment.
func loadRendered(t *testing.T, objs *render.Objects) config.Config {
	t.Helper()
	file := filepath.Join(t.TempDir(), render.ConfigFile)
	if err := os.WriteFile(file, []byte(objs.ConfigMap.Data[render.ConfigFile]), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, e := range objs.StatefulSet.Spec.Template.Spec.Containers[0].Env {
		if e.ValueFrom == nil {
			t.Setenv(e.Name, e.Value)
		}
	}
	cfg, err := config.Load([]string{"--config", file}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
