package operator

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
)

func TestParseTokenFile(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"abc", []string{"abc"}},
		{"new\nold\n", []string{"new", "old"}},
		{"# rotated\n\n  new  \r\nold", []string{"new", "old"}},
		{"", nil},
		{"#only\n\n", nil},
	} {
		if got := ParseTokenFile([]byte(c.in)); !slices.Equal(got, c.want) {
			t.Errorf("ParseTokenFile(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// What the operator writes it reads back, and no token it returns could
// be mistaken for a blank or comment line by the worker.
func FuzzParseTokenFile(f *testing.F) {
	f.Add([]byte("new\nold\n"))
	f.Add([]byte("# c\n\n x \r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		toks := ParseTokenFile(b)
		for _, tok := range toks {
			if tok == "" || strings.HasPrefix(tok, "#") || strings.ContainsAny(tok, "\n\r") || strings.TrimSpace(tok) != tok {
				t.Fatalf("token %q from %q", tok, b)
			}
		}
		if len(toks) > 0 {
			if again := ParseTokenFile(tokenFile(toks)); !slices.Equal(again, toks) {
				t.Fatalf("round trip %q -> %q", toks, again)
			}
		}
	})
}

// The phase and the token in use survive a write and a read of the Secret,
// which is all an operator restarted mid-rotation has.
func TestAdminTokenStateRoundTrip(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, st := range []adminToken{
		{tokens: []string{"a"}, issued: now},
		{tokens: []string{"b", "a"}, phase: TokenPhaseTrusted, issued: now, handled: "1"},
		{tokens: []string{"b", "a"}, phase: TokenPhaseInUse, issued: now, handled: "1"},
	} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "w-admin-token"}}
		st.write(s)
		got, err := parseAdminToken(s)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.tokens, st.tokens) || got.phase != st.phase || !got.issued.Equal(st.issued) || got.handled != st.handled {
			t.Errorf("round trip %+v -> %+v", st, got)
		}
		want := map[string]string{"": "a", TokenPhaseTrusted: "a", TokenPhaseInUse: "b"}[st.phase]
		if got.use() != want {
			t.Errorf("phase %q: the operator uses %q, want %q", st.phase, got.use(), want)
		}
	}
	// A phase left behind with the old token already gone is over.
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "w-admin-token", Annotations: map[string]string{annotationTokenPhase: TokenPhaseInUse}},
		Data: map[string][]byte{AdminTokenFile: []byte("b\n")}}
	if got, err := parseAdminToken(s); err != nil || got.phase != "" {
		t.Errorf("leftover phase: %+v, %v", got, err)
	}
	s.Annotations[annotationTokenPhase] = "bogus"
	s.Data[AdminTokenFile] = []byte("b\na\n")
	if _, err := parseAdminToken(s); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("a bad phase: %v", err)
	}
}

func TestAdminTokenTrigger(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	w := &wov1.Worker{}
	st := adminToken{tokens: []string{"a"}, issued: now, handled: "1"}
	if why := st.rotationTrigger(w, now.Add(AdminTokenMaxAge-time.Minute)); why != "" {
		t.Errorf("a young token rotates: %s", why)
	}
	if why := st.rotationTrigger(w, now.Add(AdminTokenMaxAge)); !strings.Contains(why, "old") {
		t.Errorf("an old token: %q", why)
	}
	w.Annotations = map[string]string{wov1.AnnotationRotateAdminToken: "1"}
	if why := st.rotationTrigger(w, now); why != "" {
		t.Errorf("an annotation value acted on rotates again: %s", why)
	}
	w.Annotations[wov1.AnnotationRotateAdminToken] = "2"
	if why := st.rotationTrigger(w, now); !strings.Contains(why, `"2"`) {
		t.Errorf("a new annotation value: %q", why)
	}
}
