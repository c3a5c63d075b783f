#!/usr/bin/env bash
# The app's end-to-end tests (tests/e2e) drive Debian's Chromium through playwright-core, headless.
# Idempotent: installs only what is missing. Electron's binary is not downloaded
# (ELECTRON_SKIP_BINARY_DOWNLOAD=1), so the Electron e2e test skips itself with its reason.
set -euo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
dpkg -s fonts-dejavu-core >/dev/null 2>&1 || need+=(fonts-dejavu-core)
if [ ${#need[@]} -gt 0 ]; then
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
chromium --version
