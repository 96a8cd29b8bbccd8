package runtime

import (
	"context"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/writeonce/wo/sizing"
)

func TestConfigFromEnv(t *testing.T) {
	t.Setenv("WO_SHARDS", "3")
	t.Setenv("WO_PIN", "off")
	t.Setenv("WO_IO", "epoll")
	t.Setenv("WO_REDUCTIONS", "123")
	cfg, err := ConfigFromEnv(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Shards != 3 || cfg.Pin != PinOff || cfg.IO != "epoll" || cfg.Reductions != 123 {
		t.Fatalf("ConfigFromEnv = %+v", cfg)
	}
}

func TestConfigFromEnvNamesTheBadValue(t *testing.T) {
	for _, tc := range []struct{ key, val string }{
		{"WO_SHARDS", "many"},
		{"WO_SHARDS", "-1"},
		{"WO_PIN", "sometimes"},
		{"WO_IO", "kqueue"},
		{"WO_SHARDS", "1025"}, // above MaxShards: the worker's bound too
		{"WO_REDUCTIONS", "0"},
		{"WO_REDUCTIONS", "1073741825"},
	} {
		t.Run(tc.key+"="+tc.val, func(t *testing.T) {
			t.Setenv(tc.key, tc.val)
			_, err := ConfigFromEnv(Config{})
			if err == nil || !strings.Contains(err.Error(), tc.key) || !strings.Contains(err.Error(), tc.val) {
				t.Fatalf("error %v should name %s and %q", err, tc.key, tc.val)
			}
		})
	}
}

// Start refuses what ConfigFromEnv would refuse, naming the field, instead
// of starting with a value no setting could produce.
func TestStartValidatesConfig(t *testing.T) {
	for _, cfg := range []Config{{Shards: -1}, {Shards: MaxShards + 1}, {Reductions: -5}, {Pin: "sometimes"}, {IO: "kqueue"}} {
		rt, err := Start(context.Background(), cfg, func(*Fiber) int { return 0 })
		if err == nil {
			rt.Wait()
			t.Errorf("Start(%+v) succeeded", cfg)
			continue
		}
		if !strings.Contains(err.Error(), "Config.") {
			t.Errorf("Start(%+v) = %v: want the field named", cfg, err)
		}
	}
}

func TestParseBounds(t *testing.T) {
	for s, want := range map[string]int{"0": 0, " 4 ": 4, "1024": MaxShards} {
		if n, err := ParseShards(s); err != nil || n != want {
			t.Errorf("ParseShards(%q) = %d, %v; want %d", s, n, err, want)
		}
	}
	for _, s := range []string{"", "-1", "1025", "4.0", "0x10"} {
		if _, err := ParseShards(s); err == nil || !strings.Contains(err.Error(), "1024") {
			t.Errorf("ParseShards(%q) = %v; want an error giving the range", s, err)
		}
	}
	if n, err := ParseReductions("1"); err != nil || n != 1 {
		t.Errorf("ParseReductions(1) = %d, %v", n, err)
	}
}

func TestPinPlan(t *testing.T) {
	cpus := []int{2, 5, 7}
	for _, tc := range []struct {
		mode   PinMode
		shards int
		want   []int
	}{
		{PinOn, 3, []int{2, 5, 7}},
		{PinOn, 1, []int{2}},
		{PinOff, 3, []int{-1, -1, -1}},
		{PinAuto, 3, []int{2, 5, 7}},    // every shard owns a CPU
		{PinAuto, 2, []int{-1, -1}},     // fewer shards than CPUs: let the kernel place
		{PinAuto, 4, []int{2, 5, 7, 2}}, // more shards than CPUs (asked for): wrap
	} {
		got := pinPlan(tc.mode, tc.shards, cpus)
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("pinPlan(%s, %d) = %v, want %v", tc.mode, tc.shards, got, tc.want)
				break
			}
		}
	}
}

// With pinning on, every shard thread's affinity is exactly its CPU.
func TestPinnedShardThreads(t *testing.T) {
	det, err := sizing.Detect("")
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.Pin = PinOn
	cfg.Shards = len(det.CPUs)
	var rt *Runtime
	run(t, cfg, func(f *Fiber) int {
		rt = f.Runtime()
		return 0
	})
	for i, st := range rt.Stats().PerShard {
		if st.CPU != det.CPUs[i] {
			t.Errorf("shard %d pinned to %d, want CPU %d", i, st.CPU, det.CPUs[i])
		}
	}
	// Each shard checks its own thread's mask while it runs.
	cfg.Shards = len(det.CPUs)
	run(t, cfg, func(f *Fiber) int {
		for i := 0; i < f.Shards(); i++ {
			c := SpawnOn[affinityMsg](f, i, affinityProbe{})
			mask, err := Ask(f, c, 0, func(r Reply[[]int]) affinityMsg { return affinityMsg{r} })
			if err != nil || len(mask) != 1 || mask[0] != det.CPUs[i] {
				t.Errorf("shard %d thread affinity %v (%v), want [%d]", i, mask, err, det.CPUs[i])
			}
		}
		return 0
	})
}

type affinityMsg struct{ reply Reply[[]int] }

type affinityProbe struct{}

func (affinityProbe) Receive(f *Fiber, m affinityMsg) {
	var set unix.CPUSet
	var cpus []int
	if err := unix.SchedGetaffinity(0, &set); err == nil {
		for c := 0; c < 1024; c++ {
			if set.IsSet(c) {
				cpus = append(cpus, c)
			}
		}
	}
	m.reply.Send(f, cpus)
}
