# ratios.awk: the median of per-run ratios, the one way every bench-*.sh
# script of make bench-service compares wo with its peers.
#
# Input, one measurement a line: "TEST RUN SERVER key=value key=value ...".
# For every TEST and every SERVER other than wo, and every key in KEYS (a
# space-separated list, -v KEYS=...), it prints the median over the runs
# where both ran of wo's value divided by the server's: the median of the
# per-run ratios, not the ratio of the medians, so that a run disturbed for
# both servers moves one ratio, not two medians.
#
#   awk -v KEYS="rps p99_us cpu_us_per_req" -f hack/lib/ratios.awk results
function median(a, n,   i, j, t) {
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{
	for (f = 4; f <= NF; f++) {
		eq = index($f, "=")
		if (eq) v[$1, $2, $3, substr($f, 1, eq - 1)] = substr($f, eq + 1) + 0
	}
	tests[$1] = 1; runs[$2] = 1; srv[$3] = 1
}
END {
	nk = split(KEYS, keys, " ")
	for (t in tests) for (x in srv) {
		if (x == "wo") continue
		line = ""; ok = 0
		for (k = 1; k <= nk; k++) {
			n = 0
			for (r in runs)
				if (((t, r, "wo", keys[k]) in v) && ((t, r, x, keys[k]) in v) && v[t, r, x, keys[k]] > 0)
					col[++n] = v[t, r, "wo", keys[k]] / v[t, r, x, keys[k]]
			if (n) { ok = 1; line = line sprintf(" %s=%.2fx", keys[k], median(col, n)); runs_used = n }
		}
		if (ok) printf "ratio %-18s wo/%-8s%s  (median of %d per-run ratios)\n", t, x, line, runs_used
	}
}
