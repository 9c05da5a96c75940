#!/usr/bin/env bash
# `make image`: builds the Dockerfile with buildah (no Docker engine needed), cached by its inputs.
#   base:   $PYTHON_IMAGE if set; else python:3.11-slim where Docker Hub answers; else a Debian bookworm base
#           made with mmdebstrap (python3, venv, passwd, CA certificates) and kept as localhost/hami-base:<key>,
#           <key> a hash of how it is made
#   inputs: a content hash of Dockerfile, .dockerignore, requirements/, pyproject.toml, README.md, wsgi.py,
#           app/, workers/, config/ (tracked and untracked, not ignored) and the base image's ID; when
#           $IMAGE_NAME:inputs-<hash> exists nothing is built (its revision label is the revision that first
#           built these inputs: the same content)
#   tags:   $IMAGE_NAME:inputs-<hash>, $IMAGE_NAME:<version>-<git revision>[-dirty], $IMAGE_NAME:<version>;
#           the version-revision reference is written to build/image.ref for the checks and the e2e
# The builder stage's locked `pip install --require-hashes` reaches the package index with the machine's CA
# bundle, mounted into the RUN steps only (never into the image). buildah and mmdebstrap are installed with
# apt when missing (as root, as CI runs). Prints the build time, the size and the layers.
set -euo pipefail
cd "$(dirname "$0")/.."

name="${IMAGE_NAME:-localhost/hami-scheduler-py}"
ref_file="build/image.ref"
registry_base="docker.io/library/python:3.11-slim"
suite="bookworm"
packages="python3,python3-venv,python-is-python3,ca-certificates,passwd"
base_path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
inputs=(Dockerfile .dockerignore requirements pyproject.toml README.md wsgi.py app workers config)
started=$(date +%s)

# --- tools ------------------------------------------------------------------------------------------------------
missing=()
command -v buildah >/dev/null || missing+=(buildah)
command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "build-image: ${missing[*]} missing; install them (apt-get install ${missing[*]}) or run as root" >&2
        exit 1
    fi
    echo "==> apt-get install ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ "$(id -u)" != 0 ]; then
    echo "build-image: buildah --isolation chroot needs root here" >&2
    exit 1
fi

# --- base -------------------------------------------------------------------------------------------------------
exists() { buildah inspect --type image "$1" >/dev/null 2>&1; }
if [ -n "${PYTHON_IMAGE:-}" ]; then
    base="$PYTHON_IMAGE"
    echo "==> base: $base (PYTHON_IMAGE)"
elif timeout 90 buildah pull --quiet "$registry_base" >/dev/null 2>&1; then
    base="$registry_base"
    echo "==> base: $base (registry)"
else
    key=$(printf '%s\n' "mmdebstrap --variant=minbase --include=$packages $suite" "PATH=$base_path" | sha256sum | cut -c1-12)
    base="localhost/hami-base:$suite-$key"
    if exists "$base"; then
        echo "==> base: $base (Docker Hub unreachable; cached Debian base)"
    else
        echo "==> base: Docker Hub unreachable; making $base with mmdebstrap"
        work=$(mktemp -d)
        ctr=""
        trap '[ -n "$ctr" ] && buildah rm "$ctr" >/dev/null 2>&1; rm -rf "$work"' EXIT
        mmdebstrap --quiet --variant=minbase --include="$packages" "$suite" "$work/rootfs.tar"
        ctr=$(buildah from scratch)
        tar -xf "$work/rootfs.tar" -C "$(buildah mount "$ctr")"
        buildah umount "$ctr" >/dev/null
        buildah config --env "PATH=$base_path" --cmd python3 \
            --label "org.opencontainers.image.description=Debian $suite minbase + $packages (mmdebstrap)" "$ctr"
        buildah commit --quiet "$ctr" "$base" >/dev/null
        buildah rm "$ctr" >/dev/null
        ctr=""
    fi
fi
base_id=$(buildah inspect --type image --format '{{.FromImageID}}' "$base")

# --- the image --------------------------------------------------------------------------------------------------
hash=$({ git ls-files -z -co --exclude-standard -- "${inputs[@]}" | sort -z | xargs -0 sha256sum; echo "$base_id"; } \
    | sha256sum | cut -c1-16)
version=$(python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
revision=$(git rev-parse --short=12 HEAD)
if [ -n "$(git status --porcelain -- "${inputs[@]}")" ]; then
    revision="$revision-dirty"
fi
cached="$name:inputs-$hash"
if exists "$cached"; then
    echo "==> $cached exists: these inputs are built already"
else
    echo "==> buildah bud $cached (base $base)"
    buildah bud --quiet --layers --isolation chroot \
        --volume /etc/ssl/certs:/etc/ssl/certs:ro \
        --build-arg "PYTHON_IMAGE=$base" \
        --build-arg "VERSION=$version" \
        --build-arg "REVISION=$revision" \
        --build-arg "CREATED=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
        --tag "$cached" . >/dev/null
fi
buildah tag "$cached" "$name:$version-$revision" "$name:$version"
mkdir -p build
echo "$name:$version-$revision" >"$ref_file"

echo
echo "make image: $name:$version-$revision (also :$version, :inputs-$hash) in $(($(date +%s) - started))s"
echo "  size: $(buildah images --format '{{.Size}}' "$cached" | head -1)"
buildah inspect --type image "$cached" | python3 -c '
import json, sys
image = json.load(sys.stdin)["OCIv1"]
config, layers = image["config"], [h for h in image["history"] if not h.get("empty_layer")]
print("  layers:", len(image["rootfs"]["diff_ids"]))
for entry in layers:
    print("    " + entry.get("created_by", "").replace("/bin/sh -c #(nop) ", "")[:100])
labels = config.get("Labels") or {}
print("  user:", config.get("User"), " revision label:", labels.get("org.opencontainers.image.revision"))
'
