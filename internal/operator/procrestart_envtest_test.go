package operator_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/adminapi"
	"github.com/writeonce/wo/internal/operator"
)

// removalHold stands between an operator and the pods' admin APIs,
// passing every call through. Armed, it lets the next member removal
// through to the pod and then never answers it: the operator is stopped
// with the removal done and not acknowledged, the moment where taking up
// the scale-down again is hardest, and the test knows the stop fell there
// (a status poll would race the operator's next steps, which follow within
// milliseconds when nothing holds them).
type removalHold struct {
	w     *wov1.Worker
	srv   *httptest.Server
	hc    *http.Client
	armed atomic.Bool
	held  chan string // the removal passed on and held: "pod N: DELETE /admin/members/ID"
}

func newRemovalHold(t *testing.T, w *wov1.Worker) *removalHold {
	h := &removalHold{w: w, hc: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}, held: make(chan string, 1)}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(func() {
		h.srv.Close()
		h.hc.CloseIdleConnections()
	})
	return h
}

// tune makes an operator call the pods through the hold.
func (h *removalHold) tune(r *operator.Reconciler) {
	r.AdminURL = func(w *wov1.Worker, ordinal int) string { return h.srv.URL + "/" + strconv.Itoa(ordinal) }
}

func (h *removalHold) serve(w http.ResponseWriter, r *http.Request) {
	ordStr, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	ord, err := strconv.Atoi(ordStr)
	if err != nil {
		http.Error(w, "removal hold: no pod ordinal in "+r.URL.Path, http.StatusBadGateway)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	target := testAdminURL(h.w, ord) + "/" + rest
	if r.URL.RawQuery != "" {
		target += "?" + r.URL.RawQuery
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, target, bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := h.hc.Do(req)
	if err != nil {
		// As the operator would see the pod: no answer.
		panic(http.ErrAbortHandler)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if r.Method == http.MethodDelete && strings.HasPrefix("/"+rest, adminapi.PathMembers+"/") && resp.StatusCode/100 == 2 && h.armed.CompareAndSwap(true, false) {
		h.held <- fmt.Sprintf("pod %d: %s /%s", ord, r.Method, rest)
		<-r.Context().Done() // the operator gave up: it stopped
		return
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(b)
}

// restartMidScaleDown runs a scale-down (kubectl with args) and stops the
// operator right after the first member removal took effect and before
// the operator heard of it. The Worker's status names the pods draining by
// then (it is written before each step) and the StatefulSet has not shrunk
// (it shrinks only after a removal is acknowledged). The load goes on with
// no operator; then a new one starts, which must take the scale-down up
// from the status and the pods' views alone. It returns the new operator.
func restartMidScaleDown(t *testing.T, l *procLoad, hold *removalHold, op *runningOperator, w *wov1.Worker, ns string, kubectl []string) *runningOperator {
	t.Helper()
	var before appsv1.StatefulSet
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(w), &before); err != nil {
		t.Fatal(err)
	}
	hold.armed.Store(true)
	runKubectl(t, append([]string{"-n", ns}, kubectl...)...)
	var removal string
	select {
	case removal = <-hold.held:
	case <-time.After(2 * time.Minute):
		t.Fatal("no member removal reached the pods within 2 minutes of the scale-down")
	}
	op.stop()
	mid := getWorker(t, w)
	var sts appsv1.StatefulSet
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(w), &sts); err != nil {
		t.Fatal(err)
	}
	if *sts.Spec.Replicas != *before.Spec.Replicas {
		t.Errorf("the StatefulSet went from %d to %d pods before the first removal was acknowledged", *before.Spec.Replicas, *sts.Spec.Replicas)
	}
	if len(mid.Status.Draining) == 0 {
		t.Errorf("status shows no pod draining mid-scale-down: %+v", mid.Status)
	}
	t.Logf("operator stopped after %s, unanswered: draining %v, StatefulSet at %d pods", removal, mid.Status.Draining, *sts.Spec.Replicas)
	l.waitAnswered(t, "the load is answered while no operator runs", 100)
	return startOperator(t, ns, operatorConfig)
}
