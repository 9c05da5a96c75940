#!/usr/bin/env bash
# `make kube`: build the real control plane (kube-apiserver, kube-scheduler, etcd) from our wrapper Go
# modules in tools/kube and tools/etcd, into a folder keyed by version; skipped when the binaries are there.
#
#   scripts/build-kube.sh [CACHE]     CACHE defaults to $HAMI_KUBE_CACHE, else .tools/kube
#
# Layout: CACHE/kubernetes-<v>/{kube-apiserver,kube-scheduler} and CACHE/etcd-<v>/etcd, where <v> is the
# version tools/*/go.mod requires, so a version bump builds into a new folder and an old one is never reused
# by mistake. Each folder is filled in a temporary sibling and renamed once complete: an interrupted build
# leaves nothing that looks finished. sim/controlplane/binaries.py finds the binaries by the same rule.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${1:-${HAMI_KUBE_CACHE:-$ROOT/.tools/kube}}
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)

version_of() {  # the version go.mod $1 requires of module $2
	awk -v m="$2" '$1 == m { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' "$1"
}

export GOWORK=off CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=readonly
KUBE_VERSION=$(version_of "$ROOT/tools/kube/go.mod" k8s.io/kubernetes)
ETCD_VERSION=$(version_of "$ROOT/tools/etcd/go.mod" go.etcd.io/etcd/server/v3)
[[ -n $KUBE_VERSION && -n $ETCD_VERSION ]] || { echo "build-kube: no version in tools/*/go.mod" >&2; exit 2; }
# Go's official tarball installs to /usr/local/go; a non-interactive shell (CI) may lack it on PATH.
command -v go >/dev/null || [[ ! -x /usr/local/go/bin/go ]] || export PATH="/usr/local/go/bin:$PATH"
command -v go >/dev/null || { echo "build-kube: go is not installed (Go >= 1.24 needed)" >&2; exit 2; }

build() {  # build FOLDER MODULE_DIR LDFLAGS PACKAGE... -- into CACHE/FOLDER unless complete
	local name=$1 folder=$CACHE/$1 module=$2 ldflags=$3
	shift 3
	if [[ -f $folder/.complete ]]; then
		echo "build-kube: $folder is there"
		return
	fi
	local partial
	partial=$(mktemp -d "$CACHE/.partial-$name-XXXXXX")
	chmod 755 "$partial"
	echo "build-kube: building $name (a cold build takes tens of minutes on 2 cores) ..."
	local started=$SECONDS
	(cd "$ROOT/tools/$module" && go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$partial/" "$@")
	echo "built in $((SECONDS - started))s with $(go version)" >"$partial/.complete"
	rm -rf "$folder"
	mv "$partial" "$folder"
	echo "build-kube: $name built in $((SECONDS - started))s"
}

minor=${KUBE_VERSION#v1.}
minor=${minor%%.*}
base=k8s.io/component-base/version
build "kubernetes-$KUBE_VERSION" kube \
	"-s -w -X $base.gitVersion=$KUBE_VERSION -X $base.gitMajor=1 -X $base.gitMinor=$minor" \
	k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler
build "etcd-$ETCD_VERSION" etcd "-s -w" .
