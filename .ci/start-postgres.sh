#!/usr/bin/env bash
# Install (if needed) and start a local PostgreSQL server for the leaderboard's store tests, create a role and a
# database for them, and print the SQLAlchemy URL to use as DAYBREAK_TEST_PG_URL on stdout (everything else
# goes to stderr):
#
#   export DAYBREAK_TEST_PG_URL="$(bash .ci/start-postgres.sh)"
#
# Needs root (apt-get, pg_ctlcluster). Idempotent: a second run finds the server up and the role/db there.
# The server listens on 127.0.0.1 only; the role's password is a fixed test value (local CI use only).
set -euo pipefail

ROLE="${DAYBREAK_PG_ROLE:-daybreak}"
PASSWORD="${DAYBREAK_PG_PASSWORD:-daybreak-test}"
DB="${DAYBREAK_PG_DB:-daybreak_test}"

log() { echo "start-postgres: $*" >&2; }

if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
    log "installing postgresql (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq postgresql >&2
fi

VERSION="$(ls /usr/lib/postgresql | sort -V | tail -1)"
CLUSTER=main
if ! pg_lsclusters -h 2>/dev/null | awk '{print $1" "$2}' | grep -qx "$VERSION $CLUSTER"; then
    log "creating cluster $VERSION/$CLUSTER"
    pg_createcluster "$VERSION" "$CLUSTER" >&2
fi
PORT="$(pg_lsclusters -h | awk -v v="$VERSION" -v c="$CLUSTER" '$1==v && $2==c {print $3}')"
STATUS="$(pg_lsclusters -h | awk -v v="$VERSION" -v c="$CLUSTER" '$1==v && $2==c {print $4}')"
if [ "$STATUS" != "online" ]; then
    log "starting cluster $VERSION/$CLUSTER on port $PORT"
    pg_ctlcluster "$VERSION" "$CLUSTER" start >&2
fi

# wait until it accepts connections (at most ~30 s)
for _ in $(seq 1 60); do
    if su postgres -c "pg_isready -q -h 127.0.0.1 -p $PORT" 2>/dev/null; then
        break
    fi
    sleep 0.5
done
su postgres -c "pg_isready -h 127.0.0.1 -p $PORT" >&2

psql_admin() { su postgres -c "psql -v ON_ERROR_STOP=1 -q -p $PORT -d postgres $*" >&2; }

if [ "$(su postgres -c "psql -tA -p $PORT -d postgres -c \"SELECT 1 FROM pg_roles WHERE rolname = '$ROLE'\"")" != "1" ]; then
    log "creating role $ROLE"
    psql_admin "-c \"CREATE ROLE $ROLE LOGIN PASSWORD '$PASSWORD'\""
else
    psql_admin "-c \"ALTER ROLE $ROLE LOGIN PASSWORD '$PASSWORD'\""
fi
if [ "$(su postgres -c "psql -tA -p $PORT -d postgres -c \"SELECT 1 FROM pg_database WHERE datname = '$DB'\"")" != "1" ]; then
    log "creating database $DB"
    psql_admin "-c \"CREATE DATABASE $DB OWNER $ROLE\""
fi

echo "postgresql+psycopg://$ROLE:$PASSWORD@127.0.0.1:$PORT/$DB"
