#!/usr/bin/env bash
# GlusterFS replica 3 on this machine, as a baseline of the FUSE benchmarks
# (internal/fuse/gluster_bench_test.go): issue 14 asks the replicated mount
# for twice its figures. Three bricks on this disk, GlusterFS's default
# volume options, its own FUSE client; root only.
#
#   hack/gluster-bench.sh up     # prints the variables the benchmarks read
#   hack/gluster-bench.sh down   # unmounts, deletes the volume, stops GlusterFS
#   make bench-gluster           # up, make bench-fuse with it, down
#
# GLUSTER_ROOT (default /var/tmp/cellfleet-gluster) holds the bricks and the
# mount point; keep it on the disk the benchmarks' temporary directories
# use, or the comparison is not one disk against one disk.
set -euo pipefail

root=${GLUSTER_ROOT:-/var/tmp/cellfleet-gluster}
vol=cellfleet-bench
host=$(hostname)

up() {
	if ! command -v glusterd >/dev/null; then
		echo "installing glusterfs-server (Debian)" >&2
		apt-get -o DPkg::Lock::Timeout=120 update -qq
		DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 install -y -qq glusterfs-server glusterfs-client >/dev/null
	fi
	pgrep -x glusterd >/dev/null || glusterd
	local ready=
	for _ in $(seq 50); do
		if gluster --mode=script volume list >/dev/null 2>&1; then ready=1; break; fi
		sleep 0.2
	done
	[ -n "$ready" ] || { echo "glusterd does not answer after 10s" >&2; exit 1; }
	mkdir -p "$root"
	if [ "$(stat -c %d "$root")" != "$(stat -c %d "${TMPDIR:-/tmp}")" ]; then
		echo "warning: $root is not on the disk of ${TMPDIR:-/tmp}" >&2
	fi
	if ! gluster --mode=script volume info "$vol" >/dev/null 2>&1; then
		mkdir -p "$root"/b1 "$root"/b2 "$root"/b3
		# force: three bricks of one replica set on one host.
		gluster --mode=script volume create "$vol" replica 3 \
			"$host:$root/b1" "$host:$root/b2" "$host:$root/b3" force >&2
	fi
	gluster --mode=script volume start "$vol" force >&2
	mkdir -p "$root/mnt"
	mountpoint -q "$root/mnt" || mount -t glusterfs "$host:/$vol" "$root/mnt"
	echo "export CELLFLEET_BENCH_GLUSTER=$root/mnt"
	echo "export CELLFLEET_BENCH_GLUSTER_BRICKS=$root/b1:$root/b2:$root/b3"
}

down() {
	if mountpoint -q "$root/mnt" 2>/dev/null; then umount "$root/mnt" || umount -l "$root/mnt"; fi
	if pgrep -x glusterd >/dev/null; then
		gluster --mode=script volume stop "$vol" force >/dev/null 2>&1 || true
		gluster --mode=script volume delete "$vol" >/dev/null 2>&1 || true
	fi
	# glusterd, the brick servers and the self-heal daemon: nothing stays
	# behind to take the processors of the next run.
	local p
	for p in glusterd glusterfsd glusterfs; do pkill -x "$p" 2>/dev/null || true; done
	for _ in $(seq 50); do
		pgrep '^gluster' >/dev/null || break
		sleep 0.2
	done
	for p in glusterd glusterfsd glusterfs; do pkill -9 -x "$p" 2>/dev/null || true; done
	rm -rf "$root"
}

case ${1:-} in
up) up ;;
down) down ;;
*)
	echo "usage: $0 up|down" >&2
	exit 2
	;;
esac
