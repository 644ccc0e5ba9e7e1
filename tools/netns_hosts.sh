#!/usr/bin/env bash
# Several real hosts on one machine: network namespaces rosetta-h0..h(N-1) with their own addresses
# 10.213.8.(i+1)/24 on eth0, joined by a bridge in the namespace rosetta-sw (nothing else is attached,
# so no traffic leaves the machine). Each link can then be capped with tc's tbf (the `network` axis).
# Inside a host this machine's name resolves to the host's own address, as a cluster node's does
# (/etc/netns/<host>/hosts, which `ip netns exec` mounts over /etc/hosts): software that finds its
# address from its host name (Gloo in Horovod's process sets) then uses the host's link, not loopback.
#
#   tools/netns_hosts.sh start N    # prints host=address lines
#   tools/netns_hosts.sh stop
# ROSETTA_NETNS_PREFIX (default rosetta) names a separate set (<prefix>-h0.., <prefix>-sw), so that
# two test sessions on one machine do not stop each other's hosts. Needs root and iproute2.
set -euo pipefail
SW=${ROSETTA_NETNS_PREFIX:-rosetta}-sw
PREFIX=${ROSETTA_NETNS_PREFIX:-rosetta}-h
cmd=${1:?usage: $0 start N | stop}

stop() {
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^($PREFIX[0-9]+|$SW)$" || true); do
    # what still runs inside (a link's delay line) would keep the namespace alive past its deletion
    for pid in $(ip netns pids "$ns"); do kill -9 "$pid" 2>/dev/null || true; done
    rm -f "/run/rosetta-delay-line/$(stat -L -c %i "/run/netns/$ns")"  # its record (harness/base/delay_line.py)
    ip netns del "$ns"
    rm -rf "/etc/netns/$ns"
  done
}

if [ "$cmd" = stop ]; then stop; exit 0; fi
[ "$cmd" = start ] || { echo "usage: $0 start N | stop" >&2; exit 2; }
count=${2:?usage: $0 start N}
stop
ip netns add "$SW"
ip -n "$SW" link add br0 type bridge
ip -n "$SW" link set br0 up
for i in $(seq 0 $((count - 1))); do
  ns="$PREFIX$i"
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip -n "$ns" link add eth0 type veth peer name "port$i" netns "$SW"
  ip -n "$ns" addr add "10.213.8.$((i + 1))/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$SW" link set "port$i" master br0
  ip -n "$SW" link set "port$i" up
  mkdir -p "/etc/netns/$ns"
  { grep -v -w -F "$(hostname)" /etc/hosts || true; echo "10.213.8.$((i + 1)) $(hostname)"; } > "/etc/netns/$ns/hosts"
  echo "$ns=10.213.8.$((i + 1))"
done
