#!/usr/bin/env bash
# The flow docs/kubernetes.md walks through, on whatever cluster KUBECONFIG names, with the velodex
# image already on its node: helm install (operator and the trial MinIO), the team example of
# docs/examples/team.yaml applied with kubectl, `kubectl wait --for=condition=Ready`, then twine,
# pip and crane through the registry's Service on a loopback port-forward.
#
# `make kind-e2e` runs it on a kind cluster (hack/kind-e2e.sh); test/operator/e2e.test.ts runs it on
# the suites' own single-node cluster and goes on from there.
#
# Environment:
#   KUBECONFIG           the cluster (required)
#   VELODEX_IMAGE_TAG    the tag of docker.io/velodex/velodex on the node (default: e2e)
#   MINIO_IMAGE          the trial MinIO's image (default: the chart's)
#   PYPI_UPSTREAM        the cached index's upstream (default: the example's, PyPI)
#   HELM_EXTRA           more `helm install` arguments, split on spaces
#   UPLOAD_TOKEN         the hosted indexes' upload token (default: a new random one)
#   WORK                 a scratch folder (default: a new temp folder)
# On PATH: kubectl, helm, crane, and a Python with pip, twine, build and hatchling.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${KUBECONFIG:?KUBECONFIG names the cluster}"
export KUBECONFIG
TAG=${VELODEX_IMAGE_TAG:-e2e}
WORK=${WORK:-$(mktemp -d)}
TOKEN=${UPLOAD_TOKEN:-flow-token-$RANDOM$RANDOM}
MINIO_SECRET=flow-minio-$RANDOM$RANDOM
step() { printf '\n== %s\n' "$*" >&2; }

step "helm install: the operator, its CRDs and a trial MinIO"
minio_image=()
[ -n "${MINIO_IMAGE:-}" ] && minio_image=(--set "minio.image=$MINIO_IMAGE")
# shellcheck disable=SC2086 # HELM_EXTRA is a list of arguments
helm install velodex charts/velodex -n velodex-system --create-namespace \
  --set "image.tag=$TAG" --set image.pullPolicy=Never \
  --set minio.enabled=true --set "minio.secretKey=$MINIO_SECRET" "${minio_image[@]}" ${HELM_EXTRA:-}
kubectl rollout status deployment/velodex-operator deployment/velodex-minio -n velodex-system --timeout=300s
# The bucket Job's name ends in a hash of its pod (charts/velodex/templates/minio.yaml): by label.
kubectl wait --for=condition=complete job -l app.kubernetes.io/instance=velodex,app.kubernetes.io/component=minio-bucket -n velodex-system --timeout=300s

step "a team's registry and indexes, declared with kubectl"
kubectl create namespace team
kubectl create secret generic s3 -n team --from-literal=access-key=velodex "--from-literal=secret-key=$MINIO_SECRET"
kubectl create secret generic upload-tokens -n team "--from-literal=hosted=$TOKEN"
# velodex uses only Secrets that opt in (docs/kubernetes.md).
kubectl label secret s3 upload-tokens -n team velodex.dev/allow-reference=true
sed "s#https://pypi.org/simple/#${PYPI_UPSTREAM:-https://pypi.org/simple/}#" docs/examples/team.yaml | kubectl apply -f -
kubectl wait --for=condition=Ready pidx/hosted pidx/pypi pidx/all pidx/images packageregistry/default -n team --timeout=300s
kubectl get packageindex -n team

step "twine, pip and crane through a port-forward to the registry's Service"
kubectl port-forward -n team svc/default 0:80 --address 127.0.0.1 > "$WORK/port-forward.log" 2>&1 &
forward=$!
trap 'kill $forward 2>/dev/null || true' EXIT
port=""
for _ in $(seq 100); do
  port=$(sed -n 's/^Forwarding from 127.0.0.1:\([0-9]*\) .*/\1/p' "$WORK/port-forward.log" | head -n1)
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$WORK/port-forward.log" >&2; echo "kubectl port-forward did not start" >&2; exit 1; }
base=http://127.0.0.1:$port

# A small project of our own, built here: what twine uploads and pip gets back.
mkdir -p "$WORK/project/src/flow_demo"
printf '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n[project]\nname = "flow-demo"\nversion = "1.0"\n' > "$WORK/project/pyproject.toml"
printf 'VALUE = "%s"\n' "$RANDOM" > "$WORK/project/src/flow_demo/__init__.py"
python -m build --no-isolation --wheel --outdir "$WORK/dist" "$WORK/project" >/dev/null
wheel=$(ls "$WORK"/dist/flow_demo-1.0-*.whl)
twine upload --disable-progress-bar --non-interactive --repository-url "$base/team/hosted/" -u __token__ -p "$TOKEN" "$wheel"
PIP_CONFIG_FILE=/dev/null pip download --disable-pip-version-check --no-deps -d "$WORK/pip" --index-url "$base/team/all/simple/" flow-demo==1.0
cmp "$wheel" "$WORK/pip/$(basename "$wheel")"

export DOCKER_CONFIG=$WORK/docker
printf '%s' "$TOKEN" | crane auth login "127.0.0.1:$port" -u __token__ --password-stdin
tar -C "$WORK/project" -cf "$WORK/layer.tar" pyproject.toml
pushed=$(crane append --insecure -f "$WORK/layer.tar" -t "127.0.0.1:$port/team/images/flow:v1")
got=$(crane digest --insecure "127.0.0.1:$port/team/images/flow:v1")
[ "${pushed##*@}" = "$got" ] || { echo "crane pushed $pushed, the registry says $got" >&2; exit 1; }
crane export --insecure "127.0.0.1:$port/team/images/flow:v1" - | tar -xO pyproject.toml | cmp - "$WORK/project/pyproject.toml"

kubectl get packageindex -n team -o wide
step "done: twine, pip and crane worked through velodex on this cluster"
