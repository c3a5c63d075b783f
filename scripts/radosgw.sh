#!/usr/bin/env bash
# A throwaway single-node Ceph cluster with an S3 gateway on 127.0.0.1, for tests and benchmarks.
#
#   scripts/radosgw.sh start    # bring it up (idempotent), print the env file path
#   scripts/radosgw.sh stop     # stop every daemon this script started and delete its data
#   scripts/radosgw.sh status   # exit 0 when the gateway answers
#   scripts/radosgw.sh env      # print the connection settings (shell syntax)
#   scripts/radosgw.sh acquire PID / release PID
#                               # shared use by test runs: acquire starts it if needed and records PID
#                               # as a user; release forgets PID and stops the cluster when no live user
#                               # is left — only if acquire started it (a cluster started by hand stays)
#
# One monitor, one bluestore OSD on a sparse file, one radosgw with the beast frontend, all on
# loopback, with cephx keys generated per run; S3 requests are signed with keys made by
# `radosgw-admin user create`. Every wait is bounded, so a broken install fails in seconds with the
# relevant log tail instead of hanging a CI run.
#
# Settings (environment): TIDEMARK_RGW_DIR (default /tmp/tidemark-radosgw), TIDEMARK_RGW_PORT (7480),
# TIDEMARK_RGW_MON_PORT (6789). Needs: apt-get install radosgw ceph-mon ceph-osd (see .ci/setup.d/40-radosgw.sh).
set -euo pipefail

DIR="${TIDEMARK_RGW_DIR:-/tmp/tidemark-radosgw}"
PORT="${TIDEMARK_RGW_PORT:-7480}"
MON_PORT="${TIDEMARK_RGW_MON_PORT:-6789}"
CONF="$DIR/ceph.conf"
ENV_FILE="$DIR/env"
ACCESS_KEY="TIDEMARKTESTKEY00001"
SECRET_KEY="tidemark-test-secret-key-0000000000000001"
# A second user that owns nothing: tests grant it partial rights with bucket policies.
LIMITED_ACCESS_KEY="TIDEMARKLIMITED00001"
LIMITED_SECRET_KEY="tidemark-limited-secret-key-00000000001"
CEPH=(ceph -c "$CONF" --connect-timeout 10)

log() { echo "radosgw.sh: $*" >&2; }

die() {
  log "$*"
  for f in "$DIR"/log/*.log; do
    [ -e "$f" ] || continue
    echo "----- tail of $f" >&2
    tail -n 25 "$f" >&2 || true
  done
  stop_daemons
  exit 1
}

# wait_for SECONDS DESCRIPTION COMMAND...: polls COMMAND every 0.2 s until it succeeds or time runs out.
wait_for() {
  local limit=$1 what=$2
  shift 2
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then die "timed out after ${limit}s waiting for $what"; fi
    sleep 0.2
  done
}

http_up() { curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$PORT/"; }

pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

stop_daemons() {
  local pidfile pid
  for pidfile in "$DIR"/run/*.pid; do
    [ -e "$pidfile" ] || continue
    pid=$(cat "$pidfile" 2>/dev/null || true)
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  done
  # Give them 10 s to exit cleanly, then force.
  local deadline=$((SECONDS + 10))
  for pidfile in "$DIR"/run/*.pid; do
    [ -e "$pidfile" ] || continue
    pid=$(cat "$pidfile" 2>/dev/null || true)
    [ -n "$pid" ] || continue
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
    if kill -9 "$pid" 2>/dev/null; then
      local gone=$((SECONDS + 5))
      while kill -0 "$pid" 2>/dev/null && ((SECONDS < gone)); do sleep 0.1; done
    fi
  done
}

write_conf() {
  local fsid=$1
  cat >"$CONF" <<CONF
[global]
fsid = $fsid
mon host = v1:127.0.0.1:$MON_PORT
mon initial members = a
public addr = 127.0.0.1
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
mon warn on insecure global id reclaim allowed = false
ms bind ipv6 = false
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon data avail warn = 1
mon data avail crit = 0
paxos propose interval = 0.1
run dir = $DIR/run
admin socket = $DIR/run/\$name.asok
pid file = $DIR/run/\$name.pid
log file = $DIR/log/\$name.log
crash dir = $DIR/crash
log to stderr = false
err to stderr = false
keyring = $DIR/keyring
osd objectstore = bluestore
osd memory target = 939524096
bluestore block create = true
bluestore block size = 21474836480
bluestore fsck on mount = false
osd max object name len = 460
osd max object namespace len = 64

[mon.a]
mon data = $DIR/mon

[osd.0]
osd data = $DIR/osd

[client.rgw]
rgw frontends = beast endpoint=127.0.0.1:$PORT tcp_nodelay=1
rgw dns name = localhost
rgw thread pool size = 64
rgw enable usage log = false
CONF
}

write_env() {
  cat >"$ENV_FILE" <<ENV
TIDEMARK_RGW_ENDPOINT=http://127.0.0.1:$PORT
TIDEMARK_RGW_ACCESS_KEY=$ACCESS_KEY
TIDEMARK_RGW_SECRET_KEY=$SECRET_KEY
TIDEMARK_RGW_REGION=us-east-1
TIDEMARK_RGW_LIMITED_USER=tidemark-limited
TIDEMARK_RGW_LIMITED_ACCESS_KEY=$LIMITED_ACCESS_KEY
TIDEMARK_RGW_LIMITED_SECRET_KEY=$LIMITED_SECRET_KEY
ENV
}

start() {
  command -v radosgw >/dev/null && command -v ceph-mon >/dev/null && command -v ceph-osd >/dev/null ||
    { log "radosgw/ceph-mon/ceph-osd are not installed (apt-get install -y --no-install-recommends radosgw ceph-mon ceph-osd)"; exit 2; }
  if pid_alive "$DIR/run/client.rgw.pid" && http_up && [ -f "$ENV_FILE" ]; then
    log "already running on 127.0.0.1:$PORT"
    echo "$ENV_FILE"
    return 0
  fi
  stop_daemons
  rm -rf "$DIR"
  mkdir -p "$DIR"/{run,log,crash,mon,osd}
  local t0=$SECONDS fsid osd_uuid
  fsid=$(cat /proc/sys/kernel/random/uuid)
  osd_uuid=$(cat /proc/sys/kernel/random/uuid)
  write_conf "$fsid"

  # Keys for every daemon in one keyring, imported into the monitor when it is created. (cephx also
  # makes clients wait for the monitor map before sending commands; with auth off they can race it
  # and get "wrong fsid".)
  local k="$DIR/keyring"
  ceph-authtool --create-keyring "$k" --gen-key -n mon. --cap mon 'allow *' >/dev/null
  ceph-authtool "$k" --gen-key -n client.admin --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' >/dev/null
  ceph-authtool "$k" --gen-key -n osd.0 --cap mon 'allow profile osd' --cap osd 'allow *' --cap mgr 'allow profile osd' >/dev/null
  ceph-authtool "$k" --gen-key -n client.rgw --cap mon 'allow rw' --cap osd 'allow rwx' --cap mgr 'allow rw' >/dev/null

  # Monitor.
  monmaptool --create --fsid "$fsid" --add a "127.0.0.1:$MON_PORT" "$DIR/monmap" >/dev/null
  ceph-mon -c "$CONF" --mkfs -i a --monmap "$DIR/monmap" --keyring "$DIR/keyring" 2>>"$DIR/log/setup.log" || die "ceph-mon --mkfs failed"
  ceph-mon -c "$CONF" -i a 9>&- >/dev/null 2>>"$DIR/log/setup.log" || die "ceph-mon did not start"
  wait_for 20 "the monitor" timeout 5 "${CEPH[@]}" mon stat

  # One bluestore OSD on a sparse file (bluestore block create makes $DIR/osd/block).
  local id
  id=$(timeout 20 "${CEPH[@]}" osd new "$osd_uuid" 2>>"$DIR/log/setup.log") || die "ceph osd new failed"
  [ "$id" = 0 ] || die "unexpected OSD id $id"
  ceph-osd -c "$CONF" -i 0 --mkfs --osd-uuid "$osd_uuid" 2>>"$DIR/log/setup.log" >/dev/null || die "ceph-osd --mkfs failed"
  ceph-osd -c "$CONF" -i 0 9>&- >/dev/null 2>>"$DIR/log/setup.log" || die "ceph-osd did not start"
  wait_for 30 "the OSD to come up" sh -c "timeout 5 ${CEPH[*]} osd dump 2>/dev/null | grep -q '^osd.0 up'"

  # The gateway creates its pools on first start.
  radosgw -c "$CONF" -n client.rgw 9>&- >/dev/null 2>>"$DIR/log/setup.log" || die "radosgw did not start"
  wait_for 60 "radosgw on 127.0.0.1:$PORT" http_up
  timeout 30 radosgw-admin -c "$CONF" user create --uid=tidemark-test --display-name="Tidemark tests" \
    --access-key="$ACCESS_KEY" --secret-key="$SECRET_KEY" >/dev/null 2>>"$DIR/log/setup.log" || die "radosgw-admin user create failed"
  timeout 30 radosgw-admin -c "$CONF" user create --uid=tidemark-limited --display-name="Tidemark tests (limited)" \
    --access-key="$LIMITED_ACCESS_KEY" --secret-key="$LIMITED_SECRET_KEY" >/dev/null 2>>"$DIR/log/setup.log" || die "radosgw-admin user create (limited) failed"
  write_env
  log "up on 127.0.0.1:$PORT in $((SECONDS - t0))s"
  echo "$ENV_FILE"
}

stop() {
  stop_daemons
  rm -rf "$DIR"
  log "stopped"
}

USERS="$DIR.users"
MARKER="$DIR.started-by-acquire"

acquire() {
  local pid=$1 out
  mkdir -p "$USERS"
  echo "$pid" >"$USERS/$pid"
  out=$(start 2>&1) || {
    rm -f "$USERS/$pid"
    echo "$out" >&2
    exit 1
  }
  case "$out" in *"already running"*) ;; *) touch "$MARKER" ;; esac
  echo "$ENV_FILE"
}

release() {
  local pid=$1 f
  rm -f "$USERS/$pid"
  for f in "$USERS"/*; do
    [ -e "$f" ] || continue
    if kill -0 "$(basename "$f")" 2>/dev/null; then return 0; fi # someone still uses it
    rm -f "$f"
  done
  if [ -e "$MARKER" ]; then
    stop
    rm -f "$MARKER"
  fi
}

# Every command that changes state runs under one lock, so test runs starting and finishing at the
# same time never stop a cluster another run has just decided to use. The daemons are started with
# fd 9 closed so they do not inherit the lock.
with_lock() {
  mkdir -p "$(dirname "$DIR")"
  exec 9>"$DIR.lock"
  flock -w 180 9 || { log "another radosgw.sh holds $DIR.lock"; exit 1; }
  "$@"
}

case "${1:-}" in
  start) with_lock start ;;
  stop) with_lock stop ;;
  acquire) with_lock acquire "${2:?usage: acquire PID}" ;;
  release) with_lock release "${2:?usage: release PID}" ;;
  status) pid_alive "$DIR/run/client.rgw.pid" && http_up ;;
  env) cat "$ENV_FILE" ;;
  *)
    echo "usage: $0 start|stop|status|env|acquire PID|release PID" >&2
    exit 64
    ;;
esac
