#!/bin/sh
# The remote agent for network-namespace hosts: "netns_rsh.sh HOST [-o|-p|-i VALUE]... COMMAND..." runs
# COMMAND in the namespace HOST. Open MPI (plm_rsh_agent) and horovodrun (in ssh's place) hand the remote
# command over as a string for a shell, as to ssh; ssh's options after the host (horovodrun's
# "-o ConnectTimeout=10") mean nothing here and are skipped.
# ROSETTA_HOST tells the ranks which host they are on (namespaces share one host name).
# Namespace hosts also share one /tmp, which real nodes do not: two Open MPI daemons made the same
# session directory (/tmp/ompi.HOST.UID/jf.N/...) at once and one lost the race ("mkdir ... File
# exists", exit 213, about 1 start in 30). Each host gets its own session-directory base instead.
ns=$1
shift
while [ $# -ge 2 ] && case $1 in -o|-p|-i) true ;; *) false ;; esac; do shift 2; done
tmp="${TMPDIR:-/tmp}/rosetta-netns-$ns"
mkdir -p "$tmp"
exec ip netns exec "$ns" env ROSETTA_HOST="$ns" OMPI_MCA_orte_tmpdir_base="$tmp" sh -c "$*"
