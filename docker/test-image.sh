#!/usr/bin/env bash
# Build and run the real streamtree image, learn, restart the container on the same volume
# (gracefully, then with SIGKILL) and check the model survived, prediction for prediction;
# then run compose's topology with the image (a writer and two replicas on PostgreSQL behind
# HAProxy, the writer killed: docker/test-cluster.py).
#
# Self-contained for a clean machine (CI): installs docker.io and debootstrap with apt if
# missing, builds a stand-in for python:3.11-slim-bookworm with debootstrap (no registry can
# be reached here; docs/operations/docker.md has the recipe) and caches its tarball under
# $STREAMTREE_CACHE (default /var/cache/streamtree), starts a private dockerd, and stops and
# removes everything it started on exit. Network: loopback only (--network host, 127.0.0.1).
# Needs root, the PostgreSQL server binaries and haproxy (.ci/run installs both).
set -euo pipefail
# (output is matched with grep on a captured string, never `cmd | grep -q`: under pipefail,
# grep -q leaving at its first match makes the writer's SIGPIPE the pipeline's failure)

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${STREAMTREE_CACHE:-/var/cache/streamtree}
TARBALL=$CACHE/python-3.11-slim-bookworm.tar.gz
BASE=python:3.11-slim-bookworm
IMAGE=streamtree:test
PORT=${STREAMTREE_TEST_PORT:-18765}
URL=http://127.0.0.1:$PORT
WORK=$(mktemp -d /tmp/streamtree-docker.XXXXXX)
NAME=streamtree-image-test-$$
VOLUME=$NAME-data
DOCKERD_PID=

log() { echo "[test-image $(date -u +%T)] $*"; }
fail() { log "FAIL: $*"; exit 1; }

cleanup() {
    local status=$?
    set +e
    if [ -n "$DOCKERD_PID" ]; then
        if [ $status -ne 0 ]; then
            log "container logs:"; docker logs "$NAME" 2>&1 | tail -40
        fi
        docker rm -f "$NAME" >/dev/null 2>&1
        docker volume rm -f "$VOLUME" >/dev/null 2>&1
        kill "$DOCKERD_PID" 2>/dev/null
        wait "$DOCKERD_PID" 2>/dev/null
    fi
    # Unmount whatever the private engine left mounted (netns, overlays), deepest first.
    { grep -o " $WORK[^ ]*" /proc/mounts || true; } | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
    rm -rf "$WORK"
    [ $status -eq 0 ] && log "PASS" || log "exit status $status"
}
trap cleanup EXIT

[ "$(id -u)" -eq 0 ] || fail "needs root (apt-get, debootstrap, dockerd)"

# 1. Tools.
if [ ! -x /usr/sbin/dockerd ] || [ ! -x /usr/bin/docker ] || ! command -v debootstrap >/dev/null; then
    log "installing docker.io and debootstrap"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker.io debootstrap >/dev/null
fi
# The engine's own client (the version it speaks), not whatever else is on PATH.
docker() { /usr/bin/docker "$@"; }

# 2. Base image stand-in, cached outside the work tree.
if [ ! -s "$TARBALL" ]; then
    log "building the base image with debootstrap (a few minutes; cached in $CACHE)"
    mkdir -p "$CACHE"
    MIRROR=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
    MIRROR=${MIRROR:-http://deb.debian.org/debian}
    ROOTFS=$WORK/rootfs
    debootstrap --variant=minbase --include=python3,python3-pip,python3-venv,ca-certificates \
        bookworm "$ROOTFS" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 \
        || { tail -20 "$WORK/debootstrap.log"; fail "debootstrap"; }
    # Package downloads go through a TLS-intercepting proxy that the host trusts.
    cp /usr/local/share/ca-certificates/*.crt "$ROOTFS/usr/local/share/ca-certificates/" 2>/dev/null || true
    chroot "$ROOTFS" update-ca-certificates >/dev/null
    rm -f "$ROOTFS"/usr/lib/python3.*/EXTERNALLY-MANAGED
    ln -sf /usr/bin/python3 "$ROOTFS/usr/local/bin/python"
    ln -sf /usr/bin/python3 "$ROOTFS/usr/local/bin/python3"
    ln -sf /usr/bin/pip3 "$ROOTFS/usr/local/bin/pip"
    rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/cache/apt/archives/*.deb
    { grep -o " $ROOTFS[^ ]*" /proc/mounts || true; } | sort -r | while read -r m; do umount -l "$m"; done
    tar --numeric-owner -czf "$TARBALL.partial" -C "$ROOTFS" .
    mv "$TARBALL.partial" "$TARBALL"
    rm -rf "$ROOTFS"
fi

# 3. A private engine.
cat >"$WORK/daemon.json" <<JSON
{"data-root": "$WORK/data-root", "exec-root": "$WORK/exec", "pidfile": "$WORK/docker.pid",
 "hosts": ["unix://$WORK/docker.sock"], "storage-driver": "overlay2", "bridge": "none",
 "iptables": false, "ip6tables": false}
JSON
/usr/sbin/dockerd --config-file "$WORK/daemon.json" >"$WORK/dockerd.log" 2>&1 &
DOCKERD_PID=$!
export DOCKER_HOST=unix://$WORK/docker.sock
for _ in $(seq 100); do docker version >/dev/null 2>&1 && break; sleep 0.2; done
docker version >/dev/null 2>&1 || { tail -20 "$WORK/dockerd.log"; fail "dockerd did not start"; }
log "engine up ($(docker version --format '{{.Server.Version}}'))"

# 4. Base image and build.
docker import -c 'ENV LANG=C.UTF-8' \
    -c 'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin' "$TARBALL" "$BASE" >/dev/null
log "building $IMAGE"
docker build --network=host -t "$IMAGE" -f "$ROOT/docker/Dockerfile" "$ROOT" >"$WORK/build.log" 2>&1 \
    || { tail -30 "$WORK/build.log"; fail "docker build"; }
[ "$(docker image inspect --format '{{.Config.User}}' "$IMAGE")" = 10001:10001 ] || fail "image does not run as the non-root user"
grep -q /health <<<"$(docker image inspect --format '{{json .Config.Healthcheck}}' "$IMAGE")" || fail "no HEALTHCHECK on /health"

# 5. Run, learn, restart, compare.
wait_healthy() {  # up to 180 s; says how long it took, and shows the health log if it never came
    local start=$SECONDS
    while [ $((SECONDS - start)) -lt 180 ]; do
        if [ "$(docker inspect --format '{{.State.Health.Status}}' "$NAME")" = healthy ]; then
            log "healthy after $((SECONDS - start)) s"
            return 0
        fi
        [ "$(docker inspect --format '{{.State.Running}}' "$NAME")" = true ] || fail "container stopped"
        sleep 0.5
    done
    docker inspect --format '{{json .State.Health}}' "$NAME" | head -c 2000; echo
    fail "container not healthy (HEALTHCHECK) after 180 s"
}
state() {  # seq, summary and predictions of the default model, as one JSON line
    python3 - "$URL" <<'PY'
import json, random, sys, urllib.request
url = sys.argv[1]
def call(path, body=None):
    req = urllib.request.Request(url + path, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)
rng = random.Random(7)
probes = [{"a": rng.gauss(0, 1), "b": rng.choice(["x", "y", "z"])} for _ in range(25)]
model = call("/models/default")
model["summary"].pop("memory_bytes", None)  # an estimate that depends on internal buffers, not the model
print(json.dumps({"seq": model["seq"], "summary": model["summary"],
                  "batch": call("/predict_proba", {"instances": probes})["probabilities"],
                  "single": [call("/predict_proba", {"features": p})["probabilities"] for p in probes]},
                 sort_keys=True))
PY
}
learn() {  # learn $1 events of stream seed $2
    python3 - "$URL" "$1" "$2" <<'PY'
import json, random, sys, urllib.request
url, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
events = []
for _ in range(n):
    x = {"a": rng.gauss(0, 1), "b": rng.choice(["x", "y", "z"])}
    events.append({"features": x, "label": "hi" if x["a"] + 0.5 * (x["b"] == "x") > 0.2 else "lo"})
for i in range(0, n, 250):
    req = urllib.request.Request(url + "/learn", data=json.dumps({"events": events[i:i + 250]}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.status == 200
PY
}

docker volume create "$VOLUME" >/dev/null
docker run -d --name "$NAME" --network host --health-interval 1s --health-start-period 60s \
    -e STREAMTREE_HOST=127.0.0.1 -e STREAMTREE_PORT="$PORT" -v "$VOLUME:/data" "$IMAGE" >/dev/null
wait_healthy
# warm start: the image's kernel cache served the first start, which compiled (and wrote) nothing
if grep -q kernel-cache <<<"$(docker diff "$NAME")"; then
    docker diff "$NAME" | grep kernel-cache | head -5
    fail "the first container compiled kernels the image should have cached"
fi
[ "$(docker exec "$NAME" id -u)" != 0 ] || fail "process runs as root"
PAGE=$(curl -fsS "$URL/health") && grep -q '"ok"' <<<"$PAGE" || fail "/health"
# the dashboard's page and vendored assets are package data: check the image has them
PAGE=$(curl -fsS "$URL/dashboard") && grep -q 'id="loss-chart"' <<<"$PAGE" || fail "/dashboard"
curl -fsS -o /dev/null "$URL/dashboard/assets/vendor/uplot/uPlot.iife.min.js" || fail "dashboard assets missing from the image"
learn 1500 1
BEFORE=$(state)
grep -q '"seq": 1500' <<<"$BEFORE" || fail "seq after learning: $(echo "$BEFORE" | head -c 200)"
log "learned 1500 events; restarting the container (SIGTERM, snapshot)"
docker restart -t 60 "$NAME" >/dev/null
wait_healthy
AFTER=$(state)
[ "$AFTER" = "$BEFORE" ] || fail "model changed across a graceful restart"
grep -q Traceback <<<"$(docker logs "$NAME" 2>&1)" && fail "traceback in the container log"

learn 700 2
BEFORE=$(state)
log "learned 700 more; killing the container (SIGKILL, no snapshot) and starting it again"
docker kill -s KILL "$NAME" >/dev/null
docker start "$NAME" >/dev/null
wait_healthy
AFTER=$(state)
[ "$AFTER" = "$BEFORE" ] || fail "model changed across SIGKILL + start"
grep -q '"seq": 2200' <<<"$AFTER" || fail "seq after SIGKILL restart"
log "model survived both restarts on the same volume: seq 2200, predictions identical"

# A read-only root filesystem (a tmpfs on /tmp), and another user (OpenShift's random uids):
# numba caches only where it can write, so the image's kernels are used from a private copy
# in /tmp; it recompiled every kernel (minutes, unhealthy), into the data volume.
docker stop -t 60 "$NAME" >/dev/null
docker rm "$NAME" >/dev/null
docker run -d --name "$NAME" --network host --health-interval 1s --health-start-period 60s --read-only \
    --tmpfs /tmp -e STREAMTREE_HOST=127.0.0.1 -e STREAMTREE_PORT="$PORT" -v "$VOLUME:/data" "$IMAGE" >/dev/null
START=$SECONDS
wait_healthy
[ $((SECONDS - START)) -lt 60 ] || fail "a read-only container took $((SECONDS - START)) s to be healthy: kernels compiled"
[ "$(state)" = "$AFTER" ] || fail "model changed in the read-only container"
docker exec "$NAME" test ! -e /data/.cache || fail "kernels compiled into the data volume"
docker rm -f "$NAME" >/dev/null
docker run -d --name "$NAME" --network host --health-interval 1s --health-start-period 60s --user 12345:0 \
    -e STREAMTREE_DATA_DIR=/tmp/data -e STREAMTREE_HOST=127.0.0.1 -e STREAMTREE_PORT="$PORT" "$IMAGE" >/dev/null
START=$SECONDS
wait_healthy
[ $((SECONDS - START)) -lt 60 ] || fail "a container of another uid took $((SECONDS - START)) s to be healthy"
log "read-only root filesystem and another uid: healthy from the image's kernels"

# 6. The compose deployment's topology with this image: a writer and two replicas on one
# PostgreSQL behind docker/haproxy.cfg, learns through the balancer, the writer killed
# (docker/test-cluster.py; PostgreSQL and HAProxy from the host's packages, as no registry
# can be reached for their images).
PY=$ROOT/.venv/bin/python
[ -x "$PY" ] || make -C "$ROOT" .venv/bin/.installed >/dev/null
"$PY" "$ROOT/docker/test-cluster.py" "$IMAGE" "$NAME-cluster" || fail "compose topology with the image"
