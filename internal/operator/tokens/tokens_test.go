package tokens

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/operator/render"
	"github.com/writeonce/wo/internal/tokenfile"
)

// What the operator writes, the worker's parser reads back token for token.
func FuzzTokenFileRoundTrip(f *testing.F) {
	f.Add([]byte("new\nold\n"))
	f.Add([]byte("# c\n\n x \r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		toks, err := tokenfile.Parse(b)
		if err != nil {
			return
		}
		if again, err := tokenfile.Parse(File(toks)); err != nil || !slices.Equal(again, toks) {
			t.Fatalf("round trip %q -> %q, %v", toks, again, err)
		}
	})
}

// The phase and the token in use survive a write and a read of the Secret,
// which is all an operator restarted mid-rotation has.
func TestAdminTokenStateRoundTrip(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, st := range []State{
		{Tokens: []string{"a"}, Issued: now},
		{Tokens: []string{"b", "a"}, Phase: PhaseTrusted, Issued: now, Handled: "1"},
		{Tokens: []string{"b", "a"}, Phase: PhaseInUse, Issued: now, Handled: "1"},
	} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "w-admin-token"}}
		st.Write(s)
		got, err := Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Tokens, st.Tokens) || got.Phase != st.Phase || !got.Issued.Equal(st.Issued) || got.Handled != st.Handled {
			t.Errorf("round trip %+v -> %+v", st, got)
		}
		want := map[string]string{"": "a", PhaseTrusted: "a", PhaseInUse: "b"}[st.Phase]
		if got.Use() != want {
			t.Errorf("phase %q: the operator uses %q, want %q", st.Phase, got.Use(), want)
		}
	}
	// A phase left behind with the old token already gone is over.
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "w-admin-token", Annotations: map[string]string{annotationTokenPhase: PhaseInUse}},
		Data: map[string][]byte{render.AdminTokenFile: []byte("b\n")}}
	if got, err := Parse(s); err != nil || got.Phase != "" {
		t.Errorf("leftover Phase: %+v, %v", got, err)
	}
	s.Annotations[annotationTokenPhase] = "bogus"
	s.Data[render.AdminTokenFile] = []byte("b\na\n")
	if _, err := Parse(s); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("a bad Phase: %v", err)
	}
}

func TestAdminTokenTrigger(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	w := &wov1.Worker{}
	st := State{Tokens: []string{"a"}, Issued: now, Handled: "1"}
	if why := st.RotationTrigger(w, now.Add(MaxAge-time.Minute)); why != "" {
		t.Errorf("a young token rotates: %s", why)
	}
	if why := st.RotationTrigger(w, now.Add(MaxAge)); !strings.Contains(why, "old") {
		t.Errorf("an old token: %q", why)
	}
	w.Annotations = map[string]string{wov1.AnnotationRotateAdminToken: "1"}
	if why := st.RotationTrigger(w, now); why != "" {
		t.Errorf("an annotation value acted on rotates again: %s", why)
	}
	w.Annotations[wov1.AnnotationRotateAdminToken] = "2"
	if why := st.RotationTrigger(w, now); !strings.Contains(why, `"2"`) {
		t.Errorf("a new annotation value: %q", why)
	}
}
