#!/usr/bin/env bash
# Ceph radosgw for the S3 backend tests (tests/s3): a real S3 server that the tests start on demand with
# scripts/radosgw.sh (single node, loopback only) and stop at the end of the run. Idempotent.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
if ! command -v radosgw >/dev/null || ! command -v ceph-mon >/dev/null || ! command -v ceph-osd >/dev/null || ! command -v curl >/dev/null; then
  apt-get install -y -qq --no-install-recommends radosgw ceph-mon ceph-osd curl util-linux >/dev/null
fi
# Fail here, with the daemons' logs, rather than in the middle of the tests if the cluster cannot start.
# (acquire/release: a cluster that something else is using is left running.)
rgw="$(dirname "$0")/../../scripts/radosgw.sh"
bash "$rgw" acquire $$ >/dev/null
bash "$rgw" release $$
