/* Layout shared by the eBPF program (cbt.bpf.c) and the addon (addon.cc). Plain C, no kernel or libc headers. */
#ifndef TIDEMARK_CBT_SHARED_H
#define TIDEMARK_CBT_SHARED_H

#define CBT_MAX_DEVICES 64
/* Words (of 64 blocks) one event may touch before the whole device is flagged as overflowed instead. */
#define CBT_MAX_WORDS_PER_EVENT 65536
#define CBT_INFLIGHT_MAX 16384

/* Per tracked whole-disk device (key: kernel dev_t, MAJOR << 20 | MINOR). */
struct cbt_dev_cfg {
  unsigned int slot;       /* index into the per-device counters */
  unsigned int word_off;   /* first word of this device in the bitmap array */
  unsigned int nwords;     /* words reserved for this device */
  unsigned int shift;      /* log2(sectors per tracked block) */
  unsigned long long nsect;/* device size in 512-byte sectors */
};

/* Per-device counters: CBT_STAT_WORDS u64 each, in the mmapable `stats` array at slot * CBT_STAT_WORDS. */
#define CBT_STAT_WORDS 4
#define CBT_STAT_EVENTS 0    /* data-changing events seen (queue + completion) */
#define CBT_STAT_OVERFLOW 1  /* nonzero: an event could not be recorded precisely; treat the device as all-changed */
#define CBT_STAT_INFLIGHT_LOST 2 /* in-flight table full (only affects bio-based devices) */
#define CBT_STAT_SPARE 3

/* In-flight bio on a bio-based device (device-mapper, md), remembered so completion can mark it again. */
struct cbt_inflight {
  unsigned int devt;
  unsigned int pad;
  unsigned long long first; /* first block */
  unsigned long long last;  /* last block (inclusive) */
};

/* Tracker identity and generation counters, in the mmapable `meta` map (one entry). Userspace only: it lets a
 * pinned tracker be resumed by a later process with the same session and sequence numbers. */
#define CBT_LAYOUT_VERSION 1
struct cbt_meta {
  unsigned int layout;     /* CBT_LAYOUT_VERSION of the process that created the maps */
  unsigned int stopped;    /* set (under the swap lock) before a pinned tracker is torn down */
  unsigned long long started_ms;
  char session[40];
  unsigned long long seq[CBT_MAX_DEVICES]; /* generations handed out, per device slot */
};

#endif
