#!/usr/bin/env bash
# `make kube`: build the real control plane (kube-apiserver, kube-scheduler, etcd) from our wrapper Go
# modules tools/kube/<v>/ and tools/etcd/<v>/, into a folder keyed by version; skipped when it is there.
#
#   scripts/build-kube.sh [CACHE]     CACHE defaults to $HAMI_KUBE_CACHE, else .tools/kube
#   scripts/build-kube.sh --which     print the two folder names it would build, build nothing
#
# Versions: tools/kube/versions.tsv, whose first row is the default; HAMI_KUBE_VERSION (make KUBE_VERSION=)
# picks another row by version or minor (1.37.2, v1.37.2, 1.37), HAMI_ETCD_VERSION (make ETCD_VERSION=)
# overrides the row's etcd. Layout: CACHE/kubernetes-<v>/{kube-apiserver,kube-scheduler} and
# CACHE/etcd-<v>/etcd, so each version has its own folder and one is never reused for another. Each folder is
# filled in a temporary sibling and renamed once complete: an interrupted build leaves nothing that looks
# finished. sim/controlplane/binaries.py selects and finds the binaries by the same rule.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)

version_of() {  # the version go.mod $1 requires of module $2
	awk -v m="$2" '$1 == m { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' "$1"
}

tagged() { [[ -z $1 || $1 == v* ]] && echo "$1" || echo "v$1"; }

# The row of versions.tsv HAMI_KUBE_VERSION asks for (the first row when unset): "kubernetes etcd".
want=$(tagged "${HAMI_KUBE_VERSION:-}")
row=$(awk -v want="$want" '
	{ sub(/#.*/, "") } NF < 2 { next }
	want == "" { print $1, $2; found = 1; exit }
	$1 == want || index($1, want ".") == 1 { print $1, $2; found++ }
	END { if (found != 1) exit 1 }' "$ROOT/tools/kube/versions.tsv") || {
	echo "build-kube: HAMI_KUBE_VERSION=${HAMI_KUBE_VERSION:-} is not one version of tools/kube/versions.tsv:" \
		"$(awk '{ sub(/#.*/, "") } NF >= 2 { printf "%s ", $1 }' "$ROOT/tools/kube/versions.tsv")" >&2
	exit 2
}
read -r KUBE_VERSION ETCD_VERSION <<<"$row"
[[ -z ${HAMI_ETCD_VERSION:-} ]] || ETCD_VERSION=$(tagged "$HAMI_ETCD_VERSION")
if [[ ${1:-} == --which ]]; then
	echo "kubernetes-$KUBE_VERSION etcd-$ETCD_VERSION"
	exit 0
fi
for pair in "kube k8s.io/kubernetes $KUBE_VERSION" "etcd go.etcd.io/etcd/server/v3 $ETCD_VERSION"; do
	read -r wrapper module version <<<"$pair"
	go_mod=$ROOT/tools/$wrapper/$version/go.mod
	if [[ ! -f $go_mod || $(version_of "$go_mod" "$module") != "$version" ]]; then
		echo "build-kube: no wrapper module $go_mod requiring $module $version" >&2
		exit 2
	fi
done

CACHE=${1:-${HAMI_KUBE_CACHE:-$ROOT/.tools/kube}}
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)
export GOWORK=off CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=readonly
# Go's official tarball installs to /usr/local/go; a non-interactive shell (CI) may lack it on PATH.
command -v go >/dev/null || [[ ! -x /usr/local/go/bin/go ]] || export PATH="/usr/local/go/bin:$PATH"
command -v go >/dev/null || { echo "build-kube: go is not installed (Go >= 1.24 needed)" >&2; exit 2; }

build() {  # build FOLDER WRAPPER_DIR OUT LDFLAGS PACKAGE... -- into CACHE/FOLDER[/OUT] unless complete
	local name=$1 folder=$CACHE/$1 wrapper=$2 out=$3 ldflags=$4
	shift 4
	if [[ -f $folder/.complete ]]; then
		echo "build-kube: $folder is there"
		return
	fi
	local partial
	partial=$(mktemp -d "$CACHE/.partial-$name-XXXXXX")
	chmod 755 "$partial"
	echo "build-kube: building $name (a cold build takes tens of minutes on 2 cores) ..."
	local started=$SECONDS
	(cd "$ROOT/tools/$wrapper" && go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$partial/$out" "$@")
	echo "built in $((SECONDS - started))s with $(go version)" >"$partial/.complete"
	rm -rf "$folder"
	mv "$partial" "$folder"
	echo "build-kube: $name built in $((SECONDS - started))s"
}

minor=${KUBE_VERSION#v1.}
minor=${minor%%.*}
base=k8s.io/component-base/version
build "kubernetes-$KUBE_VERSION" "kube/$KUBE_VERSION" "" \
	"-s -w -X $base.gitVersion=$KUBE_VERSION -X $base.gitMajor=1 -X $base.gitMinor=$minor" \
	k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler
# etcd's server module is itself a main package (its main.go calls etcdmain.Main).
build "etcd-$ETCD_VERSION" "etcd/$ETCD_VERSION" etcd "-s -w" go.etcd.io/etcd/server/v3
