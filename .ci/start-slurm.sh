#!/usr/bin/env bash
# Install (if needed) and start a single-node Slurm cluster on THIS host for the executor tests
# (tests/test_executors.py), and print the partition to use as DAYBREAK_TEST_SLURM on stdout (everything else
# goes to stderr):
#
#   export DAYBREAK_TEST_SLURM="$(bash .ci/start-slurm.sh)"
#
# What it sets up: Debian's slurm-wlm and munge; a munge key; /etc/slurm/slurm.conf describing this host as the
# only node (its CPUs, sockets and memory as `slurmd -C` reports them, and two stand-in "gpu" GRES so that
# --gpus-per-node requests are scheduled and CUDA_VISIBLE_DEVICES is set as on a GPU cluster) in a partition
# `debug` (Default=YES); no cgroups (proctrack/linuxproc, task/none), no accounting database (so no sacct).
# munged, slurmctld and slurmd run as root daemons (no systemd here). Then it waits (at most
# DAYBREAK_SLURM_WAIT_S, default 60 s) until `sinfo` shows the node idle.
#
# Needs root. Idempotent: a second run finds the node idle and returns at once. When it fails it says why and
# where the daemons' logs are (/var/log/slurm/).
set -euo pipefail

PARTITION="${DAYBREAK_SLURM_PARTITION:-debug}"
WAIT_S="${DAYBREAK_SLURM_WAIT_S:-60}"
CONF_DIR=/etc/slurm
CONF="$CONF_DIR/slurm.conf"
LOG_DIR=/var/log/slurm

log() { echo "start-slurm: $*" >&2; }
die() { echo "start-slurm: error: $*" >&2; exit 1; }

node_state() {  # the partition's node state as sinfo prints it (idle, mix, alloc, down*, ...); empty if none
    timeout 10 sinfo -h -p "$PARTITION" -o %t 2>/dev/null | head -1 || true
}

# --- already up? --------------------------------------------------------------------------------------------------
if command -v sinfo >/dev/null 2>&1 && pgrep -x slurmctld >/dev/null && pgrep -x slurmd >/dev/null; then
    case "$(node_state)" in
        idle|mix|alloc|comp)
            echo "$PARTITION"
            exit 0 ;;
    esac
fi

[ "$(id -u)" = 0 ] || die "needs root (apt-get, munged, slurmctld, slurmd)"

# --- 1. packages --------------------------------------------------------------------------------------------------
if ! command -v slurmd >/dev/null 2>&1 || ! command -v slurmctld >/dev/null 2>&1 \
        || ! command -v sbatch >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
    log "installing slurm-wlm and munge (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    APT_LOG="$(mktemp)"
    if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends slurm-wlm munge; } \
            >"$APT_LOG" 2>&1; then
        cat "$APT_LOG" >&2
        die "apt-get could not install slurm-wlm and munge (its messages are above)"
    fi
    rm -f "$APT_LOG"
fi

# --- 2. munge: the key and the daemon -----------------------------------------------------------------------------
if [ ! -s /etc/munge/munge.key ]; then
    log "creating a munge key"
    mkdir -p /etc/munge
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
chown -R munge:munge /etc/munge
chmod 0700 /etc/munge
chmod 0400 /etc/munge/munge.key
mkdir -p /run/munge /var/lib/munge /var/log/munge
chown munge:munge /run/munge /var/lib/munge /var/log/munge
chmod 0755 /run/munge
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    log "starting munged"
    runuser -u munge -- /usr/sbin/munged >&2 || die "munged did not start (see /var/log/munge/munged.log)"
    for _ in $(seq 1 20); do
        munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break
        sleep 0.25
    done
    munge -n | unmunge >/dev/null \
        || die "munged runs but a credential does not round-trip (see /var/log/munge/munged.log)"
fi

# --- 3. slurm.conf for this host ----------------------------------------------------------------------------------
HOST="$(hostname -s)"
# `slurmd -C` prints this node's line as slurmd itself will see it (CPUs, sockets, cores, threads, RealMemory);
# a node described with more than it has would be drained as "Low RealMemory" / "Low CPUs".
NODE_LINE="$(slurmd -C 2>/dev/null | grep '^NodeName=' | head -1 || true)"
if [ -z "$NODE_LINE" ]; then
    MEM_MB="$(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo)"
    NODE_LINE="NodeName=$HOST CPUs=$(nproc) RealMemory=$MEM_MB"
fi
NODE_LINE="$(echo "$NODE_LINE" | sed -E "s/^NodeName=[^ ]+/NodeName=$HOST/") Gres=gpu:2 State=UNKNOWN"

mkdir -p "$CONF_DIR" "$LOG_DIR" /var/spool/slurmctld /var/spool/slurmd
# Stand-in GPUs: Slurm drops a GPU GRES without a device file, so give it two character devices that are copies of
# /dev/null (1,3), outside /dev so that nothing else mistakes them for NVIDIA devices. Slurm only counts them
# and numbers them (CUDA_VISIBLE_DEVICES=0,1); no cgroup constrains them (TaskPlugin=task/none).
FAKE_GPUS=/var/lib/slurm-fake-gpus
mkdir -p "$FAKE_GPUS"
for i in 0 1; do
    [ -c "$FAKE_GPUS/gpu$i" ] || mknod "$FAKE_GPUS/gpu$i" c 1 3
done
NEW_CONF="$(mktemp)"
trap 'rm -f "$NEW_CONF"' EXIT
cat >"$NEW_CONF" <<EOF
# Written by daybreak's .ci/start-slurm.sh: a single-node test cluster on $HOST. Not for production use.
ClusterName=daybreak
SlurmctldHost=$HOST
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
SchedulerType=sched/backfill
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd.log
SlurmctldPort=6817
SlurmdPort=6818
# finished jobs stay visible a while (squeue/sacct-less lookups by submitit), killed steps end quickly
MinJobAge=300
KillWait=5
InactiveLimit=0
MaxArraySize=10001
$NODE_LINE
PartitionName=$PARTITION Nodes=$HOST Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
printf 'Name=gpu File=%s/gpu[0-1]\n' "$FAKE_GPUS" >"$CONF_DIR/gres.conf.new"

CHANGED=0
if ! cmp -s "$NEW_CONF" "$CONF"; then
    log "writing $CONF for node $HOST"
    cp "$NEW_CONF" "$CONF"
    CHANGED=1
fi
if ! cmp -s "$CONF_DIR/gres.conf.new" "$CONF_DIR/gres.conf"; then
    mv "$CONF_DIR/gres.conf.new" "$CONF_DIR/gres.conf"
    CHANGED=1
else
    rm -f "$CONF_DIR/gres.conf.new"
fi
chmod 0644 "$CONF" "$CONF_DIR/gres.conf"

# --- 4. the daemons -----------------------------------------------------------------------------------------------
stop_daemon() {  # NAME PIDFILE: end the daemon this script started earlier (by its pid file), wait for it
    local pid
    pid="$(cat "$2" 2>/dev/null || true)"
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        log "stopping $1 (pid $pid) to load the new configuration"
        kill "$pid"
        for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    fi
}
if [ "$CHANGED" = 1 ]; then
    stop_daemon slurmd /run/slurmd.pid
    stop_daemon slurmctld /run/slurmctld.pid
fi
if ! pgrep -x slurmctld >/dev/null; then
    log "starting slurmctld"
    slurmctld >&2 || die "slurmctld did not start (see $LOG_DIR/slurmctld.log)"
fi
if ! pgrep -x slurmd >/dev/null; then
    log "starting slurmd"
    slurmd >&2 || die "slurmd did not start (see $LOG_DIR/slurmd.log)"
fi

# --- 5. wait for the node ------------------------------------------------------------------------------------------
DEADLINE=$((SECONDS + WAIT_S))
STATE=""
while [ "$SECONDS" -lt "$DEADLINE" ]; do
    STATE="$(node_state)"
    case "$STATE" in
        idle|mix|alloc|comp)
            log "node $HOST is $STATE in partition $PARTITION"
            echo "$PARTITION"
            exit 0 ;;
        down*|drain*|drng*|fail*|inval*)
            # a node that was down before a restart: ReturnToService=2 brings it back once slurmd registers;
            # give it a nudge in case it was drained by an older configuration
            scontrol update NodeName="$HOST" State=RESUME >/dev/null 2>&1 || true ;;
    esac
    sleep 1
done
REASON="$(timeout 10 scontrol show node "$HOST" 2>/dev/null | grep -o 'Reason=.*' || true)"
die "node $HOST is not idle after ${WAIT_S} s (sinfo says '${STATE:-nothing}'${REASON:+; $REASON}); see" \
    "$LOG_DIR/slurmctld.log and $LOG_DIR/slurmd.log"
