#!/usr/bin/env bash
# The app's end-to-end tests (tests/e2e) drive Debian's Chromium through playwright-core, headless.
# Idempotent: installs only what is missing. Electron's runtime cannot be downloaded on this project's
# machines (scripts/electron-runtime.mjs says so during npm ci), so the Electron e2e test skips itself
# with its reason.
set -euo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
dpkg -s fonts-dejavu-core >/dev/null 2>&1 || need+=(fonts-dejavu-core)
if [ ${#need[@]} -gt 0 ]; then
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
chromium --version
