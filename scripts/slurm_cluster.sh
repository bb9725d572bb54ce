#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, loopback only, for the SLURM integration test
# (tests/workflow/test_slurm.py). Debian packages; slurmctld + slurmd, and slurmdbd + MariaDB
# because the Snakemake SLURM executor polls job states with `sacct` and checks accounts with
# `sacctmgr`. Everything (configs, spool, database, logs) lives in one state folder.
#   bash scripts/slurm_cluster.sh install   # slurm-wlm, munge, slurmdbd, mariadb-server (once)
#   bash scripts/slurm_cluster.sh start     # configs + daemons; waits until the node is idle
#   bash scripts/slurm_cluster.sh status    # daemons, node state; exit 0 when all are up
#   bash scripts/slurm_cluster.sh logs      # the tail of every daemon log
#   bash scripts/slurm_cluster.sh stop      # stops what start started, removes the state folder
#                                           # (kept with PARASIM_SLURM_KEEP=1)
# State folder: $PARASIM_SLURM_DIR (default /tmp/parasim-slurm). Client commands find the cluster
# through /etc/slurm/slurm.conf, a link into that folder while the cluster runs: SLURM_CONF alone
# is not enough, since the executor's job step drops it before calling `srun` inside each job.
# The account and partition are read from the test profile (profiles/slurm-local/config.yaml).
# Ports: $PARASIM_SLURM_PORT (default 6817) for slurmctld, +1 slurmd, +2 slurmdbd, +3 MariaDB.
# Runs as root (the daemons launch jobs as the submitting user); re-runs itself with sudo if not.
set -euo pipefail

cmd=${1:-}
case "$cmd" in
  install | start | stop | status | logs) ;;
  *)
    echo "usage: bash scripts/slurm_cluster.sh install|start|stop|status|logs" >&2
    exit 2
    ;;
esac
if [ "$(id -u)" -ne 0 ]; then
  keep=PARASIM_SLURM_DIR,PARASIM_SLURM_PORT,PARASIM_SLURM_PROFILE,PARASIM_SLURM_KEEP
  exec sudo --preserve-env="$keep" bash "$0" "$@"
fi
cd "$(dirname "$0")/.."

STATE=${PARASIM_SLURM_DIR:-/tmp/parasim-slurm}
PORT=${PARASIM_SLURM_PORT:-6817}
PROFILE=${PARASIM_SLURM_PROFILE:-profiles/slurm-local/config.yaml}
CLUSTER=parasim
NODE=$(hostname -s)
export SLURM_CONF="$STATE/etc/slurm.conf"
ETC_CONF=/etc/slurm/slurm.conf # where Slurm's commands look when SLURM_CONF is not set
# Slurm's clients talk to munged on its default socket (sacctmgr ignores AuthInfo=socket=), so
# the cluster uses the machine's munged when one answers there, else starts its own on it.
MUNGE_SOCKET=/run/munge/munge.socket.2
DB_SOCKET="$STATE/run/mariadb.sock"
DAEMONS=(munged mariadb slurmdbd slurmctld slurmd) # start order; stop goes backwards

log() { echo "slurm_cluster: $*"; }

# The tail of one daemon's log (and of its stdout/stderr), to explain a failure.
show_log() {
  local f found=0
  for f in "$STATE/log/$1.log" "$STATE/log/$1.out"; do
    [ -s "$f" ] || continue
    found=1
    echo "---- last lines of $f ----" >&2
    tail -n "${2:-25}" "$f" >&2
    echo "----" >&2
  done
  [ $found = 1 ] || echo "(no log at $STATE/log/$1.log)" >&2
}

# Daemons run in the foreground of their own session: their pid is known at once, so a daemon
# that dies during startup is noticed at once.
launch() { # launch NAME COMMAND...: the pid is ours alone (run/NAME.pid); a daemon's own
  # pid file is run/NAME.daemon.pid: a daemon truncating and rewriting the file we read made a
  # start look like an exit (a read between the two saw no pid)
  local name=$1
  shift
  setsid "$@" </dev/null >>"$STATE/log/$name.out" 2>&1 &
  echo $! >"$STATE/run/$name.pid"
}

STARTING=0
fail() { # fail DAEMON MESSAGE; a failed start stops what it had started (logs are kept)
  echo "slurm_cluster: ERROR: $1: $2" >&2
  show_log "$1" 40
  if [ $STARTING = 1 ]; then
    STARTING=0
    PARASIM_SLURM_KEEP=1 do_stop >&2
    echo "slurm_cluster: logs in $STATE/log; 'bash scripts/slurm_cluster.sh stop' removes them" >&2
  fi
  exit 1
}

pid_of() { cat "$STATE/run/$1.pid" 2>/dev/null || true; }
running() { # running DAEMON: its pid file names a live process
  local pid
  pid=$(pid_of "$1")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

wait_for() { # wait_for SECONDS DAEMON COMMAND...: retry COMMAND until it succeeds
  local secs=$1 daemon=$2
  shift 2
  local end=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if [ "$daemon" != - ] && ! running "$daemon"; then
      fail "$daemon" "exited during startup"
    fi
    [ $SECONDS -ge $end ] && fail "$daemon" "not ready after ${secs}s (check: $*)"
    sleep 1
  done
}

# Account and partition of the test profile: the only place these names are written.
profile_value() { # profile_value KEY
  sed -n "s/^[[:space:]]*$1:[[:space:]]*[\"']\{0,1\}\([A-Za-z0-9_.-]*\).*/\1/p" "$PROFILE" | head -n 1
}

do_install() {
  local debs=(slurm-wlm munge slurmdbd mariadb-server) missing=() p
  for p in "${debs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if [ ${#missing[@]} -eq 0 ]; then
    log "Debian packages already installed (${debs[*]})"
    return
  fi
  log "installing Debian packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  log "installed: $(dpkg-query -W -f '${Package} ${Version}  ' slurmctld munge mariadb-server)"
}

write_configs() {
  local account=$1 partition=$2 hw cpus boards sockets cores threads mem
  # This machine's real CPUs and memory, as slurmd sees them (slurmd drains a node whose
  # configured memory or CPUs exceed what it finds).
  hw=$(slurmd -C 2>/dev/null | head -n 1 || true)
  field() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<<" $hw"; }
  cpus=$(field CPUs)
  boards=$(field Boards)
  sockets=$(field SocketsPerBoard)
  cores=$(field CoresPerSocket)
  threads=$(field ThreadsPerCore)
  mem=$(field RealMemory)
  [ -n "$cpus" ] || cpus=$(nproc)
  [ -n "$mem" ] || mem=$(($(sed -n 's/^MemTotal: *\([0-9]*\).*/\1/p' /proc/meminfo) / 1024))
  local topo="CPUs=$cpus"
  if [ -n "$boards" ] && [ -n "$sockets" ] && [ -n "$cores" ] && [ -n "$threads" ]; then
    topo+=" Boards=$boards SocketsPerBoard=$sockets CoresPerSocket=$cores ThreadsPerCore=$threads"
  fi

  cat >"$STATE/etc/slurm.conf" <<EOF
# Written by scripts/slurm_cluster.sh: one node, loopback only, state under $STATE.
ClusterName=$CLUSTER
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$STATE/slurmctld
SlurmdSpoolDir=$STATE/slurmd
SlurmctldPidFile=$STATE/run/slurmctld.daemon.pid
SlurmdPidFile=$STATE/run/slurmd.daemon.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups (containers and VMs without a delegated cgroup tree): plain process tracking.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
JobAcctGatherType=jobacct_gather/linux
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1000
ReturnToService=2
MailProg=/bin/true
MinJobAge=300
KillWait=10
InactiveLimit=0
SlurmctldTimeout=60
SlurmdTimeout=60
# Accounting in slurmdbd (MariaDB): sacct answers for finished jobs; accounts are enforced.
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$((PORT + 2))
AccountingStorageEnforce=associations
AccountingStoreFlags=job_comment
JobCompType=jobcomp/none
NodeName=$NODE NodeAddr=127.0.0.1 NodeHostname=$NODE $topo RealMemory=$mem State=UNKNOWN
PartitionName=$partition Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
  # Read by slurmd; nothing here is used while ProctrackType/TaskPlugin are not cgroup.
  cat >"$STATE/etc/cgroup.conf" <<EOF
# Written by scripts/slurm_cluster.sh: cgroups are not used by this cluster.
ConstrainCores=no
ConstrainRAMSpace=no
EOF
  local dbpass
  dbpass=$(cat "$STATE/etc/dbpass")
  (
    umask 077
    cat >"$STATE/etc/slurmdbd.conf" <<EOF
# Written by scripts/slurm_cluster.sh.
AuthType=auth/munge
DbdHost=$NODE
DbdAddr=127.0.0.1
DbdPort=$((PORT + 2))
SlurmUser=root
LogFile=$STATE/log/slurmdbd.log
PidFile=$STATE/run/slurmdbd.daemon.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$((PORT + 3))
StorageUser=slurm
StoragePass=$dbpass
StorageLoc=slurm_acct_db
EOF
  )
  log "node $NODE: $topo RealMemory=${mem}MB; partition $partition; account $account"
}

munge_ok() { munge -n -S "$MUNGE_SOCKET" | unmunge -S "$MUNGE_SOCKET"; }

start_munged() {
  if munge_ok >/dev/null 2>&1; then
    log "munged: using the one already running on $MUNGE_SOCKET"
    return
  fi
  mkdir -p "$STATE/munge"
  chmod 700 "$STATE/munge"
  if [ ! -d "$(dirname "$MUNGE_SOCKET")" ]; then
    mkdir -p "$(dirname "$MUNGE_SOCKET")"
    chmod 755 "$(dirname "$MUNGE_SOCKET")"
    touch "$STATE/run/munge-dir-created" # stop removes it again
  fi
  if [ ! -s "$STATE/munge/munge.key" ]; then
    dd if=/dev/urandom of="$STATE/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$STATE/munge/munge.key"
  fi
  launch munged munged --foreground --key-file="$STATE/munge/munge.key" \
    --socket="$MUNGE_SOCKET" --log-file="$STATE/log/munged.log" \
    --seed-file="$STATE/munge/munge.seed"
  wait_for 20 munged munge_ok
  log "munged up ($MUNGE_SOCKET)"
}

sql() { mariadb --no-defaults -S "$DB_SOCKET" -u root -e "$1"; }

start_mariadb() {
  local fresh=0
  if [ ! -d "$STATE/mariadb/mysql" ]; then
    fresh=1
    mariadb-install-db --no-defaults --datadir="$STATE/mariadb" --user=root \
      --auth-root-authentication-method=socket --skip-test-db \
      >>"$STATE/log/mariadb.log" 2>&1 || fail mariadb "mariadb-install-db failed"
  fi
  # Settings slurmdbd recommends (it warns about smaller ones).
  launch mariadb mariadbd --no-defaults --user=root --datadir="$STATE/mariadb" \
    --socket="$DB_SOCKET" --port=$((PORT + 3)) --bind-address=127.0.0.1 --skip-name-resolve \
    --pid-file="$STATE/run/mariadb.daemon.pid" --log-error="$STATE/log/mariadb.log" \
    --innodb-buffer-pool-size=128M --innodb-log-file-size=64M --innodb-lock-wait-timeout=900
  wait_for 60 mariadb mariadb-admin --no-defaults -S "$DB_SOCKET" -u root ping
  if [ $fresh = 1 ]; then
    local pass
    pass=$(cat "$STATE/etc/dbpass")
    sql "CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
         GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';" ||
      fail mariadb "could not create the slurm database user"
  fi
}

start_slurmdbd() {
  launch slurmdbd slurmdbd -D
  wait_for 60 slurmdbd sacctmgr -n list cluster
  if [ -z "$(sacctmgr -n -P list cluster format=cluster where cluster=$CLUSTER)" ]; then
    sacctmgr -i add cluster "$CLUSTER" >/dev/null || fail slurmdbd "sacctmgr add cluster failed"
  fi
}

add_account() { # the profile's account, with root and the user who ran sudo in it
  local account=$1 user
  if [ -z "$(sacctmgr -n -P list account format=account where name="$account")" ]; then
    sacctmgr -i add account "$account" cluster="$CLUSTER" \
      description="parasim test account" organization=parasim >/dev/null ||
      fail slurmdbd "sacctmgr add account $account failed"
  fi
  for user in root ${SUDO_USER:-}; do
    if [ -z "$(sacctmgr -n -P list assoc format=user where user="$user" account="$account")" ]; then
      sacctmgr -i add user "$user" account="$account" cluster="$CLUSTER" >/dev/null ||
        fail slurmdbd "sacctmgr add user $user account=$account failed"
    fi
  done
}

link_conf() { # /etc/slurm/slurm.conf -> our slurm.conf; never replaces a real cluster's file
  if [ -L "$ETC_CONF" ] && [ ! -e "$ETC_CONF" ]; then
    log "removing the dangling link $ETC_CONF -> $(readlink "$ETC_CONF")"
    rm -f "$ETC_CONF"
  fi
  if [ -e "$ETC_CONF" ]; then
    if ! head -n 1 "$ETC_CONF" 2>/dev/null | grep -q "^# Written by scripts/slurm_cluster.sh"; then
      echo "slurm_cluster: ERROR: $ETC_CONF exists and was not written by this script" \
        "(a real SLURM installation?); not touching it" >&2
      exit 1
    fi
    rm -f "$ETC_CONF"
  fi
  mkdir -p "$(dirname "$ETC_CONF")"
  ln -s "$SLURM_CONF" "$ETC_CONF"
}

unlink_conf() {
  if [ -L "$ETC_CONF" ] && [ "$(readlink "$ETC_CONF")" = "$SLURM_CONF" ]; then
    rm -f "$ETC_CONF"
  fi
}

node_idle() { sinfo -h -N -n "$NODE" -o %t | grep -qx idle; }

do_start() {
  for b in slurmctld slurmd slurmdbd munged mariadbd sacctmgr; do
    command -v "$b" >/dev/null || {
      echo "slurm_cluster: ERROR: $b not found; run: bash scripts/slurm_cluster.sh install" >&2
      exit 1
    }
  done
  [ -f "$PROFILE" ] || {
    echo "slurm_cluster: ERROR: profile $PROFILE not found" >&2
    exit 1
  }
  local account partition
  account=$(profile_value slurm_account)
  partition=$(profile_value slurm_partition)
  if [ -z "$account" ] || [ -z "$partition" ]; then
    echo "slurm_cluster: ERROR: no slurm_account / slurm_partition in $PROFILE" >&2
    exit 1
  fi
  if all_running; then
    log "already running (state $STATE)"
    return
  fi
  # An earlier start that did not stop (its daemons killed with the shell that ran it) leaves
  # its state folder: its slurmctld state would bring back that run's jobs as running on this
  # node, which then never goes idle. Stop what is left of it and start from an empty folder.
  if any_running; then
    log "some daemons of an earlier start are running: stopping them, removing $STATE"
    PARASIM_SLURM_KEEP=0 do_stop
  elif [ -d "$STATE" ]; then
    log "the state of an earlier start that did not stop is left in $STATE: removing it"
    PARASIM_SLURM_KEEP=0 do_stop
  fi
  local p
  for p in "$PORT" $((PORT + 1)) $((PORT + 2)) $((PORT + 3)); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "slurm_cluster: ERROR: port $p on 127.0.0.1 is in use; choose free ports with" \
        "PARASIM_SLURM_PORT (now $PORT: slurmctld, +1 slurmd, +2 slurmdbd, +3 MariaDB)" >&2
      exit 1
    fi
  done
  local t0=$SECONDS
  STARTING=1
  mkdir -p "$STATE"/{etc,run,log,slurmctld,slurmd}
  chmod 755 "$STATE" "$STATE/etc"
  [ -s "$STATE/etc/dbpass" ] || (umask 077 && head -c 18 /dev/urandom | base64 | tr -d '/+=' \
    >"$STATE/etc/dbpass")
  write_configs "$account" "$partition"
  link_conf
  start_munged
  start_mariadb
  log "MariaDB up (127.0.0.1:$((PORT + 3)))"
  start_slurmdbd
  add_account "$account"
  log "slurmdbd up (127.0.0.1:$((PORT + 2)))"
  launch slurmctld slurmctld -D
  wait_for 60 slurmctld bash -c "scontrol ping | grep -q UP"
  log "slurmctld up (127.0.0.1:$PORT)"
  launch slurmd slurmd -D
  wait_for 60 slurmd node_idle
  wait_for 30 slurmdbd sacct -n -X --starttime now-1hour
  STARTING=0
  log "node $NODE idle, sacct answers; up in $((SECONDS - t0))s ($ETC_CONF -> $SLURM_CONF)"
  sinfo
}

all_running() {
  local d
  for d in "${DAEMONS[@]:1}"; do running "$d" || return 1; done
  munge_ok >/dev/null 2>&1
}
any_running() {
  local d
  for d in "${DAEMONS[@]}"; do running "$d" && return 0; done
  return 1
}

stop_daemon() { # stop_daemon NAME: TERM, then KILL after 30 s
  local name=$1 pid _
  pid=$(pid_of "$name")
  if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
    rm -f "$STATE/run/$name.pid"
    return
  fi
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 60); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "$name (pid $pid) ignored TERM for 30s: killing it"
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$STATE/run/$name.pid"
  log "stopped $name (pid $pid)"
}

do_stop() {
  if [ ! -d "$STATE" ]; then
    unlink_conf
    log "not running (no $STATE)"
    return
  fi
  if running slurmctld; then # jobs left over: cancel them so that no job step outlives slurmd
    scancel --full --quiet --state=PENDING,RUNNING "--clusters=$CLUSTER" 2>/dev/null ||
      scancel --quiet --state=PENDING,RUNNING 2>/dev/null || true
    local _
    for _ in $(seq 20); do
      [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
      sleep 0.5
    done
  fi
  local k
  for ((k = ${#DAEMONS[@]} - 1; k >= 0; k--)); do stop_daemon "${DAEMONS[k]}"; done
  if [ -f "$STATE/run/munge-dir-created" ]; then
    rm -f "$MUNGE_SOCKET" "$MUNGE_SOCKET.lock"
    rmdir "$(dirname "$MUNGE_SOCKET")" 2>/dev/null || true
  fi
  unlink_conf
  if [ "${PARASIM_SLURM_KEEP:-0}" = 1 ]; then
    log "kept $STATE (PARASIM_SLURM_KEEP=1)"
  else
    rm -rf "$STATE"
    log "removed $STATE"
  fi
}

do_status() {
  local d ok=0
  if [ ! -d "$STATE" ]; then
    log "not running (no $STATE)"
    return 3
  fi
  for d in "${DAEMONS[@]}"; do
    if running "$d"; then
      printf '  %-10s running (pid %s)\n' "$d" "$(pid_of "$d")"
    elif [ "$d" = munged ] && munge_ok >/dev/null 2>&1; then
      printf '  %-10s running (not started by this script)\n' "$d"
    else
      printf '  %-10s not running\n' "$d"
      ok=3
    fi
  done
  if running slurmctld; then
    sinfo -N -l || true
    squeue || true
  fi
  return $ok
}

do_logs() {
  local d
  for d in "${DAEMONS[@]}"; do show_log "$d" 40 2>&1; done
}

case "$cmd" in
  install) do_install ;;
  start) do_start ;;
  stop) do_stop ;;
  status) do_status ;;
  logs) do_logs ;;
esac
