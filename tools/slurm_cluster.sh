#!/usr/bin/env bash
# A real one-node SLURM cluster (slurmctld + slurmd + munge) for tests, in a private network namespace.
#
#   tools/slurm_cluster.sh start STATE_DIR   # prints the namespace and SLURM_CONF to use
#   tools/slurm_cluster.sh stop STATE_DIR
#
# ROSETTA_SLURM_NODES=N (default 1) makes N SLURM nodes of this one machine, named rosetta-n1 ... rosetta-nN:
# one slurmd each (slurmd -N, SLURM's multiple-slurmd mode: one port each), so that a job spans nodes and its
# steps land on the node srun names (rosetta doctor --remote srun); node i at address 10.213.7.i of the namespace.
#
# The daemons bind all addresses, so they run inside the namespace "rosetta-slurm" (ROSETTA_SLURM_NETNS names
# another, so that two test processes on one machine each have a cluster), which gets a veth pair (both ends
# inside) for a non-loopback address; nothing is reachable from outside.
# Run clients inside it too: ip netns exec rosetta-slurm env SLURM_CONF=STATE_DIR/slurm.conf sbatch ...
# Needs root and Debian's slurm-wlm, munge and iproute2.
set -euo pipefail
NS=${ROSETTA_SLURM_NETNS:-rosetta-slurm}
ADDR=10.213.7.1
cmd=${1:?usage: $0 start|stop STATE_DIR}
state=$(realpath -m "${2:?usage: $0 start|stop STATE_DIR}")

NODES=${ROSETTA_SLURM_NODES:-1}
case $NODES in ''|*[!0-9]*|0) echo "$0: ROSETTA_SLURM_NODES must be a count >= 1, got '$NODES'" >&2; exit 2 ;; esac

stop() {
  for pidfile in "$state"/slurmd*.pid "$state"/slurmctld.pid "$state"/munged.pid; do
    [ -f "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null || true
  done
  sleep 1
  for pidfile in "$state"/slurmd*.pid "$state"/slurmctld.pid "$state"/munged.pid; do
    [ -f "$pidfile" ] && kill -9 "$(cat "$pidfile")" 2>/dev/null || true
    rm -f "$pidfile"
  done
  ip netns del "$NS" 2>/dev/null || true
}

if [ "$cmd" = stop ]; then stop; exit 0; fi
[ "$cmd" = start ] || { echo "usage: $0 start|stop STATE_DIR" >&2; exit 2; }

for tool in slurmctld slurmd munged ip; do
  command -v "$tool" >/dev/null || { echo "$0: $tool not found (apt-get install slurm-wlm munge iproute2)" >&2; exit 3; }
done
stop
mkdir -p "$state"/{spool,ctld,munge-run,munge-lib,log}
chmod 755 "$state" "$state/munge-run"
chmod 700 "$state/munge-lib"
node=$(hostname -s)
cores=$(nproc)
if [ "$NODES" = 1 ]; then
  names=$node suffix=""
  nodes_conf="NodeName=$node NodeAddr=$ADDR CPUs=$cores State=UNKNOWN"
else  # one slurmd a node, each on its own port, all on this machine (%n: the node's name)
  names="rosetta-n[1-$NODES]" suffix="-%n" nodes_conf=""
  for i in $(seq 1 "$NODES"); do
    nodes_conf+="NodeName=rosetta-n$i NodeHostname=$node NodeAddr=${ADDR%.*}.$i Port=$((6818 + i)) CPUs=$cores State=UNKNOWN"$'\n'
  done
fi

ip netns add "$NS"
ip -n "$NS" link set lo up
ip -n "$NS" link add veth-slurm0 type veth peer name veth-slurm1
ip -n "$NS" addr add "$ADDR/24" dev veth-slurm0
for i in $(seq 2 "$NODES"); do ip -n "$NS" addr add "${ADDR%.*}.$i/24" dev veth-slurm0; done  # a node's own
ip -n "$NS" link set veth-slurm0 up
ip -n "$NS" link set veth-slurm1 up

[ -f "$state/munge.key" ] || dd if=/dev/urandom of="$state/munge.key" bs=1024 count=1 status=none
chmod 400 "$state/munge.key"
chown root:root "$state/munge.key"

cat > "$state/slurm.conf" <<CONF
ClusterName=rosetta
SlurmctldHost=$node($ADDR)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$state/munge-run/munge.socket
CredType=cred/munge
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/spool$suffix
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd$suffix.pid
SlurmctldLogFile=$state/log/slurmctld.log
SlurmdLogFile=$state/log/slurmd$suffix.log
SlurmctldPort=6817
SlurmdPort=6818
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MailProg=/bin/true
# a shared 2-core test machine can keep slurmctld from answering within the default 10 s; sbatch then fails
# with "Zero Bytes were transmitted or received" (seen once in CI)
MessageTimeout=60
ReturnToService=2
MpiDefault=none
$nodes_conf
PartitionName=debug Nodes=$names Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
# slurmd on SLURM 22.05 wants a cgroup.conf even with proctrack/linuxproc; cgroup v1 mounts in a private
# mount namespace (ip netns exec gives one) keep it away from the host's cgroups.
cat > "$state/cgroup.conf" <<CONF
CgroupPlugin=cgroup/v1
CgroupAutomount=yes
CgroupMountpoint=$state/cgroup
CONF

inns() { ip netns exec "$NS" "$@"; }
inns munged --key-file="$state/munge.key" --socket="$state/munge-run/munge.socket" \
  --pid-file="$state/munged.pid" --log-file="$state/log/munged.log" --seed-file="$state/munge-lib/seed" \
  --force </dev/null >/dev/null 2>&1
export SLURM_CONF="$state/slurm.conf"
inns slurmctld -f "$SLURM_CONF" </dev/null >/dev/null 2>&1
if [ "$NODES" = 1 ]; then
  inns slurmd -f "$SLURM_CONF" </dev/null >/dev/null 2>&1
else
  for i in $(seq 1 "$NODES"); do
    mkdir -p "$state/spool-rosetta-n$i"
    inns slurmd -f "$SLURM_CONF" -N "rosetta-n$i" </dev/null >/dev/null 2>&1
  done
fi
for _ in $(seq 1 60); do
  if [ "$(inns sinfo -h -N -o %T 2>/dev/null | grep -cE '^idle')" -ge "$NODES" ]; then
    echo "namespace=$NS"
    echo "SLURM_CONF=$SLURM_CONF"
    exit 0
  fi
  sleep 0.5
done
echo "$0: the cluster did not become idle; see $state/log" >&2
inns sinfo >&2 || true
tail -5 "$state"/log/*.log >&2 || true
exit 1
