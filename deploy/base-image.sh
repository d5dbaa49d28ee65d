#!/bin/sh
# Print the base image to build Horologe's images FROM (the Dockerfiles' `ARG BASE`).
#
# python:3.11-slim when the engine has it or can pull it. Otherwise horologe-base:bookworm,
# made here from Debian packages: `debootstrap` of bookworm with python3-venv, this
# machine's CA bundle copied in (pip inside `docker build` may have to trust a proxy's CA),
# then `docker import`. The debootstrap tarball is cached in $HOROLOGE_DOCKER_CACHE
# (default /tmp/horologe-docker-cache), keyed by suite, packages, mirror and CA bundle, so
# a later run on a fresh engine only imports it. Needs root (debootstrap) and DOCKER_HOST
# set to the engine to use. Progress goes to stderr; the image name alone to stdout.
#
#   BASE=$(deploy/base-image.sh) && docker build --network host --build-arg BASE=$BASE .
set -eu

OFFICIAL=${HOROLOGE_OFFICIAL_BASE:-python:3.11-slim}
LOCAL=horologe-base:bookworm
CACHE=${HOROLOGE_DOCKER_CACHE:-/tmp/horologe-docker-cache}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
PACKAGES=python3-venv,ca-certificates
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt

say() { echo "base-image: $*" >&2; }

if docker image inspect "$OFFICIAL" >/dev/null 2>&1; then
    echo "$OFFICIAL"; exit 0
fi
if docker pull -q "$OFFICIAL" >/dev/null 2>&1; then
    say "pulled $OFFICIAL"; echo "$OFFICIAL"; exit 0
fi
if docker image inspect "$LOCAL" >/dev/null 2>&1; then
    echo "$LOCAL"; exit 0
fi
say "$OFFICIAL cannot be pulled; making $LOCAL from Debian packages"

for tool in debootstrap tar sha256sum; do
    command -v "$tool" >/dev/null || { say "needs $tool (apt-get install debootstrap)"; exit 1; }
done
[ -r "$CA_BUNDLE" ] || { say "no CA bundle at $CA_BUNDLE"; exit 1; }

key=$( { echo "$SUITE $PACKAGES $MIRROR"; cat "$CA_BUNDLE"; } | sha256sum | cut -c1-16)
tarball="$CACHE/$SUITE-$key.tar"
if [ ! -s "$tarball" ]; then
    mkdir -p "$CACHE"
    root=$(mktemp -d "$CACHE/rootfs.XXXXXX")
    trap 'rm -rf "$root" "$tarball.part"' EXIT
    say "debootstrap $SUITE ($PACKAGES) from $MIRROR into $root"
    if ! debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$root" "$MIRROR" >"$root.log" 2>&1; then
        tail -n 20 "$root.log" >&2
        say "debootstrap failed (full log: $root.log)"
        exit 1
    fi
    rm -f "$root.log"
    cp "$CA_BUNDLE" "$root/etc/ssl/certs/ca-certificates.crt"
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    tar -C "$root" -cf "$tarball.part" .
    mv "$tarball.part" "$tarball"
    say "cached $tarball"
fi

cert=/etc/ssl/certs/ca-certificates.crt
docker import \
    --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    --change "ENV LANG=C.UTF-8" \
    --change "ENV PIP_CERT=$cert SSL_CERT_FILE=$cert REQUESTS_CA_BUNDLE=$cert" \
    --change 'CMD ["python3"]' \
    "$tarball" "$LOCAL" >/dev/null
say "imported $LOCAL from $tarball"
echo "$LOCAL"
