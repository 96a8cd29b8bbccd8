package operator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/operator/render"
)

// spec.clientTLS.clientCASecretName through the API server: the CRD keeps
// the field, the operator mounts the Secret's ca.crt read-only at
// render.ClientCADir beside the server pair and points tls.client_ca_file
// at it (env and worker.toml); removing the field removes the volume, the
// mount and the setting, and the pair stays.
func TestClientCASecretIsMounted(t *testing.T) {
	needEnv(t)
	ns := newNamespace(t)
	startOperator(t, ns, operatorConfig)
	ctx := context.Background()

	w := newWorker(ns, workerName(), "1", wov1.PinningNone)
	w.Spec.ClientTLS = &wov1.ClientTLSSpec{SecretName: "wo-server-tls", ClientCASecretName: "wo-clients-ca"}
	createWorker(t, w)
	var stored wov1.Worker
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(w), &stored); err != nil {
		t.Fatal(err)
	}
	if stored.Spec.ClientTLS == nil || stored.Spec.ClientTLS.ClientCASecretName != "wo-clients-ca" {
		t.Fatalf("the API server kept clientTLS %+v: the CRD lacks clientCASecretName", stored.Spec.ClientTLS)
	}

	caFile := render.ClientCADir + "/" + render.ClientCAFile
	eventually(t, "the client CA is mounted and set", func() error {
		sts := getStatefulSet(t, ns, w.Name)
		if err := clientTLSRendered(sts, true); err != nil {
			return err
		}
		if got := containerEnv(sts)["WO_TLS_CLIENT_CA_FILE"]; got != caFile {
			return fmt.Errorf("WO_TLS_CLIENT_CA_FILE = %q, want %q", got, caFile)
		}
		return configHas(ctx, ns, w.Name, `client_ca_file = "`+caFile+`"`, true)
	})

	// Drop the client CA: mutual TLS off, the pair still served. The
	// operator writes the status meanwhile; a spec update that races it
	// is retried, as kubectl edit would (it failed once with "the object
	// has been modified").
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(w), &stored); err != nil {
			return err
		}
		stored.Spec.ClientTLS.ClientCASecretName = ""
		return k8s.Update(ctx, &stored)
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the client CA is gone, the pair stays", func() error {
		sts := getStatefulSet(t, ns, w.Name)
		if err := clientTLSRendered(sts, false); err != nil {
			return err
		}
		env := containerEnv(sts)
		if _, ok := env["WO_TLS_CLIENT_CA_FILE"]; ok || env["WO_TLS_CERT_FILE"] != render.ClientTLSDir+"/tls.crt" {
			return fmt.Errorf("env %v: want the pair without a client CA", env)
		}
		return configHas(ctx, ns, w.Name, "client_ca_file", false)
	})
}

// clientTLSRendered checks the pod template's client TLS volumes: the pair
// always, the client CA (its ca.crt only) when withCA.
func clientTLSRendered(sts *appsv1.StatefulSet, withCA bool) error {
	pod := sts.Spec.Template.Spec
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range pod.Containers[0].VolumeMounts {
		mounts[m.Name] = m
	}
	if v, ok := vols["client-tls"]; !ok || v.Secret == nil || v.Secret.SecretName != "wo-server-tls" {
		return fmt.Errorf("no client-tls volume of wo-server-tls: %+v", pod.Volumes)
	}
	v, ok := vols["client-ca"]
	if !withCA {
		if _, mounted := mounts["client-ca"]; ok || mounted {
			return fmt.Errorf("a client-ca volume or mount without clientCASecretName")
		}
		return nil
	}
	if !ok || v.Secret == nil || v.Secret.SecretName != "wo-clients-ca" ||
		len(v.Secret.Items) != 1 || v.Secret.Items[0].Key != render.ClientCAFile || v.Secret.Items[0].Path != render.ClientCAFile {
		return fmt.Errorf("client-ca volume %+v: want wo-clients-ca's %s alone", v, render.ClientCAFile)
	}
	if m, ok := mounts["client-ca"]; !ok || m.MountPath != render.ClientCADir || !m.ReadOnly {
		return fmt.Errorf("client-ca mount %+v: want read-only at %s", m, render.ClientCADir)
	}
	return nil
}

// configHas says whether the Worker's worker.toml holds line (want) or not.
func configHas(ctx context.Context, ns, name, line string, want bool) error {
	var cm corev1.ConfigMap
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name + "-config"}, &cm); err != nil {
		return err
	}
	if got := strings.Contains(cm.Data[render.ConfigFile], line); got != want {
		return fmt.Errorf("worker.toml has %q: %v, want %v:\n%s", line, got, want, cm.Data[render.ConfigFile])
	}
	return nil
}
