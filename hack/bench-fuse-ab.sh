#!/usr/bin/env bash
# A/B FUSE benchmarks: builds this tree's internal/fuse benchmarks and those
# of the commit BENCH_BASE (in a temporary worktree, with that commit's own
# replica-host), runs each top-level benchmark on both, one after the other,
# and prints every mount figure both report with its new/old ratio.
#
#   BENCH_BASE=3cad493 make bench-fuse
#   BENCH_BASE=3cad493 BENCH='SeqRead|Creates' BENCHTIME=3x ROUNDS=2 hack/bench-fuse-ab.sh
#
# ROUNDS alternates new and old that many times per benchmark (figures are
# the means), so that a shared machine's changing load falls on both. Odd
# rounds run new first, even rounds old first (ABBA): on the 2-vCPU VM the
# second binary of a pair measured slower whichever it was
# (docs/performance.md, "Method"), so use an even ROUNDS.
# SUB selects sub-benchmarks (a -test.bench pattern after the top-level
# name, e.g. SUB='^write-behind$').
#
# BEFORE_RUN is a shell command run before each benchmark binary, e.g. one
# that fills the page cache so that both sides write into memory the VM
# must fetch from its hypervisor (docs/performance.md, "Pages of files
# written in order dropped behind the writes").
#
# For rates (MiB/s, IOPS, creates/s, stats/s) a ratio above 1 is faster; for
# latencies (-µs) and processor time (cpu-ms/MiB) below 1 is better.
set -euo pipefail

base=${BENCH_BASE:?set BENCH_BASE to the commit to compare against}
filter=${BENCH:-.}
benchtime=${BENCHTIME:-1x}
rounds=${ROUNDS:-1}
sub=${SUB:-}
root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
cleanup() {
	git -C "$root" worktree remove --force "$tmp/base" >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT
trap "exit 130" INT TERM

git -C "$root" worktree add --detach "$tmp/base" "$base" >/dev/null
echo "building the benchmarks of this tree and of $base" >&2
(cd "$root" && go test -c -o "$tmp/new.test" ./internal/fuse/)
(cd "$tmp/base" && go test -c -o "$tmp/old.test" ./internal/fuse/)

# Each binary runs in its own tree's package directory: its TestMain builds
# that tree's replica-host.
run() { # run new|old benchmark
	local dir=$root
	[ "$1" = old ] && dir=$tmp/base
	local pattern="^$2\$"
	[ -n "$sub" ] && pattern="$pattern/$sub"
	[ -n "${BEFORE_RUN:-}" ] && bash -c "$BEFORE_RUN"
	(cd "$dir/internal/fuse" && "$tmp/$1.test" -test.run '^$' -test.bench "$pattern" \
		-test.benchtime "$benchtime" -test.timeout 60m 2>&1) |
		grep -E '^Benchmark' | sed "s/^/$1 /" | tee -a "$tmp/results" >&2
}

for b in $("$tmp/new.test" -test.list 'Benchmark.*' | grep -E "$filter"); do
	if ! "$tmp/old.test" -test.list "^$b\$" | grep -q .; then
		echo "($b does not exist at $base)" >&2
		for _ in $(seq "$rounds"); do run new "$b"; done
		continue
	fi
	for r in $(seq "$rounds"); do
		if [ $((r % 2)) = 1 ]; then
			run new "$b"
			run old "$b"
		else
			run old "$b"
			run new "$b"
		fi
	done
done

echo
printf '%-48s %-28s %14s %14s %9s\n' benchmark metric new "old ($base)" new/old
awk '
	{
		side = $1; name = $2; sub(/-[0-9]+$/, "", name)
		for (i = 4; i + 1 <= NF; i += 2) {
			unit = $(i + 1)
			if (unit !~ /^(program-)?mount-/) continue
			v[side, name, unit] += $i; cnt[side, name, unit]++
			if (side == "new" && !((name, unit) in seen)) { seen[name, unit] = 1; order[++n] = name SUBSEP unit }
		}
	}
	END {
		for (k = 1; k <= n; k++) {
			split(order[k], p, SUBSEP)
			nv = v["new", p[1], p[2]] / cnt["new", p[1], p[2]]
			if (!(("old", p[1], p[2]) in cnt)) { printf "%-48s %-28s %14.4g %14s %9s\n", p[1], p[2], nv, "-", "-"; continue }
			ov = v["old", p[1], p[2]] / cnt["old", p[1], p[2]]
			printf "%-48s %-28s %14.4g %14.4g %9.2f\n", p[1], p[2], nv, ov, (ov == 0 ? 0 : nv / ov)
		}
	}' "$tmp/results"
