#!/usr/bin/env bash
# sandbox.sh: a local MySQL 9.7 server for sluice's tests, demo and benchmarks.
#
#   scripts/sandbox.sh up       install (once, cached) and start the server; print its settings
#   scripts/sandbox.sh down     stop the server (the datadir is kept)
#   scripts/sandbox.sh reset    stop the server and delete its datadir
#   scripts/sandbox.sh status   say whether it runs
#   scripts/sandbox.sh env      print the export line for SLUICE_TEST_DSN
#   SLUICE_SANDBOX_PROFILE=alt scripts/sandbox.sh up   the second server (PROFILE below)
#   SLUICE_SANDBOX_PROFILE=mariadb11 scripts/sandbox.sh up   MariaDB 11.8 (Debian unstable) on 13311
#   SLUICE_SANDBOX_PROFILE=mariadb10 scripts/sandbox.sh up   MariaDB 10.11 (Debian 12) on 13310
#   SLUICE_SANDBOX_BINLOG=off scripts/sandbox.sh up   the default server restarted without its binlog
#   scripts/sandbox.sh replicas up [N]   start N (1 or 2, default 2) replicas of the default
#                               server (starting it first if needed); replicas above N are
#                               stopped; print the export line for SLUICE_TEST_REPLICA_DSNS
#   scripts/sandbox.sh replicas down|reset|status|env   stop them (datadirs kept) / stop
#                               them and delete their datadirs / say how they replicate /
#                               print the export line (the running replicas)
#   scripts/sandbox.sh replicas mysql N [args]   the mysql client on replica N
#   SLUICE_SANDBOX_PROFILE=mariadb11 scripts/sandbox.sh replicas up   a replica of MariaDB 11.8
#                               on 13321 (mariadb10: of 10.11, on 13320); see below
#   scripts/sandbox.sh pt-osc ARGS   run pt-online-schema-change from the chroot
#                               (Percona Toolkit is installed there on first use)
#
# MySQL 9.7 ships in Debian unstable, which needs a newer glibc than Debian 12,
# so the server runs inside a debootstrap chroot kept in $SLUICE_SANDBOX_ROOT.
# MariaDB 11.8, in the same Debian release, cannot share that chroot (its
# packages break MySQL's), so it has its own (sid-mariadb); MariaDB 10.11 is
# Debian 12's, and runs from a Debian 12 chroot (bookworm-mariadb) so that the
# host is left as it is. Each MariaDB profile prints SLUICE_TEST_DSN: the test
# suite runs against whichever server that names.
# Every step is idempotent: run "up" as often as you like. Needs root.
#
# Replicas (replica1 on 127.0.0.1:13317, replica2 on 13318) are more mysqld
# processes from the same chroot, each with its own datadir, socket and cnf
# (/etc/sluice/replicaN.cnf). They replicate from the default server with GTID
# auto-position (SOURCE_AUTO_POSITION=1) as the account sluice_repl@127.0.0.1,
# and report themselves (report_host/report_port) so that SHOW REPLICAS on the
# default server lists them. They have read_only=ON but not super_read_only:
# tests and sluice connect as root, which read_only does not restrict, and
# super_read_only would refuse them (and the sandbox's own set-up) any write.
#
# A replica is provisioned with the clone plugin (CLONE INSTANCE FROM the
# default server), not by replaying the primary's binlog: that history is long
# (benchmarks load and drop million-row tables) and partly purged. A clone
# starts the replica from the primary's current data and GTID state, so every
# database the primary has also exists on the replica (the benchmark's
# "CREATE TABLE sbtest.sbtest1 LIKE sbtest_tpl.sbtest1" replicates); it copies
# the InnoDB data (not the binlogs), under a minute here. The clone plugin is
# installed on the default server for this (INSTALL PLUGIN, no restart).
# "replicas up" re-clones a replica that is not replicating from the default
# server, whose replication threads stopped on an error (for example the
# primary purged binlogs it still needed after a "replicas down"), or that has
# transactions the primary has not (the primary was reset).
set -euo pipefail

ROOT=${SLUICE_SANDBOX_ROOT:-/var/cache/sluice/sandbox}
# Each profile's chroot ($CHROOT), the Debian release it is made from
# ($SUITE) and the packages it holds are set by profile (below).
# The default server's port: the replicas' source.
PRIMARY_PORT=${SLUICE_SANDBOX_PORT:-13307}
PRIMARY_SOCK=/run/sluice-mysql/mysqld.sock   # inside the chroot
# The replication account, created on the default server. A sandbox password,
# only ever sent to a mysql client on its standard input (never in argv).
REPL_USER=sluice_repl
REPL_PASSWORD=sluice-repl-sandbox
# Binlogs are kept two hours (a test run's resumes need minutes of them) in
# 256 MiB files, so that they rotate, and expire, often: the suite and the
# benchmarks write gigabytes of binlog an hour, and a full disk hangs a server.
BINLOG_KEEP_SECONDS=7200

# profile NAME sets the server's settings. Profiles: "default" is the server of
# the tests, demo and benchmarks; "alt" is a second mysqld from the same chroot
# with the settings some scenarios need and a production server may have:
# lower_case_table_names=1, a non-UTC time zone and compressed binlog
# transactions; "replica1" and "replica2" replicate from "default".
profile() {
  NAME=$1
  CHROOT=$ROOT/sid
  SUITE=sid
  PACKAGES=mysql-server-core,mysql-client
  FLAVOR=mysql
  SERVER_ID=1
  BUFFER_POOL=${SLUICE_SANDBOX_BUFFER_POOL:-2G}
  case "$1" in
    default)
      PORT=$PRIMARY_PORT
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
    replica1|replica2)
      local n=${1#replica}
      PORT=$((13316 + n))
      DATADIR=/var/lib/sluice-mysql-$1
      RUNDIR=/run/sluice-mysql-$1
      CNF=/etc/sluice/$1.cnf
      DSN_VAR=SLUICE_TEST_REPLICA_DSNS
      SERVER_ID=$((10 + n))
      BUFFER_POOL=128M
      # A replica is rebuilt by a clone whenever needed: it trades durability
      # on a host crash (trx_commit=2, sync_binlog=0) for less I/O; a mysqld
      # crash loses nothing.
      EXTRA="report_host=127.0.0.1
report_port=$PORT
log_replica_updates=ON
read_only=ON
relay_log=relay-bin
relay_log_recovery=ON
loose-clone_valid_donor_list=127.0.0.1:$PRIMARY_PORT
innodb_redo_log_capacity=64M
innodb_flush_log_at_trx_commit=2
sync_binlog=0
max_connections=200" ;;
    mariadb11|mariadb10|mariadb11-replica1|mariadb10-replica1)
      FLAVOR=mariadb
      EXTRA=""
      if [ "${1%-replica1}" = mariadb11 ]; then
        PORT=${SLUICE_SANDBOX_PORT:-13311}
        CHROOT=$ROOT/sid-mariadb
        SUITE=sid
        PACKAGES=mariadb-server-core,mariadb-client-core
      else
        PORT=${SLUICE_SANDBOX_PORT:-13310}
        CHROOT=$ROOT/bookworm-mariadb
        SUITE=bookworm
        PACKAGES=mariadb-server-core,mariadb-client-core
        # Debian's 10.11 defaults to latin1; 11.8 and MySQL to utf8mb4, which
        # the tests' tables assume.
        EXTRA="character_set_server=utf8mb4
collation_server=utf8mb4_general_ci"
      fi
      DATADIR=/var/lib/sluice-mariadb
      RUNDIR=/run/sluice-mariadb
      CNF=/etc/sluice/mariadb.cnf
      DSN_VAR=SLUICE_TEST_DSN
      BUFFER_POOL=${SLUICE_SANDBOX_BUFFER_POOL:-1G}
      MARIADB_PRIMARY_PORT=$PORT
      if [ "$1" != "${1%-replica1}" ]; then
        # A replica of that server, 10 ports up, from the same chroot.
        PORT=$((PORT + 10))
        DATADIR=/var/lib/sluice-mariadb-replica1
        RUNDIR=/run/sluice-mariadb-replica1
        CNF=/etc/sluice/mariadb-replica1.cnf
        DSN_VAR=SLUICE_TEST_REPLICA_DSNS
        SERVER_ID=21
        BUFFER_POOL=128M
        EXTRA="$EXTRA
report_host=127.0.0.1
report_port=$PORT
log_slave_updates=ON
read_only=ON
relay_log=relay-bin
relay_log_recovery=ON
innodb_flush_log_at_trx_commit=2
sync_binlog=0"
      fi ;;
    *) echo "sandbox: unknown profile $1 (default, alt, mariadb11 or mariadb10)" >&2; exit 2 ;;
  esac
  # SLUICE_SANDBOX_BINLOG=off: the default server without its binlog (make
  # bench-redo); the next plain "up" restarts it with the binlog again.
  if [ "$1" = default ] && [ "${SLUICE_SANDBOX_BINLOG:-on}" = off ]; then
    EXTRA="$EXTRA
disable_log_bin"
  fi
  if [ "$FLAVOR" = mariadb ]; then
    MYSQLD=mariadbd
    CLIENT=mariadb
  else
    MYSQLD=mysqld
    CLIENT=mysql
  fi
}
PROFILE=${SLUICE_SANDBOX_PROFILE:-default}
case "$PROFILE" in
  default|alt|mariadb11|mariadb10) profile "$PROFILE" ;;
  *) echo "sandbox: unknown profile $PROFILE (default, alt, mariadb11 or mariadb10)" >&2; exit 2 ;;
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
  if [ ! -x "$CHROOT/usr/sbin/$MYSQLD" ]; then
    log "building the $FLAVOR chroot in $CHROOT (once; about a minute)"
    rm -rf "$CHROOT.partial"
    mkdir -p "$ROOT"
    debootstrap --variant=minbase --include="$PACKAGES" \
      "$SUITE" "$CHROOT.partial" "$MIRROR" >"$ROOT/debootstrap-${CHROOT##*/}.log" 2>&1 \
      || die "debootstrap failed; see $ROOT/debootstrap-${CHROOT##*/}.log"
    rm -rf "$CHROOT"
    mv "$CHROOT.partial" "$CHROOT"
  fi
}

mount_proc() {
  mountpoint -q "$CHROOT/proc" || mount -t proc proc "$CHROOT/proc"
  mkdir -p "$CHROOT/dev/shm"
}

# tls_material: a sandbox CA, a server certificate it signed (for
# 127.0.0.1, localhost and sluice-sandbox) and a client certificate, made once
# in $TLS_DIR on the host; the server's part is copied into the chroot.
TLS_DIR=$ROOT/tls
tls_material() {
  if [ ! -s "$TLS_DIR/client-key.pem" ]; then
    command -v openssl >/dev/null || apt_install_host openssl
    log "making the sandbox's TLS CA and certificates in $TLS_DIR"
    rm -rf "$TLS_DIR.tmp" && mkdir -p "$TLS_DIR.tmp"
    (
      cd "$TLS_DIR.tmp"
      openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=sluice sandbox CA" -keyout ca-key.pem -out ca.pem
      printf 'subjectAltName=DNS:sluice-sandbox,DNS:localhost,IP:127.0.0.1\n' >server.ext
      printf 'extendedKeyUsage=clientAuth\n' >client.ext
      for who in server client; do
        openssl req -newkey rsa:2048 -nodes -subj "/CN=sluice-$who" -keyout $who-key.pem -out $who.csr
        openssl x509 -req -in $who.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 3650 -extfile $who.ext -out $who-cert.pem
      done
      chmod 600 ./*-key.pem
    ) >"$TLS_DIR.log" 2>&1 || die "could not make the TLS certificates; see $TLS_DIR.log"
    rm -rf "$TLS_DIR" && mv "$TLS_DIR.tmp" "$TLS_DIR"
  fi
  mkdir -p "$CHROOT/etc/sluice/tls"
  cp "$TLS_DIR/ca.pem" "$TLS_DIR/server-cert.pem" "$TLS_DIR/server-key.pem" "$CHROOT/etc/sluice/tls/"
}

# The server's TLS settings (both flavours read them in [mysqld]/[mariadbd]).
TLS_CNF="ssl_ca=/etc/sluice/tls/ca.pem
ssl_cert=/etc/sluice/tls/server-cert.pem
ssl_key=/etc/sluice/tls/server-key.pem"

write_config() {
  mkdir -p "$CHROOT/etc/sluice"
  tls_material
  if [ "$FLAVOR" = mariadb ]; then
    write_mariadb_config
    return
  fi
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
server-id=$SERVER_ID
log-bin=binlog
binlog_format=ROW
binlog_row_image=FULL
gtid_mode=ON
enforce_gtid_consistency=ON
binlog_expire_logs_seconds=$BINLOG_KEEP_SECONDS
max_binlog_size=256M
innodb_buffer_pool_size=$BUFFER_POOL
innodb_redo_log_capacity=1G
innodb_flush_log_at_trx_commit=1
sync_binlog=1
max_connections=500
skip-name-resolve
$TLS_CNF
$EXTRA
CNF
}

# write_mariadb_config: the same durability and binlog as the MySQL server's
# (ROW, FULL images, GTIDs, which MariaDB always writes; gtid_strict_mode makes
# them as strict as MySQL's), with performance_schema on and its metadata-lock
# instrument too (MariaDB's defaults are off for both; sluice reads threads and
# metadata locks there, as on MySQL).
write_mariadb_config() {
  cat >"$CHROOT$CNF" <<CNF
[mariadbd]
user=root
port=$PORT
bind-address=127.0.0.1
datadir=$DATADIR
socket=$RUNDIR/mysqld.sock
pid-file=$RUNDIR/mysqld.pid
log-error=$DATADIR/error.log
secure-file-priv=
server-id=$SERVER_ID
log-bin=binlog
binlog_format=ROW
binlog_row_image=FULL
gtid_strict_mode=ON
binlog_expire_logs_seconds=$BINLOG_KEEP_SECONDS
max_binlog_size=256M
innodb_buffer_pool_size=$BUFFER_POOL
innodb_log_file_size=512M
innodb_flush_log_at_trx_commit=1
sync_binlog=1
max_connections=500
skip-name-resolve
performance_schema=ON
performance-schema-instrument='wait/lock/metadata/sql/mdl=ON'
$TLS_CNF
$EXTRA
CNF
}

# running: the pid file names a live mysqld (not a zombie, not a reused pid).
running() {
  local pid
  pid=$(cat "$CHROOT$RUNDIR/mysqld.pid" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$MYSQLD" ] || return 1
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

# chroot_mysqlds: pids of live mysqld processes running in this chroot, of any profile.
chroot_mysqlds() {
  local p root
  root=$(readlink -f "$CHROOT")
  for p in $(pgrep -x "$MYSQLD" || true); do
    [ "$(readlink "/proc/$p/root" 2>/dev/null)" = "$root" ] || continue
    [ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" != Z ] && echo "$p"
  done
  return 0
}

# others: pids of live mysqld processes of this profile (running in this chroot,
# started with exactly this cnf: /etc/sluice/my.cnf never matches replica1.cnf).
others() {
  local p root
  root=$(readlink -f "$CHROOT")
  for p in $(pgrep -f "^$MYSQLD --defaults-file=${CNF//./\\.}( |\$)" || true); do
    [ "$(readlink "/proc/$p/root" 2>/dev/null)" = "$root" ] || continue
    [ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" != Z ] && echo "$p"
  done
  return 0
}

mysql_root() { in_chroot "$CLIENT" --no-defaults -uroot --socket="$RUNDIR/mysqld.sock" "$@"; }
mysql_primary() { in_chroot mysql --no-defaults -uroot --socket="$PRIMARY_SOCK" "$@"; }

# start_server: the chroot, the cnf and the datadir exist and mysqld answers.
start_server() {
  provision
  mount_proc
  local before
  before=$(cat "$CHROOT$CNF" 2>/dev/null || true)
  write_config
  if running && [ "$before" != "$(cat "$CHROOT$CNF")" ]; then
    log "$NAME: the configuration changed; restarting $MYSQLD"
    stop_server
  fi
  mkdir -p "$CHROOT$RUNDIR"
  if [ ! -d "$CHROOT$DATADIR/mysql" ]; then
    log "$NAME: initialising the datadir"
    rm -rf "$CHROOT$DATADIR"
    mkdir -p "$CHROOT$DATADIR"
    if [ "$FLAVOR" = mariadb ]; then
      # root@localhost without a password (not unix_socket), as MySQL's
      # --initialize-insecure gives.
      in_chroot mariadb-install-db --defaults-file=$CNF --user=root --auth-root-authentication-method=normal --skip-name-resolve --force \
        --skip-test-db >"$CHROOT$DATADIR.install.log" 2>&1 \
        || die "mariadb-install-db failed; see $CHROOT$DATADIR.install.log"
    else
      in_chroot mysqld --defaults-file=$CNF --initialize-insecure --user=root \
        || die "mysqld --initialize failed; see $CHROOT$DATADIR/error.log"
    fi
  fi
  if ! running && [ -z "$(others)" ]; then
    log "$NAME: starting $MYSQLD on 127.0.0.1:$PORT"
    rm -f "$CHROOT$RUNDIR/mysqld.pid"
    chroot "$CHROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin \
      setsid "$MYSQLD" --defaults-file=$CNF </dev/null >/dev/null 2>&1 &
    sleep 1
  fi
  wait_ready || die "$NAME: $MYSQLD is not answering; see $CHROOT$DATADIR/error.log"
  disk_room
}

# disk_room: binlogs older than the servers keep them are purged (a server
# running since before the last test run has not rotated them away), then at
# least 2 GiB must be free where the datadir is: a server whose disk is full
# waits for room in every commit, and a test run would hang rather than fail.
disk_room() {
  mysql_root -e "PURGE BINARY LOGS BEFORE NOW() - INTERVAL $BINLOG_KEEP_SECONDS SECOND" 2>/dev/null || true
  local free_kib
  free_kib=$(df -Pk "$CHROOT$DATADIR" | awk 'NR == 2 {print $4}')
  [ "${free_kib:-0}" -ge $((2 * 1024 * 1024)) ] \
    || die "$NAME: only $((${free_kib:-0} / 1024)) MiB free on the disk of $CHROOT$DATADIR; a server waits for room in every commit, so tests would hang: free at least 2 GiB (scripts/sandbox.sh replicas reset frees the replicas' datadirs)"
}

# accounts: the sandbox's own accounts: root over TCP without a password
# (sandbox only), and a password account for tests of password handling.
# $1 is put first (SET sql_log_bin = 0 on a replica).
accounts() {
  mysql_root -e "${1:-} CREATE USER IF NOT EXISTS 'sluice'@'127.0.0.1' IDENTIFIED BY 'sluice-sandbox';
    GRANT ALL ON *.* TO 'sluice'@'127.0.0.1' WITH GRANT OPTION;
    CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
    GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;"
}

# zones: MySQL's time-zone tables, loaded once from the chroot's zoneinfo,
# so that tests can use named zones (America/New_York's autumn fold). The
# MariaDB chroots ship no loader: their tests with a named zone skip.
zones() {
  [ "$FLAVOR" = mariadb ] && return 0
  [ "$(mysql_root -N -e 'SELECT COUNT(*) FROM mysql.time_zone_name')" = 0 ] || return 0
  log "$NAME: loading the time-zone tables"
  in_chroot mysql_tzinfo_to_sql /usr/share/zoneinfo 2>/dev/null | mysql_root mysql \
    || die "$NAME: loading the time-zone tables failed"
}

up() {
  start_server
  accounts
  zones
  env_line
}

env_line() {
  echo "export $DSN_VAR='root@tcp(127.0.0.1:$PORT)/'"
}

# stop_server: stop this profile's mysqld, and no other.
stop_server() {
  local pids
  pids=$(others)
  if [ -n "$pids" ]; then
    log "$NAME: stopping mysqld"
    kill $pids 2>/dev/null || true
    for _ in $(seq 1 240); do [ -z "$(others)" ] && break; sleep 0.5; done
    [ -z "$(others)" ] || die "$NAME: mysqld did not stop within two minutes"
  fi
}

# unmount_proc: once no mysqld of any profile runs in the chroot.
unmount_proc() {
  [ -z "$(chroot_mysqlds)" ] || return 0
  mountpoint -q "$CHROOT/proc" && umount "$CHROOT/proc" || true
}

down() {
  stop_server
  unmount_proc
}

# --- replicas of the default server ---------------------------------------

# primary_ready: the default server runs, has the clone plugin and the
# replication account (REPLICATION SLAVE to replicate, BACKUP_ADMIN to be
# cloned from).
primary_ready() {
  (profile default; up >/dev/null)
  if [ "$(mysql_primary -N -B -e "SELECT COUNT(*) FROM information_schema.PLUGINS WHERE PLUGIN_NAME = 'clone' AND PLUGIN_STATUS = 'ACTIVE'")" != 1 ]; then
    log "default: installing the clone plugin"
    mysql_primary -e "INSTALL PLUGIN clone SONAME 'mysql_clone.so'"
  fi
  mysql_primary <<SQL
CREATE USER IF NOT EXISTS '$REPL_USER'@'127.0.0.1' IDENTIFIED BY '$REPL_PASSWORD';
GRANT REPLICATION SLAVE, BACKUP_ADMIN ON *.* TO '$REPL_USER'@'127.0.0.1';
SQL
}

# replica_status: SHOW REPLICA STATUS on this replica, one "Field: value" a line;
# field NAME reads one value from it (stdin).
replica_status() { mysql_root --vertical -e 'SHOW REPLICA STATUS'; }
field() { awk -v k="$1" '{n = $0; sub(/^ +/, "", n); sub(/: .*$|:$/, "", n)} n == k {v = $0; sub(/^[^:]*: ?/, "", v); print v; exit}'; }

# replica_healthy: this replica replicates from the default server with GTID
# auto-position, has no transaction the primary has not (its own aside), and
# both replication threads run.
replica_healthy() {
  local conf mine theirs ok
  conf=$(mysql_root -N -B -e "SELECT CONCAT(HOST, ':', PORT, ':', USER, ':', AUTO_POSITION)
    FROM performance_schema.replication_connection_configuration WHERE CHANNEL_NAME = ''")
  if [ "$conf" != "127.0.0.1:$PRIMARY_PORT:$REPL_USER:1" ]; then
    log "$NAME: not replicating from 127.0.0.1:$PRIMARY_PORT"
    return 1
  fi
  # The replica's set is read before the primary's, so a transaction the
  # replica has is already in the primary's set (once it committed there).
  for try in 1 2 3 4 5; do
    mine=$(mysql_root -N -B -e "SELECT REPLACE(GTID_SUBTRACT(@@GLOBAL.gtid_executed,
      CONCAT(@@server_uuid, ':1-9223372036854775806')), '\n', '')")
    theirs=$(mysql_primary -N -B -e "SELECT REPLACE(@@GLOBAL.gtid_executed, '\n', '')")
    ok=$(mysql_root -N -B -e "SELECT GTID_SUBSET('$mine', '$theirs')")
    [ "$ok" = 1 ] && break
    if [ $try = 5 ]; then
      log "$NAME: has transactions the primary has not (was the primary reset?)"
      return 1
    fi
    sleep 1
  done
  mysql_root -e "START REPLICA" 2>/dev/null || { log "$NAME: START REPLICA failed"; return 1; }
  threads_running "SHOW REPLICA STATUS" Replica
}

# threads_running STATEMENT WORD: both replication threads of this replica
# run within 30 s, as STATEMENT (SHOW REPLICA STATUS, or SHOW SLAVE STATUS on
# MariaDB) says in its fields WORD_IO_Running and WORD_SQL_Running.
threads_running() {
  local st io sqlt bad=0
  for _ in $(seq 1 60); do
    st=$(mysql_root --vertical -e "$1")
    io=$(field "$2_IO_Running" <<<"$st")
    sqlt=$(field "$2_SQL_Running" <<<"$st")
    [ "$io" = Yes ] && [ "$sqlt" = Yes ] && return 0
    if [ "$io" = No ] || [ "$sqlt" = No ]; then
      bad=$((bad + 1))
      if [ $bad -ge 6 ]; then
        log "$NAME: replication stopped: IO $io ($(field Last_IO_Error <<<"$st")), SQL $sqlt ($(field Last_SQL_Error <<<"$st"))"
        return 1
      fi
    fi
    sleep 0.5
  done
  log "$NAME: replication threads not running after 30s: IO $io ($(field Last_IO_Error <<<"$st")), SQL $sqlt"
  return 1
}

# replica_clone: replace this replica's data with a clone of the default
# server's, then point it at the default server. A clone in place ends with
# the recipient shutting down (no supervisor restarts it): it is started again.
replica_clone() {
  log "$NAME: cloning the default server (127.0.0.1:$PRIMARY_PORT)"
  if [ "$(mysql_root -N -B -e "SELECT COUNT(*) FROM information_schema.PLUGINS WHERE PLUGIN_NAME = 'clone' AND PLUGIN_STATUS = 'ACTIVE'")" != 1 ]; then
    mysql_root -e "SET sql_log_bin = 0; INSTALL PLUGIN clone SONAME 'mysql_clone.so'"
  fi
  mysql_root -e "STOP REPLICA; RESET REPLICA ALL;
    SET GLOBAL clone_valid_donor_list = '127.0.0.1:$PRIMARY_PORT'" >/dev/null
  local out
  out=$(mysql_root 2>&1 <<SQL
CLONE INSTANCE FROM '$REPL_USER'@'127.0.0.1':$PRIMARY_PORT IDENTIFIED BY '$REPL_PASSWORD';
SQL
) && true
  # 3707: "Restart server failed (mysqld is not managed by supervisor process)":
  # the clone is done and mysqld shuts down.
  case "$out" in
    *3707*) ;;
    "") ;;
    *) die "$NAME: CLONE failed: $out" ;;
  esac
  for _ in $(seq 1 240); do [ -z "$(others)" ] && break; sleep 0.5; done
  [ -z "$(others)" ] || die "$NAME: mysqld did not shut down after the clone"
  start_server
  local state
  state=$(mysql_root -N -B -e "SELECT CONCAT(STATE, ' ', ERROR_NO, ' ', ERROR_MESSAGE) FROM performance_schema.clone_status")
  [ "${state%% *}" = Completed ] || die "$NAME: the clone did not complete: $state"
  mysql_root <<SQL
CHANGE REPLICATION SOURCE TO SOURCE_HOST = '127.0.0.1', SOURCE_PORT = $PRIMARY_PORT,
  SOURCE_USER = '$REPL_USER', SOURCE_PASSWORD = '$REPL_PASSWORD',
  SOURCE_AUTO_POSITION = 1, GET_SOURCE_PUBLIC_KEY = 1,
  SOURCE_CONNECT_RETRY = 2, SOURCE_RETRY_COUNT = 86400;
START REPLICA;
SQL
}

# caught_up SECONDS: this replica has applied every transaction the primary had
# when asked, within SECONDS.
caught_up() {
  local want
  want=$(mysql_primary -N -B -e "SELECT REPLACE(@@GLOBAL.gtid_executed, '\n', '')")
  [ "$(mysql_root -N -B -e "SELECT WAIT_FOR_EXECUTED_GTID_SET('$want', $1)" 2>/dev/null)" = 0 ]
}

replica_up() {
  start_server
  if ! replica_healthy; then
    replica_clone
    replica_healthy || die "$NAME: does not replicate after a fresh clone; see $CHROOT$DATADIR/error.log"
  fi
  # A replica stopped for a while (a reboot) has hours of the primary's binlog
  # to replay; tests would see it lag. A fresh clone is quicker.
  if ! caught_up 60; then
    log "$NAME: still behind the primary after a minute; cloning it afresh"
    replica_clone
    replica_healthy || die "$NAME: does not replicate after a fresh clone; see $CHROOT$DATADIR/error.log"
    caught_up 300 || die "$NAME: not caught up with the primary 5 minutes after a fresh clone"
  fi
  # The clone brought the primary's accounts; made sure of all the same,
  # without a GTID of the replica's own.
  accounts "SET sql_log_bin = 0;"
}

replicas_env() {
  local dsns=() i
  for i in 1 2; do
    profile replica$i
    running && dsns+=("root@tcp(127.0.0.1:$PORT)/")
  done
  echo "export SLUICE_TEST_REPLICA_DSNS='$(IFS=,; echo "${dsns[*]}")'"
}

# --- a replica of a MariaDB server ------------------------------------------
#
# SLUICE_SANDBOX_PROFILE=mariadb11 (or mariadb10) scripts/sandbox.sh replicas
# up|down|reset|status|env: one replica of that server, 10 ports up (13321,
# 13320), a mariadbd from the same chroot. MariaDB has no clone plugin: the
# replica starts empty at the primary's current GTID position
# (MASTER_USE_GTID=slave_pos), so it holds what the primary does from then on:
# every test creates its own database after it started. A replica that does
# not replicate, or is an hour behind, is made afresh the same way.

mariadb_primary() { in_chroot mariadb --no-defaults -uroot --socket=/run/sluice-mariadb/mysqld.sock "$@"; }

mariadb_replica_healthy() {
  local st
  st=$(mysql_root --vertical -e 'SHOW SLAVE STATUS')
  if [ "$(field Master_Port <<<"$st")" != "$MARIADB_PRIMARY_PORT" ] || [ "$(field Using_Gtid <<<"$st")" != Slave_Pos ]; then
    log "$NAME: not replicating from 127.0.0.1:$MARIADB_PRIMARY_PORT"
    return 1
  fi
  mysql_root -e "START SLAVE" 2>/dev/null || { log "$NAME: START SLAVE failed"; return 1; }
  threads_running "SHOW SLAVE STATUS" Slave
}

# mariadb_replica_fresh: an empty datadir, replicating from the primary's
# current GTID position.
mariadb_replica_fresh() {
  log "$NAME: starting afresh at the primary's current GTID position"
  stop_server
  rm -rf "$CHROOT$DATADIR"
  start_server
  accounts "SET sql_log_bin = 0;"
  local pos
  pos=$(mariadb_primary -N -B -e "SELECT @@GLOBAL.gtid_binlog_pos")
  mysql_root <<SQL
STOP SLAVE;
RESET SLAVE ALL;
SET GLOBAL gtid_slave_pos = '$pos';
CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = $MARIADB_PRIMARY_PORT,
  MASTER_USER = '$REPL_USER', MASTER_PASSWORD = '$REPL_PASSWORD',
  MASTER_USE_GTID = slave_pos, MASTER_CONNECT_RETRY = 2;
START SLAVE;
SQL
}

# mariadb_caught_up SECONDS: the replica applied all the primary had when asked.
mariadb_caught_up() {
  local want
  want=$(mariadb_primary -N -B -e "SELECT @@GLOBAL.gtid_binlog_pos")
  [ "$(mysql_root -N -B -e "SELECT MASTER_GTID_WAIT('$want', $1)" 2>/dev/null)" = 0 ]
}

mariadb_replicas() {
  local base=$PROFILE
  case "${1:-}" in
    up)
      [ "${2:-1}" = 1 ] || die "a MariaDB server has one sandbox replica: replicas up 1"
      (profile "$base"; up >/dev/null)
      (profile "$base"; mysql_root <<SQL
CREATE USER IF NOT EXISTS '$REPL_USER'@'127.0.0.1' IDENTIFIED BY '$REPL_PASSWORD';
GRANT REPLICATION SLAVE ON *.* TO '$REPL_USER'@'127.0.0.1';
SQL
)
      profile "$base-replica1"
      start_server
      if ! mariadb_replica_healthy || ! mariadb_caught_up 60; then
        mariadb_replica_fresh
        mariadb_replica_healthy || die "$NAME: does not replicate after a fresh start; see $CHROOT$DATADIR/error.log"
        mariadb_caught_up 60 || die "$NAME: not caught up a minute after a fresh start"
      fi
      accounts "SET sql_log_bin = 0;"
      env_line ;;
    down) profile "$base-replica1"; stop_server ;;
    reset) profile "$base-replica1"; stop_server; rm -rf "$CHROOT$DATADIR"; log "replica datadir removed" ;;
    status)
      profile "$base-replica1"
      if running; then
        local st
        st=$(mysql_root --vertical -e 'SHOW SLAVE STATUS')
        echo "$NAME running on 127.0.0.1:$PORT: IO $(field Slave_IO_Running <<<"$st"), SQL $(field Slave_SQL_Running <<<"$st"), $(field Seconds_Behind_Master <<<"$st")s behind"
      else
        echo "$NAME stopped"
      fi ;;
    env)
      profile "$base-replica1"
      if running; then env_line; else echo "export SLUICE_TEST_REPLICA_DSNS=''"; fi ;;
    mysql) profile "$base-replica1"; shift 2; mysql_root "$@" ;;
    *) echo "usage: SLUICE_SANDBOX_PROFILE=$base $0 replicas up [1]|down|reset|status|env|mysql 1 [args]" >&2; exit 2 ;;
  esac
}

replicas() {
  case "$PROFILE" in
    mariadb11|mariadb10) mariadb_replicas "$@"; return ;;
  esac
  [ "$PROFILE" = default ] || die "replicas are the default server's or a MariaDB one's: unset SLUICE_SANDBOX_PROFILE"
  local i n
  case "${1:-}" in
    up)
      n=${2:-2}
      case "$n" in 1|2) ;; *) die "replicas up N: N is 1 or 2" ;; esac
      primary_ready
      for i in 1 2; do
        profile replica$i
        if [ $i -le $n ]; then replica_up; else stop_server; fi
      done
      replicas_env ;;
    down)
      for i in 1 2; do profile replica$i; stop_server; done
      unmount_proc ;;
    reset)
      for i in 1 2; do profile replica$i; stop_server; rm -rf "$CHROOT$DATADIR"; done
      unmount_proc
      log "replica datadirs removed" ;;
    status)
      for i in 1 2; do
        profile replica$i
        if running; then
          local st
          st=$(replica_status)
          echo "$NAME running on 127.0.0.1:$PORT: IO $(field Replica_IO_Running <<<"$st"), SQL $(field Replica_SQL_Running <<<"$st"), $(field Seconds_Behind_Source <<<"$st")s behind"
        else
          echo "$NAME stopped"
        fi
      done ;;
    env) replicas_env ;;
    mysql)
      case "${2:-}" in 1|2) ;; *) die "replicas mysql N: N is 1 or 2" ;; esac
      profile replica$2; shift 2; mysql_root "$@" ;;
    *) echo "usage: $0 replicas up [1|2]|down|reset|status|env|mysql N [args]" >&2; exit 2 ;;
  esac
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
  tls-dir) provision >/dev/null; tls_material; echo "$TLS_DIR" ;;
  mysql) shift; mysql_root "$@" ;;
  replicas) shift; replicas "$@" ;;
  pt-osc) shift; pt_osc "$@" ;;
  *) echo "usage: $0 up|down|reset|status|env|tls-dir|mysql [args]|replicas up|down|reset|status|env|pt-osc [args]" >&2; exit 2 ;;
esac
