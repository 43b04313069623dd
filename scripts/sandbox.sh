#!/usr/bin/env bash
# sandbox.sh: a local MySQL 9.7 server for sluice's tests, demo and benchmarks.
#
#   scripts/sandbox.sh up       install (once, cached) and start the server; print its settings
#   scripts/sandbox.sh down     stop the server (the datadir is kept)
#   scripts/sandbox.sh reset    stop the server and delete its datadir
#   scripts/sandbox.sh status   say whether it runs
#   scripts/sandbox.sh env      print the export line for SLUICE_TEST_DSN
#   SLUICE_SANDBOX_PROFILE=alt scripts/sandbox.sh up   the second server (PROFILE below)
#   scripts/sandbox.sh pt-osc ARGS   run pt-online-schema-change from the chroot
#                               (Percona Toolkit is installed there on first use)
#
# MySQL 9.7 ships in Debian unstable, which needs a newer glibc than Debian 12,
# so the server runs inside a debootstrap chroot kept in $SLUICE_SANDBOX_ROOT.
# Every step is idempotent: run "up" as often as you like. Needs root.
set -euo pipefail

ROOT=${SLUICE_SANDBOX_ROOT:-/var/cache/sluice/sandbox}
CHROOT=$ROOT/sid
# Profiles: "default" is the server of the tests, demo and benchmarks; "alt"
# is a second mysqld from the same chroot with the settings some scenarios
# need and a production server may have: lower_case_table_names=1, a non-UTC
# time zone and compressed binlog transactions.
PROFILE=${SLUICE_SANDBOX_PROFILE:-default}
case "$PROFILE" in
  default)
    PORT=${SLUICE_SANDBOX_PORT:-13307}
    DATADIR=/var/lib/sluice-mysql          # inside the chroot
    RUNDIR=/run/sluice-mysql               # inside the chroot
    CNF=/etc/sluice/my.cnf
    DSN_VAR=SLUICE_TEST_DSN
    EXTRA="" ;;
  alt)
    PORT=${SLUICE_SANDBOX_PORT:-13308}
    DATADIR=/var/lib/sluice-mysql-alt
    RUNDIR=/run/sluice-mysql-alt
    CNF=/etc/sluice/alt.cnf
    DSN_VAR=SLUICE_TEST_ALT_DSN
    BUFFER_POOL=${SLUICE_SANDBOX_BUFFER_POOL:-256M}
    EXTRA="lower_case_table_names=1
default_time_zone='-07:00'
binlog_transaction_compression=ON
innodb_redo_log_capacity=256M" ;;
  *) echo "sandbox: unknown profile $PROFILE (default or alt)" >&2; exit 2 ;;
esac
# The Debian mirror: $SLUICE_DEBIAN_MIRROR, else the first "debian" archive this machine's own
# apt sources name (deb822 .sources files or one-line .list files).
host_mirror() {
  local f
  for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list /etc/apt/sources.list; do
    [ -f "$f" ] || continue
    awk '/^URIs:/ {for (i = 2; i <= NF; i++) print $i} /^deb / {for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; break}}' "$f"
  done | grep -E '/debian/?$' | head -n 1
}
MIRROR=${SLUICE_DEBIAN_MIRROR:-$(host_mirror)}
BUFFER_POOL=${BUFFER_POOL:-${SLUICE_SANDBOX_BUFFER_POOL:-2G}}

log() { echo "sandbox: $*" >&2; }
die() { echo "sandbox: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (it installs packages and a chroot)"

in_chroot() { chroot "$CHROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root "$@"; }

apt_install_host() {
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing host packages: ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

provision() {
  [ -n "$MIRROR" ] || die "no Debian mirror in /etc/apt/sources*; set SLUICE_DEBIAN_MIRROR"
  apt_install_host debootstrap
  if [ ! -x "$CHROOT/usr/sbin/mysqld" ]; then
    log "building the MySQL chroot in $CHROOT (once; about a minute)"
    rm -rf "$CHROOT.partial"
    mkdir -p "$ROOT"
    debootstrap --variant=minbase --include=mysql-server-core,mysql-client \
      sid "$CHROOT.partial" "$MIRROR" >"$ROOT/debootstrap.log" 2>&1 \
      || die "debootstrap failed; see $ROOT/debootstrap.log"
    rm -rf "$CHROOT"
    mv "$CHROOT.partial" "$CHROOT"
  fi
}

mount_proc() {
  mountpoint -q "$CHROOT/proc" || mount -t proc proc "$CHROOT/proc"
  mkdir -p "$CHROOT/dev/shm"
}

write_config() {
  mkdir -p "$CHROOT/etc/sluice"
  cat >"$CHROOT$CNF" <<CNF
[mysqld]
user=root
port=$PORT
bind-address=127.0.0.1
mysqlx=OFF
datadir=$DATADIR
socket=$RUNDIR/mysqld.sock
pid-file=$RUNDIR/mysqld.pid
log-error=$DATADIR/error.log
secure-file-priv=
server-id=1
log-bin=binlog
binlog_format=ROW
binlog_row_image=FULL
gtid_mode=ON
enforce_gtid_consistency=ON
binlog_expire_logs_seconds=86400
innodb_buffer_pool_size=$BUFFER_POOL
innodb_redo_log_capacity=1G
innodb_flush_log_at_trx_commit=1
sync_binlog=1
max_connections=500
skip-name-resolve
$EXTRA
CNF
}

# running: the pid file names a live mysqld (not a zombie, not a reused pid).
running() {
  local pid
  pid=$(cat "$CHROOT$RUNDIR/mysqld.pid" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = mysqld ] || return 1
  [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ]
}

# wait_ready: the server answers within two minutes (crash recovery included).
wait_ready() {
  for _ in $(seq 1 240); do
    mysql_root -e 'SELECT 1' >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  return 1
}

# others: pids of live mysqld processes of this sandbox (running in this chroot).
others() {
  local p root
  root=$(readlink -f "$CHROOT")
  for p in $(pgrep -f "mysqld --defaults-file=$CNF" || true); do
    [ "$(readlink "/proc/$p/root" 2>/dev/null)" = "$root" ] || continue
    [ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" != Z ] && echo "$p"
  done
  return 0
}

mysql_root() { in_chroot mysql --no-defaults -uroot --socket="$RUNDIR/mysqld.sock" "$@"; }

up() {
  provision
  mount_proc
  write_config
  mkdir -p "$CHROOT$RUNDIR"
  if [ ! -d "$CHROOT$DATADIR/mysql" ]; then
    log "initialising the datadir"
    rm -rf "$CHROOT$DATADIR"
    mkdir -p "$CHROOT$DATADIR"
    in_chroot mysqld --defaults-file=$CNF --initialize-insecure --user=root \
      || die "mysqld --initialize failed; see $CHROOT$DATADIR/error.log"
  fi
  if ! running && [ -z "$(others)" ]; then
    log "starting mysqld on 127.0.0.1:$PORT"
    rm -f "$CHROOT$RUNDIR/mysqld.pid"
    chroot "$CHROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin \
      setsid mysqld --defaults-file=$CNF </dev/null >/dev/null 2>&1 &
    sleep 1
  fi
  wait_ready || die "mysqld is not answering; see $CHROOT$DATADIR/error.log"
  # The sandbox's own accounts: root over TCP without a password (sandbox only),
  # and a password account for tests of password handling.
  mysql_root -e "CREATE USER IF NOT EXISTS 'sluice'@'127.0.0.1' IDENTIFIED BY 'sluice-sandbox';
    GRANT ALL ON *.* TO 'sluice'@'127.0.0.1' WITH GRANT OPTION;
    CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
    GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;"
  env_line
}

env_line() {
  echo "export $DSN_VAR='root@tcp(127.0.0.1:$PORT)/'"
}

down() {
  local pids
  pids=$(others)
  if [ -n "$pids" ]; then
    log "stopping mysqld"
    kill $pids 2>/dev/null || true
    for _ in $(seq 1 120); do [ -z "$(others)" ] && break; sleep 0.5; done
  fi
  mountpoint -q "$CHROOT/proc" && umount "$CHROOT/proc" || true
}

# pt_osc runs the peer tool pt-online-schema-change for the benchmark.
pt_osc() {
  provision
  if [ ! -x "$CHROOT/usr/bin/pt-online-schema-change" ]; then
    log "installing percona-toolkit in the chroot (once)"
    cp /etc/resolv.conf "$CHROOT/etc/resolv.conf" 2>/dev/null || true
    local apt="-o Acquire::Check-Valid-Until=false"
    in_chroot env DEBIAN_FRONTEND=noninteractive apt-get $apt update -qq >/dev/null \
      && in_chroot env DEBIAN_FRONTEND=noninteractive apt-get $apt install -y -qq --no-install-recommends percona-toolkit >/dev/null \
      || die "could not install percona-toolkit in the chroot"
  fi
  in_chroot pt-online-schema-change "$@"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  reset) down; rm -rf "$CHROOT$DATADIR"; log "datadir removed" ;;
  status) if running; then echo "running on 127.0.0.1:$PORT"; else echo "stopped"; exit 3; fi ;;
  env) env_line ;;
  mysql) shift; mysql_root "$@" ;;
  pt-osc) shift; pt_osc "$@" ;;
  *) echo "usage: $0 up|down|reset|status|env|mysql [args]|pt-osc [args]" >&2; exit 2 ;;
esac
