package sizing

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ShardsForMilliCPU returns the shard count for a CPU limit given in
// millicores: max(1, floor(milli/1000)). The downward API rounds a CPU limit
// up, which would oversubscribe a pod limited to 1.5 CPUs, so the operator
// computes the value itself with this function.
func ShardsForMilliCPU(milli int64) int {
	n := milli / 1000
	if n < 1 {
		return 1
	}
	return int(n)
}

// Detection describes the CPUs this process may use and the shard count that
// follows from them.
type Detection struct {
	// CPUs is the affinity set, in ascending order.
	CPUs []int
	// QuotaMilli is the cgroup v2 cpu.max quota in millicores, or 0 when there is
	// no quota (cpu.max says "max", or no cgroup v2 file was found).
	QuotaMilli int64
	// Shards is len(CPUs), capped by the quota rounded down, at least 1.
	Shards int
}

// DefaultCgroupCPUMax is where a process inside a cgroup v2 namespace finds its
// own CPU quota.
const DefaultCgroupCPUMax = "/sys/fs/cgroup/cpu.max"

// Detect reads the affinity set with sched_getaffinity and the quota from
// cpuMaxPath (DefaultCgroupCPUMax when empty). A missing quota file is not an
// error: with exclusive CPUs the kubelet may remove the quota, and the cpuset
// size is then the answer.
func Detect(cpuMaxPath string) (Detection, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return Detection{}, fmt.Errorf("sizing: sched_getaffinity: %w", err)
	}
	var d Detection
	for cpu := 0; cpu < len(set)*64; cpu++ {
		if set.IsSet(cpu) {
			d.CPUs = append(d.CPUs, cpu)
		}
	}
	if cpuMaxPath == "" {
		cpuMaxPath = DefaultCgroupCPUMax
	}
	raw, err := os.ReadFile(cpuMaxPath)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return Detection{}, fmt.Errorf("sizing: read %s: %w", cpuMaxPath, err)
	default:
		q, err := ParseCPUMax(string(raw))
		if err != nil {
			return Detection{}, fmt.Errorf("sizing: %s: %w", cpuMaxPath, err)
		}
		d.QuotaMilli = q
	}
	d.Shards = ShardsFor(len(d.CPUs), d.QuotaMilli)
	return d, nil
}

// ShardsFor combines an affinity set size with a quota (0 = none).
func ShardsFor(cpus int, quotaMilli int64) int {
	n := cpus
	if quotaMilli > 0 {
		if q := ShardsForMilliCPU(quotaMilli); q < n {
			n = q
		}
	}
	if n < 1 {
		n = 1
	}
	return n
}

// ParseCPUMax parses the contents of a cgroup v2 cpu.max file, "$MAX $PERIOD"
// where $MAX may be "max", and returns the quota in millicores (0 = no quota).
func ParseCPUMax(s string) (int64, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 || len(fields) > 2 {
		return 0, fmt.Errorf("cpu.max %q: want \"$MAX $PERIOD\"", s)
	}
	if fields[0] == "max" {
		return 0, nil
	}
	quota, err := strconv.ParseInt(fields[0], 10, 64)
	if err != nil || quota <= 0 {
		return 0, fmt.Errorf("cpu.max %q: quota %q is not a positive integer", s, fields[0])
	}
	period := int64(100000)
	if len(fields) == 2 {
		period, err = strconv.ParseInt(fields[1], 10, 64)
		if err != nil || period <= 0 {
			return 0, fmt.Errorf("cpu.max %q: period %q is not a positive integer", s, fields[1])
		}
	}
	// Divide first: quota*1000 overflows int64 for quotas the file can
	// legally hold (the fuzzer found 8e18).
	whole := quota / period
	if whole > math.MaxInt64/1000-1 {
		return 0, fmt.Errorf("cpu.max %q: quota %d over period %d is too large", s, quota, period)
	}
	if period > math.MaxInt64/1000 {
		return 0, fmt.Errorf("cpu.max %q: period %q is too large", s, fields[1])
	}
	return whole*1000 + (quota%period)*1000/period, nil
}
