#!/usr/bin/env bash
# npm run image [-- --target service]: build the mds image without a container registry.
#
# The Dockerfile needs node:24-bookworm-slim from a registry. This script builds the same image from what a Debian
# machine reaches: a Debian root filesystem made by mmdebstrap (Essential packages plus what Node needs), the Node 24
# binary that npm's `node` package installed into node_modules/, and the same /app as the Dockerfile: for the service,
# compiled dist/ of src/ (which holds no devkube), production node_modules from `npm ci --omit=dev`, package.json,
# bin/mds.js; for the operator, only what `mds operator` loads, taken from that (scripts/image/operator-app.ts).
# It imports the tarball into podman as mds:<version> (mds-service:<version> for --target service) with the
# Dockerfile's ENV, WORKDIR, USER, ENTRYPOINT and OCI labels (version, revision), and writes the tarball, its sha256 and a CycloneDX SBOM beside it.
# docs/image.md tells how to run and verify it. Needs: mmdebstrap and podman (Debian packages), root.
#
# Environment: MDS_IMAGE_OUT (default .image/), MDS_IMAGE_SUITE (default: the host's Debian release),
# MDS_IMAGE_APT_SOURCES (a sources.list file for mmdebstrap; default: mmdebstrap's own Debian mirrors).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

target=operator
if [[ ${1:-} == --target ]]; then target=${2:-}; fi
case $target in
  # The operator leaves out glibc's iconv modules (gconv, 8 MB): Node converts text with its own ICU, and nothing else
  # in the image runs. The service keeps them (pg_dump and pg_restore are C programs that may convert encodings).
  operator) name=mds; packages=libstdc++6,ca-certificates,tzdata; trim=(--dpkgopt='path-exclude=/usr/lib/*/gconv/*') ;;
  service) name=mds-service; packages=libstdc++6,ca-certificates,tzdata,postgresql-client; trim=() ;;
  *) echo "build-image: --target must be operator or service, not \"$target\"" >&2; exit 2 ;;
esac

for tool in mmdebstrap podman dpkg-query; do
  command -v "$tool" >/dev/null || { echo "build-image: $tool is missing: npm run setup -- --image (or apt-get install -y mmdebstrap podman runc)" >&2; exit 1; }
done
if [[ $(id -u) != 0 ]]; then echo "build-image: run as root (mmdebstrap --mode=root and the root-owned /app need it)" >&2; exit 1; fi

# The Node binary: the one npm's `node` package installed (a real ELF executable from node-<os>-<arch>).
node_bin=$repo/node_modules/node/bin/node
node_version=$("$node_bin" --version) || { echo "build-image: $node_bin does not run: npm ci first" >&2; exit 1; }
[[ $node_version == v24.* ]] || { echo "build-image: $node_bin is $node_version, not Node 24" >&2; exit 1; }
node_package_json=$(ls "$repo"/node_modules/node/node_modules/node-linux-*/package.json | head -1)
node_package=$("$node_bin" -p "const p = require('$node_package_json'); p.name + '@' + p.version")
version=$("$node_bin" -p "require('./package.json').version")
suite=${MDS_IMAGE_SUITE:-$(. /etc/os-release && echo "$VERSION_CODENAME")}
# File times inside the image: the last commit's, so two builds of one commit differ only where Debian's did.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}

out=${MDS_IMAGE_OUT:-$repo/.image}
mkdir -p "$out"
step() { echo "build-image: $*" >&2; }

# 1. /app, exactly as the Dockerfile's build and prod-deps stages make it (test/image/image-run.test.ts compares).
app=$out/app
step "compiling dist/ and installing production dependencies into $app"
rm -rf "$app" && mkdir -p "$app/bin"
"$node_bin" node_modules/typescript/bin/tsc -p tsconfig.build.json --outDir "$app/dist"
"$node_bin" scripts/bundle-operator.ts "$app/dist"
# The commit the operator reports (src/operator/build-info.ts); "unknown" outside a git checkout.
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
echo "$commit" > "$app/dist/build-commit"
(cd src && find . -type f ! -name '*.ts' -exec cp --parents {} "$app/dist/" \;)
cp package.json package-lock.json "$app/"
(cd "$app" && PATH="$(dirname "$node_bin"):$PATH" npm ci --omit=dev --no-audit --no-fund --ignore-scripts --prefer-offline --loglevel=error)
rm "$app/package-lock.json"
cp deploy/image/mds.js "$app/bin/mds.js"
if [[ $target == operator ]]; then
  # The Dockerfile's operator-app stage: what `mds operator` loads, nothing else.
  rm -rf "$out/operator-app"
  "$node_bin" scripts/image/operator-app.ts "$app" "$out/operator-app"
  app=$out/operator-app
fi

# 2. The Debian base, a directory cached by its package list and suite (mmdebstrap takes a minute or two).
base=$out/base-$suite-merged-usr-$target-$(echo "$packages" | tr ',' '-')
if [[ ! -d $base ]]; then
  step "building the Debian $suite base with mmdebstrap ($packages)"
  sources=()
  if [[ -n ${MDS_IMAGE_APT_SOURCES:-} ]]; then sources=("$MDS_IMAGE_APT_SOURCES"); fi
  # Essential: a shell, coreutils and dpkg's database (the SBOM reads it) but no apt. Documentation left out but
  # the copyright files kept (licences). The merged-usr hook lays /usr out merged with the tiny usr-is-merged
  # package, where mmdebstrap's default installs usrmerge, which pulls in Perl: 50 MB the image never runs.
  mmdebstrap --mode=root --format=directory --variant=essential --include="$packages" \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' "${trim[@]}" \
    "$suite" "$base.partial" "${sources[@]}" >&2
  mv "$base.partial" "$base"
fi

# 3. The root filesystem: base + node + /app, everything owned by root and readable (not writable) by uid 65532.
rootfs=$out/$target/rootfs
step "assembling $rootfs"
rm -rf "$rootfs" && mkdir -p "$(dirname "$rootfs")"
cp -a "$base" "$rootfs"
# No setuid or setgid file (Debian's su, newgrp, unix_chkpwd): nothing in the image can gain privileges, even where
# a cluster forgets allowPrivilegeEscalation: false.
find "$rootfs" -xdev -type f -perm /6000 -exec chmod ug-s {} +
install -o 0 -g 0 -m 0755 "$node_bin" "$rootfs/usr/local/bin/node"
# Where that binary came from, for the SBOM's purl (scripts/image/sbom.ts reads it).
mkdir -p "$rootfs/usr/local/share" && echo "$node_package" > "$rootfs/usr/local/share/node-origin"
cp -a "$app" "$rootfs/app"
chown -R 0:0 "$rootfs/app"
chmod -R u=rwX,go=rX "$rootfs/app"

# 4. The tarball and its import. ENV, WORKDIR, USER and ENTRYPOINT as the Dockerfile's runtime stages set them.
tarball=$out/$name-$version.tar
step "writing $tarball"
tar --sort=name --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" --clamp-mtime \
  --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime -C "$rootfs" -cf "$tarball" .
(cd "$out" && sha256sum "$(basename "$tarball")" > "$(basename "$tarball").sha256")
step "importing $name:$version into podman"
podman import --quiet \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV NODE_ENV=production' \
  --change 'ENV MALLOC_ARENA_MAX=2' --change 'ENV MALLOC_TRIM_THRESHOLD_=131072' --change 'ENV MALLOC_MMAP_THRESHOLD_=32768' \
  --change 'WORKDIR /app' \
  --change 'USER 65532:65532' \
  --change 'EXPOSE 8080' \
  --change 'LABEL org.opencontainers.image.title=mds' \
  --change "LABEL org.opencontainers.image.version=$version" \
  --change "LABEL org.opencontainers.image.revision=$commit" \
  --change 'LABEL org.opencontainers.image.licenses=Apache-2.0' \
  --change "ENTRYPOINT [\"node\", \"/app/bin/mds.js\", \"$target\"]" \
  "$tarball" "$name:$version" > "$out/$name-$version.image-id"

# 5. The SBOM, read from the root filesystem as `npm run sbom` reads any image's: every npm package in it (and those
#    the operator bundle inlined), every Debian package of its dpkg database, the Node binary.
sbom=$out/$name-$version.cdx.json
step "writing $sbom"
npm sbom --sbom-format cyclonedx --package-lock-only > "$out/npm-sbom.json"
"$node_bin" scripts/image/sbom.ts --rootfs "$rootfs" --npm-sbom "$out/npm-sbom.json" --image "$name@$version" --out "$sbom"

echo "$name:$version $(cat "$out/$name-$version.image-id")"
echo "tarball: $tarball ($(cut -d' ' -f1 "$tarball.sha256"))"
echo "sbom: $sbom"
echo "size: $(du -sb "$rootfs" | cut -f1) bytes uncompressed ($(du -sm "$rootfs" | cut -f1) MB; /app $(du -sm "$rootfs/app" | cut -f1) MB)"
