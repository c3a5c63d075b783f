#!/usr/bin/env bash
# Native change tracker (native/): a C++ toolchain for node-gyp, the Node headers it builds against
# (no download: CI has no access to nodejs.org), and mingw-w64 for the Windows-backend build check.
# Idempotent. The fanotify tests need root (CI runs as root); inotify needs enough watches.
set -euo pipefail
need=()
for pkg in g++ make python3 mingw-w64; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
prefix="$(dirname "$(dirname "$(command -v node)")")"
if [ ! -f "$prefix/include/node/node_api.h" ]; then
  echo "WARNING: Node headers not found under $prefix/include/node; node-gyp will try to download them" >&2
fi
# Plenty of inotify watches for the unprivileged backend's tests (a no-op when already higher).
cur="$(cat /proc/sys/fs/inotify/max_user_watches 2>/dev/null || echo 0)"
if [ "$cur" -lt 65536 ] && [ -w /proc/sys/fs/inotify/max_user_watches ]; then
  echo 65536 >/proc/sys/fs/inotify/max_user_watches || true
fi
echo "native tracker toolchain ready ($(g++ --version | head -1); $(x86_64-w64-mingw32-g++-posix --version | head -1))"
