#!/usr/bin/env bash
# mkimage.sh: a one-layer OCI image archive from a static binary, with tar and sha256sum only
# (no registry, no daemon). The archive is an OCI image layout (index.json names the image
# through io.containerd.image.name, so `ctr images import` tags it) plus a docker-archive
# manifest.json, so other tools load it too. Output is reproducible: same inputs, same digest.
#
#   hack/mkimage.sh [--user UID:GID] [--label KEY=VALUE]... REF OUT.tar BINARY [ARGS...]
#
# The binary lands at /<basename>, the entrypoint is ["/<basename>", ARGS...]. Prints
# "REF sha256:<manifest digest>": REF's repository @ that digest is how a Pod pins the image.
set -euo pipefail
user=""; labels=()
while [[ ${1:-} == --* ]]; do
  case $1 in
    --user) user=$2; shift 2 ;;
    --label) [[ $2 == *=* ]] || { echo "mkimage: --label wants KEY=VALUE, got '$2'" >&2; exit 2; }; labels+=("$2"); shift 2 ;;
    *) echo "mkimage: unknown flag $1" >&2; exit 2 ;;
  esac
done
(($# >= 3)) || { echo "usage: mkimage.sh [--user UID:GID] [--label K=V]... REF OUT.tar BINARY [ARGS...]" >&2; exit 2; }
ref=$1 out=$2 bin=$3; shift 3
[[ $ref =~ ^[a-z0-9./_-]+:[A-Za-z0-9._-]+$ ]] || { echo "mkimage: REF must be repository:tag, got '$ref'" >&2; exit 2; }
[[ -x $bin ]] || { echo "mkimage: $bin is not an executable" >&2; exit 2; }
json() { local s=$1; s=${s//\\/\\\\}; s=${s//\"/\\\"}; printf '"%s"' "$s"; }
name=$(basename "$bin")
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mkdir -p "$work/rootfs/tmp" "$work/rootfs/etc" "$work/rootfs/work" "$work/blobs/sha256"
cp "$bin" "$work/rootfs/$name"; chmod 0755 "$work/rootfs/$name"; chmod 1777 "$work/rootfs/tmp" "$work/rootfs/work"
printf 'root:x:0:0:root:/:/%s\nnonroot:x:65532:65532:nonroot:/:/%s\n' "$name" "$name" > "$work/rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' > "$work/rootfs/etc/group"
tar -C "$work/rootfs" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$work/layer.tar" .
lsha=$(sha256sum "$work/layer.tar" | cut -d' ' -f1); lsize=$(stat -c %s "$work/layer.tar")
mv "$work/layer.tar" "$work/blobs/sha256/$lsha"
entry=$(json "/$name"); for a in "$@"; do entry+=",$(json "$a")"; done
lab=""; for l in "${labels[@]}"; do lab+="${lab:+,}$(json "${l%%=*}"):$(json "${l#*=}")"; done
printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":[%s],"Env":["PATH=/"],"WorkingDir":"/","User":%s,"Labels":{%s}},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created_by":"hack/mkimage.sh"}]}' \
  "$entry" "$(json "$user")" "$lab" "$lsha" > "$work/config.json"
csha=$(sha256sum "$work/config.json" | cut -d' ' -f1); csize=$(stat -c %s "$work/config.json")
mv "$work/config.json" "$work/blobs/sha256/$csha"
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
  "$csha" "$csize" "$lsha" "$lsize" > "$work/manifest.oci.json"
msha=$(sha256sum "$work/manifest.oci.json" | cut -d' ' -f1); msize=$(stat -c %s "$work/manifest.oci.json")
mv "$work/manifest.oci.json" "$work/blobs/sha256/$msha"
printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
  "$msha" "$msize" "$ref" "${ref##*:}" > "$work/index.json"
printf '{"imageLayoutVersion":"1.0.0"}' > "$work/oci-layout"
printf '[{"Config":"blobs/sha256/%s","RepoTags":["%s"],"Layers":["blobs/sha256/%s"]}]' "$csha" "$ref" "$lsha" > "$work/manifest.json"
tar -C "$work" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$out.tmp" oci-layout index.json manifest.json blobs
mv "$out.tmp" "$out"
echo "$ref sha256:$msha"
