#!/usr/bin/env bash
# The README's promise, checked on a machine nobody set up by hand: inside a clean container made from the local
# base image (Debian 12 minbase with Python 3.11 + venv, a C/C++ compiler, make and git; nothing else), clone
# this repository and run one of the README's two commands:
#   quickstart       `make quickstart` as a user who is not root (a cluster's login node); fail unless every row
#                    is `ok` or a skip the framework's own declaration explains (Chainer has no BERT)
#   quickstart-root  the same as root
#   test             `make test` as a user who is not root: it must pass, every test that needs what such a
#                    user cannot install skipped with its reason
#   test-root        `make test` as root in a privileged container (network namespaces, the SLURM daemons,
#                    NFS-Ganesha, podman), which installs the tests' system packages itself
#                    (tools/install_test_servers.sh): it must pass with no test skipped for a missing package
#
#     tools/fresh_machine_check.sh [REF] [quickstart|quickstart-root|test|test-root]  # as root, with podman
#
# The container gets this machine's pip settings (where the package index and local wheel folders are, as
# tools/container_images.py gives its builds) and nothing else: no caches, no Horovod wheel (it is built, 3 to
# 5 minutes), no results, no images. The clone is of a committed REF (default HEAD; a git bundle, since a
# worktree's .git is only a pointer), so commit first. It takes 15 minutes or more on 2 cores (test-root: 40,
# and about 15 GB of disk for the framework images it builds). Not part of the tests.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-python3}"
export CONTAINERS_CONF="$repo/tools/containers.conf"
name="rosetta-fresh-$$"

base="$("$python" "$repo/tools/container_images.py" base)"
work="$(mktemp -d /tmp/rosetta-fresh.XXXXXX)"
cleanup() { podman rm --force --ignore --time 0 "$name" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
ref="${1:-HEAD}"
mode="${2:-quickstart}"
case "$mode" in quickstart|quickstart-root|test|test-root) ;; *) echo "mode must be quickstart, quickstart-root, test or test-root, got '$mode'" >&2; exit 2;; esac
git -C "$repo" bundle create "$work/rosetta.bundle" "$ref" 2>/dev/null
commit="$(git -C "$repo" rev-parse "$ref^{commit}")"
echo "fresh-machine check ($mode) of $ref ($commit) in $base"
mapfile -t pip_mounts < <("$python" "$repo/tools/container_images.py" pip-mounts "$work")

cat > "$work/inside.sh" <<'INSIDE'
set -euo pipefail
git clone --quiet --no-checkout /in/rosetta.bundle /root/rosetta
cd /root/rosetta
git checkout --quiet "$ROSETTA_COMMIT"
if [[ "$ROSETTA_MODE" == *-root ]]; then
  as_user() { bash -c "$1"; }
else
  useradd --create-home newcomer
  mv /root/rosetta /home/newcomer/rosetta && chown -R newcomer: /home/newcomer/rosetta
  cd /home/newcomer/rosetta
  as_user() { su newcomer -c "cd /home/newcomer/rosetta && $1"; }
fi
if [[ "$ROSETTA_MODE" == test* ]]; then
  as_user "make test"
  exit
fi
as_user "make quickstart"
# The verdict: every row ok, or skipped because the framework's declaration rules the combination out.
.venv/bin/python - <<'VERDICT'
import json, sys
import frameworks
from harness.contract.spec import RunSpec
from harness.results import table
rows = table.load("results")
bad = []
for row in rows.to_dict("records"):
    spec = RunSpec.from_json(json.loads(row["spec"]))
    declared = frameworks.get(spec.framework).unsupported_reason(spec.workload, spec.strategy, spec.storage,
                                                                spec.launcher, spec.device)
    if not (row["status"] == "ok" or (row["status"] == "skipped" and declared)):
        bad.append(f"{row['framework']} {row['workload']} x{row['world_size']}: {row['status']}: {row['reason']}")
print(f"fresh-machine check: {len(rows)} rows, {len(bad)} not ok", *bad, sep="\n")
sys.exit(1 if bad or rows.empty else 0)
VERDICT
INSIDE

start=$(date +%s)
privileged=()
if [ "$mode" = test-root ]; then
  # /tmp, where the tests' NFS exports live, and podman's image store on this machine's disk as on a real
  # machine: NFS-Ganesha's VFS export needs file handles, and podman's overlay driver an upper directory, which
  # the container's own overlay file system gives neither (every NFS mount failed with NFS4ERR_NOENT on it)
  mkdir -m 1777 "$work/tmp"
  mkdir "$work/containers"
  privileged=(--privileged --volume "$work/tmp:/tmp" --volume "$work/containers:/var/lib/containers")
fi
podman run --rm --init --network host "${privileged[@]}" --name "$name" --volume "$work:/in:ro" "${pip_mounts[@]}" \
  --env "ROSETTA_COMMIT=$commit" --env "ROSETTA_MODE=$mode" \
  "$base" bash /in/inside.sh
echo "fresh-machine check ($mode) passed in $(( $(date +%s) - start )) s"
