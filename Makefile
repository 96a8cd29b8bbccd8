# wo: the two commands are `make run` (the main job on embedded defaults) and
# `make test` (every test). Both need only Go; whatever else the tests need is
# built from the Go module proxy by the scripts in hack/.

GO ?= go
# Packages whose behaviour depends on the shard count: the suite runs them at
# every core (the default) and again at one shard, the serial debug mode.
SHARDED := ./runtime/... ./dbowner/... ./examples/... ./replication/...
# go test, repeating what failed at the end of its output (hack/gotest.sh).
GOTEST = GO=$(GO) bash hack/gotest.sh

.PHONY: all run test test-seccomp test-cluster vet e2e-traces test-operator generate verify-generated bench bench-service bench-chat e2e-cluster bench-replication envtest-binaries helm cert-manager-crds fuzz fmt image manifests verify-manifests

all: test

## run: the worker at every core on embedded defaults (no config file needed).
run:
	$(GO) run ./cmd/worker --data-dir ./data

## test: vet, then every test under the race detector: the whole module at the
## default shard count (operator tests against a real kube-apiserver and etcd),
## the sharded packages again at one shard, the traces end to end in Jaeger
## (e2e-traces), test-seccomp (every package that links the I/O backend with
## io_uring denied, so on epoll), and test-cluster (the real-node test, where
## the machine can run a node).
test: vet envtest-binaries helm cert-manager-crds
	KUBEBUILDER_ASSETS="$$(bash hack/envtest-binaries.sh)" WO_HELM="$$(bash hack/helm-binary.sh)" WO_CERT_MANAGER_CRDS="$$(bash hack/cert-manager-crds.sh)" $(GOTEST) -race -count=1 -timeout 30m ./...
	WO_SHARDS=1 $(GOTEST) -race -count=1 -timeout 20m $(SHARDED)
	bash hack/e2e-traces.sh
	$(MAKE) --no-print-directory test-seccomp
	$(MAKE) --no-print-directory test-cluster

## test-cluster: make e2e-cluster where this machine can run a node (root,
## network namespaces), with the cluster torn down afterwards; elsewhere it
## says why not, and under WO_REQUIRE_CLUSTER=1 (.ci/run) that fails.
test-cluster:
	bash hack/test-cluster.sh

## e2e-traces: the worker's traces in a real Jaeger (built from the module
## proxy and cached), checked through its query API, with a screenshot in
## _output/e2e-traces/. See docs/tracing.md.
e2e-traces:
	bash hack/e2e-traces.sh

## test-seccomp: the suite again with io_uring denied the way Docker's and
## containerd's default seccomp profiles deny it (io_uring_setup, _enter and
## _register fail with EPERM): every test binary that links the I/O backend
## (hack/uring-packages.sh; the rest cannot tell the difference) runs under
## hack/seccomp-deny-uring (go test -exec), so WO_IO=auto must fall back to
## epoll everywhere and every io_uring test must skip with the probe's reason.
## WO_REQUIRE_URING is cleared: here io_uring is meant to be unavailable.
## The test binaries are the ones `make test` just built (same flags), so
## this costs their run time, not a second build. The leader-kill loop of
## internal/clustertest runs 5 kills here, not 20: the full pass already
## restarts every killed member on the other backend (epoll half the time),
## and internal/clustertest, which those kills dominate, was the longest run
## of this pass (483 s of its 625 s, measured cold on 2 cores).
test-seccomp: envtest-binaries helm cert-manager-crds
	$(GO) build -o bin/seccomp-deny-uring ./hack/seccomp-deny-uring
	env -u WO_REQUIRE_URING WO_REPL_KILLS=5 KUBEBUILDER_ASSETS="$$(bash hack/envtest-binaries.sh)" WO_HELM="$$(bash hack/helm-binary.sh)" WO_CERT_MANAGER_CRDS="$$(bash hack/cert-manager-crds.sh)" \
		$(GOTEST) -race -count=1 -timeout 30m -exec $(CURDIR)/bin/seccomp-deny-uring $$(bash hack/uring-packages.sh)

## vet: go vet, then wo's own analyzer (cmd/wovet): WO-E222, a message type
## with mutable references sent where it may cross shards, and WO-E223, a
## sent value used after the send. See analysis/sendcheck.
vet:
	$(GO) vet ./...
	$(GO) build -o bin/wovet ./cmd/wovet
	$(GO) vet -vettool=$(CURDIR)/bin/wovet ./...

## envtest-binaries: build (or reuse from the cache) kube-apiserver, etcd and kubectl.
envtest-binaries:
	bash hack/envtest-binaries.sh >/dev/null

## helm: build (or reuse from the cache) helm; the chart tests need it.
helm:
	bash hack/helm-binary.sh >/dev/null

## cert-manager-crds: cert-manager's CRDs from the Go module proxy (cached);
## the operator's cert-manager test installs them into an envtest API server.
cert-manager-crds:
	bash hack/cert-manager-crds.sh >/dev/null

# Build outputs (gitignored). VERSION, the image tag, is the chart's
# appVersion unless given: the chart's default image tag says the same.
BUILD ?= build
VERSION ?= $(shell sed -n 's/^appVersion: "\(.*\)"$$/\1/p' charts/wo/Chart.yaml)

## e2e-cluster: wo on a real one-node Kubernetes cluster (hack/cluster-up.sh:
## etcd, kube-apiserver, controller-manager, scheduler, kubelet with the
## static CPU manager, containerd + runc, CNI bridge, kube-proxy, CoreDNS, all
## in a network namespace of its own): the images `make image` builds are
## imported into the node's containerd, the chart is installed with helm and
## internal/e2ecluster checks the pods for real. Needs root; the Debian
## packages it runs on (containerd, runc, containernetworking-plugins,
## iptables, conntrack) are installed by hack/node-packages.sh. The cluster
## stays up for a look (KUBECONFIG below); hack/cluster-down.sh removes it.
## See docs/kubernetes.md.
e2e-cluster: image helm
	bash hack/cluster-up.sh >/dev/null
	bash hack/cluster-load.sh $(BUILD)/image/images.tar
	WO_E2E_CLUSTER="$${WO_CLUSTER_DIR:-/var/lib/wo-cluster}" WO_E2E_VERSION=$(VERSION) WO_HELM="$$(bash hack/helm-binary.sh)" \
		$(GO) test -count=1 -timeout 45m -v ./internal/e2ecluster/...

## image: the wo-worker and wo-operator images from static binaries, no
## Docker daemon: $(BUILD)/image/oci (OCI layout) and $(BUILD)/image/images.tar
## (docker load / ctr import). See hack/imagebuild.
image:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X github.com/writeonce/wo/internal/buildinfo.version=$(VERSION)" \
		-o $(BUILD)/bin/ ./cmd/worker ./cmd/operator
	$(GO) run ./hack/imagebuild --worker $(BUILD)/bin/worker --operator $(BUILD)/bin/operator \
		--out $(BUILD)/image --version $(VERSION) \
		--revision "$$(git rev-parse HEAD 2>/dev/null)" --created "$$(git log -1 --format=%ct 2>/dev/null || echo 0)"

## manifests: manifests/crds.yaml, manifests/install.yaml and the chart's CRD from config/ (kustomize),
## and manifests/seccomp/ (hack/seccomp-profiles).
manifests:
	bash hack/manifests.sh

verify-manifests: manifests
	git diff --exit-code -- manifests charts/wo/crds

test-operator:
	bash hack/operator-test.sh

## generate: deepcopy, CRD and RBAC from the kubebuilder markers (controller-gen).
generate:
	bash hack/gen.sh

verify-generated: generate
	git diff --exit-code -- api/v1alpha1/zz_generated.deepcopy.go config/crd config/rbac/role.yaml

## bench-replication: 3 wo workers against a 3-member etcd, and a one-member
## wo against the single worker of before replication; see docs/benchmarks.md.
bench-replication: envtest-binaries
	bash hack/bench-replication.sh

## bench-chat: the chat benchmark (the worker vs a gorilla/websocket-style
## peer, with and without a group-commit WAL).
bench-chat:
	bash hack/bench-chat.sh

## bench-service: every service benchmark beside independent peers, pinned,
## interleaved, medians of per-run ratios (micro, records, echo, chat,
## replication); the table goes into docs/benchmarks.md. Run it alone.
bench-service: envtest-binaries
	bash hack/bench-service.sh

## bench: every benchmark beside its baseline; see docs/benchmarks.md.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 3 ./runtime/ ./iobackend/ ./dbowner/... ./replication/transport/
	$(GO) test -run '^$$' -bench IdleActorFootprint -benchtime 1x ./runtime/

## fuzz: a short run of every fuzz target.
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParseCPUMax -fuzztime 10s ./sizing/
	$(GO) test -run '^$$' -fuzz FuzzParseMode -fuzztime 10s ./iobackend/
	$(GO) test -run '^$$' -fuzz FuzzDecodeRecord -fuzztime 10s ./dbowner/wal/
	$(GO) test -run '^$$' -fuzz FuzzSegment -fuzztime 10s ./dbowner/wal/
	$(GO) test -run '^$$' -fuzz FuzzSnapshot -fuzztime 10s ./dbowner/wal/
	$(GO) test -run '^$$' -fuzz FuzzDecodeMutation -fuzztime 10s ./dbowner/engine/
	$(GO) test -run '^$$' -fuzz FuzzDecodeBatch -fuzztime 10s ./dbowner/engine/
	$(GO) test -run '^$$' -fuzz FuzzRaftRecords -fuzztime 10s ./dbowner/
	$(GO) test -run '^$$' -fuzz FuzzVerifyBackup -fuzztime 10s ./dbowner/
	$(GO) test -run '^$$' -fuzz FuzzCallCodec -fuzztime 10s ./dbowner/
	$(GO) test -run '^$$' -fuzz FuzzLoad -fuzztime 10s ./dbowner/engine/
	$(GO) test -run '^$$' -fuzz FuzzLoad -fuzztime 10s ./internal/config/
	$(GO) test -run '^$$' -fuzz FuzzParseLine -fuzztime 10s ./internal/chat/
	$(GO) test -run '^$$' -fuzz FuzzParseFrame -fuzztime 10s ./internal/chat/
	$(GO) test -run '^$$' -fuzz FuzzFields -fuzztime 10s ./internal/records/
	$(GO) test -run '^$$' -fuzz FuzzParams -fuzztime 10s ./internal/records/
	$(GO) test -run '^$$' -fuzz FuzzBodies -fuzztime 10s ./internal/admin/
	$(GO) test -run '^$$' -fuzz FuzzRequest -fuzztime 10s ./internal/httpd/
	$(GO) test -run '^$$' -fuzz FuzzParseProfile -fuzztime 10s ./internal/seccompdeny/
	$(GO) test -run '^$$' -fuzz FuzzPeerSecret -fuzztime 10s ./internal/operator/pki/
	$(GO) test -run '^$$' -fuzz FuzzTokenFileRoundTrip -fuzztime 10s ./internal/operator/tokens/
	$(GO) test -run '^$$' -fuzz FuzzParsePeers -fuzztime 10s ./internal/config/
	$(GO) test -run '^$$' -fuzz FuzzParseDialMap -fuzztime 10s ./internal/config/
	$(GO) test -run '^$$' -fuzz FuzzDecodeFrame -fuzztime 10s ./replication/transport/
	$(GO) test -run '^$$' -fuzz FuzzCheckEndpoint -fuzztime 10s ./internal/telemetry/
	$(GO) test -run '^$$' -fuzz FuzzParseLogLine -fuzztime 10s ./internal/clustertest/

fmt:
	gofmt -l -w $$(git ls-files '*.go')
