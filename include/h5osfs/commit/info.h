/*
 * info: the domain summary db/A-B/.info.json (spec §3.7), written after each commit exactly as
 * HSDS's scanner writes it (async_lib.scanRoot, scanRootCallback, updateDatasetInfo, then
 * json.dumps), so that hsstat and HSDS's verbose domain GET show real counts and sizes for
 * domains h5osfs wrote.
 *
 * What HSDS's scan sees, and so what the summary is made of: one listing of the root's keys,
 * each with its size, its mtime and its ETag as HSDS's storage driver gives them. The POSIX
 * driver: mtime is Python's float st_mtime, the ETag the MD5 hex of the object's bytes, the
 * order of datasets the directory order os.walk finds. The S3 driver: mtime is whole seconds
 * (int), the ETag the listing's, quotes included, datasets in key order. The summary is
 * optional for every reader, so a summary that cannot be made is never an error of the commit.
 */
#ifndef H5OSFS_INFO_H
#define H5OSFS_INFO_H

#include <stdatomic.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "h5osfs/store/store.h"

#define INFO_ETAG_BUF 72

/* One key below db/A-B/ as HSDS's listing shows it. */
struct info_object {
    char *key;
    uint64_t size;
    double mtime;             /* seconds since the epoch */
    char etag[INFO_ETAG_BUF]; /* HSDS's ETag for it; "" when it has none */
    json_t *doc;              /* a .dataset.json's content (for logical and linked bytes) */
    unsigned char *bytes;     /* a chunk table's chunk: its stored bytes (else NULL) */
    size_t len;
};

struct info_scan {
    const char *bucket; /* HSDS's bucket name (the "bucket" member) */
    int whole_seconds;  /* mtimes are ints (HSDS's S3 driver), else floats */
    double scan_start, scan_complete;
    const struct info_object *objects; /* in the order of HSDS's listing */
    size_t n;
};

/* The text HSDS would write for scan (no newline at the end). The linked chunks of a
 * H5D_CHUNKED_REF_INDIRECT dataset are counted from its chunk table's chunks, whose bytes
 * must be given. 0, -ENOMEM, -EINVAL (a bucket name that is not UTF-8, a chunk table that
 * cannot be decoded), -ENOENT (chunks without their dataset's JSON, a chunk table without its
 * JSON, a table chunk without its bytes: HSDS's scan stops there too), -EOVERFLOW (sizes
 * beyond 64 bits, which Python's integers would hold). */
int info_text(const struct info_scan *scan, char **out);

/* HSDS's object id for a key below db/ (idUtil.getObjId): 0 with the id in out, -EINVAL for a
 * key HSDS's scan ignores (.info.json, linked files, anything else). */
int info_object_id(const char *key, char *out, size_t len);

/* After a commit: list v2 root's keys, make the summary and put it at db/A-B/.info.json. A v1
 * root has none (HSDS tabulates none). Never fails: what goes wrong is logged once, and the
 * domain is left without a summary. workers: requests in parallel (stats, MD5s, JSON).
 * abandon (NULL: never): once it is non-zero no further request is made and nothing is put
 * (a stopping daemon's summary of thousands of objects must not outlast its stop). */
void info_write(struct store *st, const char *bucket, const char *root, unsigned workers,
                const atomic_int *abandon);

/*
 * Summaries written by a thread of their own, one root at a time, in the order asked, so that
 * a commit (a close()) does not wait for them: on a local bucket a summary reads every stored
 * byte back for HSDS's MD5 ETags (HSDS, too, writes it after the change, from its scan).
 * The thread starts at the first root (after the daemon's fork).
 */
struct info_queue;
int info_queue_new(struct store *st, const char *bucket, unsigned workers, struct info_queue **out);
/* Summarise root soon; when it cannot be queued, now. */
void info_queue_add(struct info_queue *q, const char *root);
/* 1 while root waits or is being summarised (the collector leaves such a root alone). */
int info_queue_has(struct info_queue *q, const char *root);
/* Write what waits (unless *give_up becomes non-zero: what waits then is left without a
 * summary, logged), then stop the thread. Nothing may be added after. */
void info_queue_drain(struct info_queue *q, const volatile sig_atomic_t *give_up);
void info_queue_free(struct info_queue *q);

#endif
