package sizing

import (
	"os"
	"path/filepath"
	"testing"
)

func TestShardsForMilliCPU(t *testing.T) {
	for _, tc := range []struct {
		milli int64
		want  int
	}{{0, 1}, {250, 1}, {999, 1}, {1000, 1}, {1500, 1}, {2000, 2}, {3999, 3}, {16000, 16}} {
		if got := ShardsForMilliCPU(tc.milli); got != tc.want {
			t.Errorf("ShardsForMilliCPU(%d) = %d, want %d", tc.milli, got, tc.want)
		}
	}
}

func TestParseCPUMax(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"max 100000\n", 0, false},
		{"200000 100000\n", 2000, false},
		{"150000 100000", 1500, false},
		{"50000", 500, false},
		{"", 0, true},
		{"abc 100000", 0, true},
		{"100 0", 0, true},
		{"1 2 3", 0, true},
	} {
		got, err := ParseCPUMax(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseCPUMax(%q) = %d, %v; want %d, err=%v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestShardsForCapsByQuota(t *testing.T) {
	if got := ShardsFor(8, 2500); got != 2 {
		t.Fatalf("ShardsFor(8, 2500) = %d, want 2", got)
	}
	if got := ShardsFor(2, 0); got != 2 {
		t.Fatalf("ShardsFor(2, 0) = %d, want 2", got)
	}
	if got := ShardsFor(4, 500); got != 1 {
		t.Fatalf("ShardsFor(4, 500) = %d, want 1", got)
	}
}

func TestDetect(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cpu.max")
	if err := os.WriteFile(path, []byte("100000 100000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := Detect(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.CPUs) == 0 || d.QuotaMilli != 1000 || d.Shards != 1 {
		t.Fatalf("Detect = %+v, want at least one CPU, quota 1000, 1 shard", d)
	}
	d, err = Detect(filepath.Join(dir, "missing"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Shards != len(d.CPUs) {
		t.Fatalf("without a quota Shards = %d, want %d", d.Shards, len(d.CPUs))
	}
	if err := os.WriteFile(path, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Detect(path); err == nil {
		t.Fatal("Detect with a malformed cpu.max: want an error")
	}
}

func FuzzParseCPUMax(f *testing.F) {
	f.Add("max 100000")
	f.Add("200000 100000")
	f.Fuzz(func(t *testing.T, s string) {
		q, err := ParseCPUMax(s)
		if err == nil && q < 0 {
			t.Fatalf("ParseCPUMax(%q) = %d, negative", s, q)
		}
	})
}

func TestParseCPUMaxHugeQuota(t *testing.T) {
	// Found by FuzzParseCPUMax: quota*1000 used to overflow to a negative
	// millicore count.
	if q, err := ParseCPUMax("8000000000000000000"); err != nil || q != 80000000000000000 {
		t.Fatalf("ParseCPUMax(8e18) = %d, %v; want 8e16 millicores", q, err)
	}
	if _, err := ParseCPUMax("9223372036854775807 1"); err == nil {
		t.Fatal("a quota whose millicores overflow int64 was accepted")
	}
}
