package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/operator"
	"github.com/writeonce/wo/internal/operator/crdsync"
	"github.com/writeonce/wo/internal/operator/render"
)

// DefaultWorkerImage is the image a Worker without spec.image runs.
const DefaultWorkerImage = "ghcr.io/writeonce/wo-worker:latest"

type config struct {
	metricsAddr      string
	probeAddr        string
	leaderElect      bool
	leaderElectionNS string
	leaderElectionID string
	workerImage      string
	workerPullPolicy string
	syncCRD          bool
	namespace        string
	logLevel         slog.Level
}

func parseFlags(args []string, output io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("operator", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.StringVar(&c.metricsAddr, "metrics-bind-address", ":8080", `address of the Prometheus /metrics endpoint; "0" turns it off`)
	fs.StringVar(&c.probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
	fs.BoolVar(&c.leaderElect, "leader-elect", false, "elect a leader through a Lease so only one replica reconciles")
	fs.StringVar(&c.leaderElectionNS, "leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's own)")
	fs.StringVar(&c.leaderElectionID, "leader-election-id", "wo-operator.wo.writeonce.dev", "name of the leader election Lease")
	fs.StringVar(&c.workerImage, "worker-image", DefaultWorkerImage, "image for Workers whose spec.image is empty")
	fs.StringVar(&c.workerPullPolicy, "worker-image-pull-policy", "", `pull policy of the worker containers: Always, IfNotPresent or Never (default: Kubernetes' own, Always for ":latest")`)
	fs.BoolVar(&c.syncCRD, "sync-crd", false, "at start, server-side apply the Worker CRD this operator was built with (Helm never upgrades a chart's CRDs; the chart turns this on)")
	fs.StringVar(&c.namespace, "namespace", "", "watch only this namespace (default: all namespaces)")
	level := fs.String("log-level", "info", "log level: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	switch corev1.PullPolicy(c.workerPullPolicy) {
	case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		return c, fmt.Errorf("--worker-image-pull-policy: %q is not Always, IfNotPresent or Never", c.workerPullPolicy)
	}
	if err := c.logLevel.UnmarshalText([]byte(*level)); err != nil {
		return c, fmt.Errorf("--log-level: %w", err)
	}
	return c, nil
}

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	c, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "operator:", err)
		return 2
	}
	handler := slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: c.logLevel})
	ctrl.SetLogger(logr.FromSlogHandler(handler))
	log := ctrl.Log.WithName("setup")

	if err := serve(c); err != nil {
		log.Error(err, "operator stopped")
		return 1
	}
	return 0
}

func serve(c config) error {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(wov1.AddToScheme(scheme))

	restCfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	cacheOpts := operator.CacheOptions()
	if c.namespace != "" {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{c.namespace: {}}
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                  scheme,
		Cache:                   cacheOpts,
		Metrics:                 metricsserver.Options{BindAddress: c.metricsAddr},
		HealthProbeBindAddress:  c.probeAddr,
		LeaderElection:          c.leaderElect,
		LeaderElectionID:        c.leaderElectionID,
		LeaderElectionNamespace: c.leaderElectionNS,
		// A new leader starts at once when the old one exits cleanly
		// (a rolling update of the operator), instead of waiting out the
		// lease. Safe because the process exits right after Start returns.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	if c.syncCRD {
		direct, err := client.New(restCfg, client.Options{Scheme: scheme})
		if err != nil {
			return fmt.Errorf("client for --sync-crd: %w", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err = crdsync.Sync(ctx, direct)
		cancel()
		if err != nil {
			return err
		}
		ctrl.Log.WithName("setup").Info("Worker CRD in step with this operator", "crd", crdsync.CRDName)
	}
	r := &operator.Reconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder("wo-operator"),
		Options:  render.Options{DefaultImage: c.workerImage, ImagePullPolicy: corev1.PullPolicy(c.workerPullPolicy)},
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("add healthz check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("add readyz check: %w", err)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		return fmt.Errorf("run manager: %w", err)
	}
	return nil
}
