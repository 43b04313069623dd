#!/usr/bin/env bash
# Installs a headless Chromium (Debian's chromium-headless-shell), once, and
# prints its path: the report test opens a benchmark report in it.
set -euo pipefail
log() { echo "browser: $*" >&2; }
if ! command -v chromium-headless-shell >/dev/null 2>&1; then
  [ "$(id -u)" = 0 ] || { log "chromium-headless-shell is missing and installing it needs root"; exit 1; }
  log "installing chromium-headless-shell (once)"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium-headless-shell >/dev/null
fi
command -v chromium-headless-shell
