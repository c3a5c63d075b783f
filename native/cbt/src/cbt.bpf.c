// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Changed-block tracker: records every data-changing request that reaches the block layer of the tracked
 * disks into a bitmap (one bit per tracked block, per whole disk). Userspace collects a generation by
 * atomically exchanging bitmap words with zero (see addon.cc), so no set bit is ever lost between
 * generations and no RCU grace period is needed.
 *
 * Hooks (BTF tracepoints, no tracefs needed):
 *  - block_bio_queue: every bio entering the block layer (rq-based and bio-based drivers alike). The sector
 *    is relative to the whole disk (partition bios are remapped before this tracepoint), and the disk is
 *    identified by its whole-disk dev_t, so writes through a partition and through the disk node agree.
 *  - block_rq_complete: marks the completed range again, so a write still in flight when userspace swapped
 *    generations (O_DIRECT) lands in the next generation too, after its data is on the device.
 *  - block_bio_complete: the same for bio-based drivers, via a table of in-flight bios.
 * Operations that change data: WRITE, DISCARD, SECURE_ERASE, WRITE_ZEROES. Reads, flushes and zone
 * open/close/finish are ignored. Anything else (zone append/reset, driver passthrough writes) cannot be
 * placed precisely and flags the whole device as overflowed (userspace then reads whole files).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "cbt_shared.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, CBT_MAX_DEVICES);
  __type(key, u32);
  __type(value, struct cbt_dev_cfg);
} devs SEC(".maps");

/* max_entries is set by the loader to the total number of words of all tracked devices. */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE);
  __uint(max_entries, 1);
  __type(key, u32);
  __type(value, u64);
} bitmap SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE);
  __uint(max_entries, CBT_MAX_DEVICES * CBT_STAT_WORDS);
  __type(key, u32);
  __type(value, u64);
} stats SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, CBT_INFLIGHT_MAX);
  __type(key, u64);
  __type(value, struct cbt_inflight);
} inflight SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE);
  __uint(max_entries, 1);
  __type(key, u32);
  __type(value, struct cbt_meta);
} meta SEC(".maps");

enum { OP_IGNORE = 0, OP_CHANGE = 1, OP_UNPLACEABLE = 2 };

static __always_inline int classify(u32 opf) {
  u32 op = opf & 0xff; /* REQ_OP_MASK */
  switch (op) {
  case 0:  /* READ */
  case 2:  /* FLUSH */
  case 11: /* ZONE_OPEN */
  case 13: /* ZONE_CLOSE */
  case 15: /* ZONE_FINISH */
  case 34: /* DRV_IN */
    return OP_IGNORE;
  case 1: /* WRITE */
  case 3: /* DISCARD */
  case 5: /* SECURE_ERASE */
  case 9: /* WRITE_ZEROES */
    return OP_CHANGE;
  default:
    return OP_UNPLACEABLE;
  }
}

static __always_inline void stat_add(u32 slot, u32 which, u64 v) {
  u32 idx = slot * CBT_STAT_WORDS + which;
  u64 *p = bpf_map_lookup_elem(&stats, &idx);
  if (p) __sync_fetch_and_add(p, v);
}

struct mark_ctx {
  u32 base;   /* word_off of the device */
  u32 w0;     /* first word (device relative) */
  u64 first;  /* first block */
  u64 last;   /* last block, inclusive */
};

static long mark_word(u32 i, void *data) {
  struct mark_ctx *c = data;
  u64 w = (u64)c->w0 + i;
  u64 lo = w * 64;
  u64 a = c->first > lo ? c->first - lo : 0;
  u64 b = c->last < lo + 63 ? c->last - lo : 63;
  if (a > 63 || b > 63 || a > b) return 1;
  u64 n = b - a + 1;
  u64 mask = n >= 64 ? ~0ULL : (((1ULL << n) - 1) << a);
  u32 idx = c->base + (u32)w;
  u64 *p = bpf_map_lookup_elem(&bitmap, &idx);
  if (!p) return 1;
  __sync_fetch_and_or(p, mask);
  return 0;
}

/* Marks blocks [first, last] of the device; flags overflow when the range cannot be recorded. */
static __always_inline void mark_blocks(struct cbt_dev_cfg *cfg, u64 first, u64 last) {
  u64 nblocks = (u64)cfg->nwords * 64;
  if (first >= nblocks) {
    stat_add(cfg->slot, CBT_STAT_OVERFLOW, 1);
    return;
  }
  if (last >= nblocks) last = nblocks - 1;
  u64 w0 = first / 64, w1 = last / 64;
  u64 nw = w1 - w0 + 1;
  if (nw > CBT_MAX_WORDS_PER_EVENT) {
    stat_add(cfg->slot, CBT_STAT_OVERFLOW, 1);
    return;
  }
  struct mark_ctx c = {.base = cfg->word_off, .w0 = (u32)w0, .first = first, .last = last};
  if (nw <= 2) {
    /* fast path: most requests (up to 256 KiB at 4 KiB blocks) touch one or two words */
    if (mark_word(0, &c) != 0 || (nw == 2 && mark_word(1, &c) != 0)) stat_add(cfg->slot, CBT_STAT_OVERFLOW, 1);
  } else {
    long done = bpf_loop((u32)nw, mark_word, &c, 0);
    if (done != (long)nw) stat_add(cfg->slot, CBT_STAT_OVERFLOW, 1);
  }
  stat_add(cfg->slot, CBT_STAT_EVENTS, 1);
}

/* Marks the sector range on a disk; returns the device config if the disk is tracked. */
static __always_inline struct cbt_dev_cfg *mark_sectors(u32 devt, u32 opf, u64 sector, u64 bytes, u64 *first,
                                                        u64 *last) {
  struct cbt_dev_cfg *cfg = bpf_map_lookup_elem(&devs, &devt);
  if (!cfg) return 0;
  int kind = classify(opf);
  if (kind == OP_IGNORE) return 0;
  if (kind == OP_UNPLACEABLE) {
    stat_add(cfg->slot, CBT_STAT_OVERFLOW, 1);
    return 0;
  }
  if (bytes == 0) return 0;
  u64 end = sector + ((bytes + 511) >> 9) - 1; /* inclusive */
  u32 shift = cfg->shift & 31;
  *first = sector >> shift;
  *last = end >> shift;
  mark_blocks(cfg, *first, *last);
  return cfg;
}

SEC("tp_btf/block_bio_queue")
int BPF_PROG(cbt_bio_queue, struct bio *bio) {
  struct block_device *bdev = bio->bi_bdev;
  if (!bdev) return 0;
  struct gendisk *disk = bdev->bd_disk;
  if (!disk) return 0;
  struct block_device *whole = disk->part0;
  if (!whole) return 0;
  u32 devt = whole->bd_dev;
  u64 sector = bio->bi_iter.bi_sector;
  /* bio_queue fires after submit_bio_noacct() remapped a partition bio to whole-disk sectors (true since
   * the tracepoint exists; verified by tests/cbt on a partitioned loop device). */
  u64 first = 0, last = 0;
  struct cbt_dev_cfg *cfg = mark_sectors(devt, bio->bi_opf, sector, bio->bi_iter.bi_size, &first, &last);
  if (!cfg) return 0;
  struct request_queue *q = disk->queue;
  if (q && !q->mq_ops) {
    /* bio-based driver: remember the range so completion can mark it again (rq-based drivers use
     * block_rq_complete instead). */
    u64 key = (u64)bio;
    struct cbt_inflight v = {.devt = devt, .first = first, .last = last};
    if (bpf_map_update_elem(&inflight, &key, &v, BPF_ANY) != 0) stat_add(cfg->slot, CBT_STAT_INFLIGHT_LOST, 1);
  }
  return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(cbt_rq_complete, struct request *rq, blk_status_t error, unsigned int nr_bytes) {
  struct request_queue *q = rq->q;
  if (!q) return 0;
  struct gendisk *disk = q->disk;
  if (!disk) return 0;
  struct block_device *whole = disk->part0;
  if (!whole) return 0;
  u64 first = 0, last = 0;
  mark_sectors(whole->bd_dev, rq->cmd_flags, rq->__sector, nr_bytes, &first, &last);
  return 0;
}

SEC("tp_btf/block_bio_complete")
int BPF_PROG(cbt_bio_complete, struct request_queue *q, struct bio *bio) {
  u64 key = (u64)bio;
  struct cbt_inflight *v = bpf_map_lookup_elem(&inflight, &key);
  if (!v) return 0;
  u32 devt = v->devt;
  struct cbt_dev_cfg *cfg = bpf_map_lookup_elem(&devs, &devt);
  if (cfg) mark_blocks(cfg, v->first, v->last);
  bpf_map_delete_elem(&inflight, &key);
  return 0;
}
