#!/usr/bin/env bash
# `make kube`: build the real control plane (kube-apiserver, kube-scheduler, kube-controller-manager, kubectl
# and etcd) from our wrapper Go modules tools/kube/<v>/ and tools/etcd/<v>/, into a folder keyed by version;
# skipped when it is there.
#
#   scripts/build-kube.sh [CACHE]      CACHE defaults to $HAMI_KUBE_CACHE, else .tools/kube
#   scripts/build-kube.sh --which      print the two folder names it would build, build nothing
#   scripts/build-kube.sh --toolchain  print the GOTOOLCHAIN of each of the two builds, build nothing
#
# Versions: tools/kube/versions.tsv, whose first row is the default; HAMI_KUBE_VERSION (make KUBE_VERSION=)
# picks another row by version or minor (1.37.2, v1.37.2, 1.37), HAMI_ETCD_VERSION (make ETCD_VERSION=)
# overrides the row's etcd. Layout: CACHE/kubernetes-<v>/{kube-apiserver,kube-scheduler,
# kube-controller-manager,kubectl} and CACHE/etcd-<v>/etcd, so each version has its own folder and one is
# never reused for another. Each folder is filled in a temporary sibling and renamed once complete: an
# interrupted build leaves nothing that looks finished. A complete folder that lacks a binary this script
# now builds (made by an older script) gets just the missing ones, each renamed into place when linked.
# Toolchain: a wrapper module's `toolchain` line (v1.38.0-beta.0: go1.27.3, upstream's .go-version) is the
# exact Go it is built with (GOTOOLCHAIN=<it>; the Go module proxy serves it); without one, GOTOOLCHAIN=local.
# sim/controlplane/binaries.py selects and finds the binaries by the same rules.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)

version_of() {  # the version go.mod $1 requires of module $2
	awk -v m="$2" '$1 == m { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' "$1"
}

toolchain_of() {  # the GOTOOLCHAIN a wrapper go.mod $1 is built with: its toolchain line, else local
	awk '$1 == "toolchain" { print $2; found = 1; exit } END { if (!found) print "local" }' "$1"
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
KUBE_MOD=$ROOT/tools/kube/$KUBE_VERSION/go.mod ETCD_MOD=$ROOT/tools/etcd/$ETCD_VERSION/go.mod
for pair in "kube k8s.io/kubernetes $KUBE_VERSION" "etcd go.etcd.io/etcd/server/v3 $ETCD_VERSION"; do
	read -r wrapper module version <<<"$pair"
	go_mod=$ROOT/tools/$wrapper/$version/go.mod
	if [[ ! -f $go_mod || $(version_of "$go_mod" "$module") != "$version" ]]; then
		echo "build-kube: no wrapper module $go_mod requiring $module $version" >&2
		exit 2
	fi
done
if [[ ${1:-} == --toolchain ]]; then
	echo "$(toolchain_of "$KUBE_MOD") $(toolchain_of "$ETCD_MOD")"
	exit 0
fi

CACHE=${1:-${HAMI_KUBE_CACHE:-$ROOT/.tools/kube}}
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)
export GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=readonly
# Go's official tarball installs to /usr/local/go; a non-interactive shell (CI) may lack it on PATH.
command -v go >/dev/null || [[ ! -x /usr/local/go/bin/go ]] || export PATH="/usr/local/go/bin:$PATH"
command -v go >/dev/null || { echo "build-kube: go is not installed (Go >= 1.24 needed)" >&2; exit 2; }

build() {  # build FOLDER WRAPPER_DIR LDFLAGS BINARY=PACKAGE... into CACHE/FOLDER unless complete with all
	local name=$1 folder=$CACHE/$1 wrapper=$ROOT/tools/$2 ldflags=$3
	shift 3
	local toolchain missing=() each
	toolchain=$(toolchain_of "$wrapper/go.mod")
	for each in "$@"; do
		[[ -x $folder/${each%%=*} ]] || missing+=("$each")
	done
	if [[ -f $folder/.complete && ${#missing[@]} -eq 0 ]]; then
		echo "build-kube: $folder is there"
		return
	fi
	local partial started=$SECONDS
	partial=$(mktemp -d "$CACHE/.partial-$name-XXXXXX")
	chmod 755 "$partial"
	if [[ -f $folder/.complete ]]; then  # an older script's folder: add what it lacks, keep what it has
		echo "build-kube: adding ${missing[*]%%=*} to $name (GOTOOLCHAIN=$toolchain) ..."
	else
		missing=("$@")
		echo "build-kube: building $name with GOTOOLCHAIN=$toolchain (a cold build takes tens of minutes on 2 cores) ..."
	fi
	local note="" began
	for each in "${missing[@]}"; do  # one go build per binary, so .complete records what each one cost
		began=$SECONDS
		(cd "$wrapper" && GOTOOLCHAIN=$toolchain go build -trimpath -buildvcs=false -ldflags "$ldflags" \
			-o "$partial/${each%%=*}" "${each#*=}")
		note+=" ${each%%=*} $((SECONDS - began))s"
	done
	note="built in $((SECONDS - started))s ($note ) with $(cd "$wrapper" && GOTOOLCHAIN=$toolchain go version)"
	if [[ -f $folder/.complete ]]; then
		for each in "${missing[@]}"; do mv "$partial/${each%%=*}" "$folder/"; done
		echo "$note: ${missing[*]%%=*}" >>"$folder/.complete"
		rm -rf "$partial"
	else
		echo "$note" >"$partial/.complete"
		rm -rf "$folder"
		mv "$partial" "$folder"
	fi
	echo "build-kube: $name built in $((SECONDS - started))s"
}

minor=${KUBE_VERSION#v1.}
minor=${minor%%.*}
base=k8s.io/component-base/version
build "kubernetes-$KUBE_VERSION" "kube/$KUBE_VERSION" \
	"-s -w -X $base.gitVersion=$KUBE_VERSION -X $base.gitMajor=1 -X $base.gitMinor=$minor" \
	kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler \
	kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager kubectl=k8s.io/kubernetes/cmd/kubectl
# etcd's server module is itself a main package (its main.go calls etcdmain.Main).
build "etcd-$ETCD_VERSION" "etcd/$ETCD_VERSION" "-s -w" etcd=go.etcd.io/etcd/server/v3
