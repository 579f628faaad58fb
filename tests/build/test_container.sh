#!/usr/bin/env bash
# Builds the Docker image from the repository's Dockerfile and runs `dtrain version` in it. Needs a
# reachable Docker daemon (and network access for the base images): SKIP (77) otherwise, saying
# which. The build takes several minutes (nvcc for sm_80 and sm_90); DTRAIN_CONTAINER_TAG names
# the image (default dtrain:test), which is removed afterwards unless DTRAIN_CONTAINER_KEEP=1.
# Usage: test_container.sh SOURCE_DIR
set -uo pipefail
src=$1
tag=${DTRAIN_CONTAINER_TAG:-dtrain:test}
command -v docker >/dev/null || { echo "SKIP: no docker command (install Docker to build the image)"; exit 77; }
if ! why=$(timeout 20 docker info 2>&1 >/dev/null) || ! timeout 20 docker version --format '{{.Server.Version}}' >/dev/null 2>&1; then
    echo "SKIP: no reachable Docker daemon: $(grep -m1 -iE 'cannot|error|denied' <<<"$why" || echo "docker info failed")"
    exit 77
fi
[ "${DTRAIN_CONTAINER_KEEP:-0}" = 1 ] || trap 'docker image rm -f "$tag" >/dev/null 2>&1' EXIT
echo "building $tag from $src/Dockerfile"
docker build -t "$tag" "$src" || { echo "FAIL: docker build (above)"; exit 1; }
out=$(docker run --rm "$tag" version 2>&1) || { echo "FAIL: dtrain version in the image:"; echo "$out"; exit 1; }
echo "$out"
grep -q "dtrain" <<<"$out" || { echo "FAIL: dtrain version printed no version line"; exit 1; }
user=$(docker run --rm --entrypoint id "$tag" -u)
[ "$user" != 0 ] || { echo "FAIL: the image runs as root"; exit 1; }
echo "ok: the image builds, runs dtrain version, and runs as uid $user"
