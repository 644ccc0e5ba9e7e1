#!/bin/sh
# Open MPI's remote agent for network-namespace hosts: "netns_rsh.sh HOST COMMAND..." runs COMMAND in
# the namespace HOST. Open MPI hands the remote command over as a string for a shell, as ssh would.
# ROSETTA_HOST tells the ranks which host they are on (namespaces share one host name).
ns=$1
shift
exec ip netns exec "$ns" env ROSETTA_HOST="$ns" sh -c "$*"
