/* vseal: a new version's chunks sealed into the pool; see vseal.h. */
#include "vseal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "h5osfs/schema/pool.h"
#include "h5osfs/schema/schema.h"
#include "h5osfs/util/clock.h"
#include "h5osfs/util/log.h"
#include "h5osfs/util/pfor.h"
#include "vtab.h"

#define CHUNK_MAX VSEAL_CHUNK_MAX
#define URI_LEN VTABLE_URI_LEN

struct seal_job {
    const struct versions_commit *vc;
    const char *pool;
    const struct base_version *base;
    struct sealed *chunks;
    int *etags;                 /* vseal_chunks' */
    size_t probes[2], n_probes; /* chunks sealed by their bytes first, to test the ETags */
};

/* Does the pool object at key (whose HEAD gave st) hold the bytes its key names? A bucket
 * writer may have put others there before this commit names it. Its ETag tells on S3; a
 * local bucket's object is read and hashed. */
static int pool_object_intact(struct seal_job *j, const char *key, const struct store_stat *st)
{
    struct store_buf buf = { 0 };
    char why[160] = "";
    const char *md5 = schema_pool_key_md5(key);
    if (md5 && strcmp(st->etag, md5) == 0)
        return 1;
    int rc = store_get(j->vc->store, key, CHUNK_MAX - 1, &buf);
    if (rc == 0)
        rc = schema_pool_bytes_check(key, buf.data, buf.len, buf.etag, why, sizeof why);
    store_buf_free(&buf);
    if (rc != 0)
        log_warn("%s: pool object %s: %s: written again with the chunk's bytes", j->vc->domain, key,
                 *why ? why : strerror(-rc));
    return rc == 0;
}

/* Must the pool object at key be written? Yes when it is absent (*absent); when it holds
 * other bytes than its key names; and when it is older than pool_fresh_for: written again
 * (same bytes), it is new to a concurrent sweep of the pool (sweep.h), which deletes only
 * objects older than its grace period. */
static int must_write(struct seal_job *j, const char *key, int *absent)
{
    struct store_stat st;
    *absent = store_head(j->vc->store, key, &st) != 0;
    return *absent ||
           (j->vc->pool_fresh_for > 0 && st.mtime < clock_wall() - j->vc->pool_fresh_for) ||
           !pool_object_intact(j, key, &st);
}

/* Is pool key (of the chunk s) what the base version names at s's index? */
static int same_as_base_entry(const struct seal_job *j, const struct sealed *s, const char *key)
{
    char uri[URI_LEN], want[URI_LEN];
    if (!s->base_entry || vtab_entry_size(s->base_entry) != s->size)
        return 0;
    vtab_entry_uri(s->base_entry, uri);
    return snprintf(want, sizeof want, "%s/%s", j->vc->bucket_name, key) < URI_LEN &&
           strcmp(uri, want) == 0;
}

/*
 * A chunk the writer did not change, named as V_n names it, without reading it: the ingest
 * copied it from the base root, so the new root's object is the base's (a local bucket's copy
 * is a hard link: same mtime), unchanged since before V_n was listed (V_n sealed those very
 * bytes then), unless someone wrote it after V_n was listed (HSDS in place): then its mtime
 * is later and the bytes are read. 1 taken, 0 not.
 */
static int take_base_entry(const struct seal_job *j, struct sealed *s)
{
    const char *key = NULL;
    if (!s->base_entry || s->listed->mtime >= j->base->time ||
        vtab_entry_size(s->base_entry) != s->listed->size || s->listed->size == 0)
        return 0;
    vtab_entry_uri(s->base_entry, s->uri);
    if (schema_pool_uri_check(s->uri, j->vc->bucket_name, j->pool, &key) != 0)
        return 0;
    s->size = s->listed->size;
    s->from_base = 1;
    return 1;
}

/* Into the pool by CopyObject, keyed by the chunk's listed MD5: no byte crosses the wire. 0,
 * or 1 when the etag is no MD5 (the bytes must be read). The listing of the new root (made by
 * this commit, named by nothing yet) gave the ETag: no HEAD. A pool object V_n names at the
 * same index needs neither a HEAD nor a rewrite: every sweep marks it (doc/versions.md §4.2,
 * status of the seal). */
static int seal_by_etag(struct seal_job *j, struct sealed *s, char *key, size_t key_len)
{
    const struct store_stat *st = s->listed;
    int absent;
    if (!schema_is_md5_hex(st->etag))
        return 1;
    if (st->size >= CHUNK_MAX)
        return -EOPNOTSUPP;
    int rc = schema_pool_key(j->pool, st->etag, key, key_len);
    s->size = st->size;
    if (rc == 0 && same_as_base_entry(j, s, key))
        s->from_base = 1;
    else if (rc == 0 && must_write(j, key, &absent)) {
        rc = store_copy(j->vc->store, s->key, key);
        s->fresh = s->copied = absent;
    }
    return rc;
}

/* By the bytes: read, hash, put (an object already there has these bytes). A local bucket's
 * copy is a hard link, which HSDS's in-place chunk writes would change with the chunk. */
static int seal_by_bytes(struct seal_job *j, struct sealed *s, char *key, size_t key_len)
{
    struct store_buf buf = { 0 };
    char md5[33];
    int absent;
    int rc = store_get(j->vc->store, s->key, CHUNK_MAX - 1, &buf);
    if (rc == 0)
        rc = schema_md5_hex(buf.data, buf.len, md5);
    if (rc == 0)
        rc = schema_pool_key(j->pool, md5, key, key_len);
    s->size = buf.len;
    if (rc == 0 && same_as_base_entry(j, s, key))
        s->from_base = 1;
    else if (rc == 0 && must_write(j, key, &absent)) {
        rc = store_put_lazy(j->vc->store, key, buf.data, buf.len);
        s->fresh = absent;
    }
    s->size = buf.len;
    store_buf_free(&buf);
    return rc == -EFBIG ? -EOPNOTSUPP : rc;
}

static void set_uri(struct seal_job *j, struct sealed *s, const char *key, int rc)
{
    if (rc == 0 && snprintf(s->uri, sizeof s->uri, "%s/%s", j->vc->bucket_name, key) >= URI_LEN)
        rc = -ENAMETOOLONG;
    s->rc = rc;
}

/* One chunk into the pool, at the key its MD5 names (content addressed: written once). */
static void seal_one(void *ctx, size_t i)
{
    struct seal_job *j = ctx;
    struct sealed *s = &j->chunks[i];
    char key[STORE_KEY_MAX + 1];
    for (size_t p = 0; p < j->n_probes; p++)
        if (j->probes[p] == i)
            return; /* sealed already */
    if (!schema_is_md5_hex(s->listed->etag) && take_base_entry(j, s)) {
        s->rc = 0;
        return;
    }
    int rc = *j->etags == VSEAL_ETAGS_MD5 ? seal_by_etag(j, s, key, sizeof key) : 1;
    if (rc == 1)
        rc = seal_by_bytes(j, s, key, sizeof key);
    set_uri(j, s, key, rc);
}

/*
 * S3 makes a single-part object's ETag the MD5 of its bytes, but not under SSE-KMS or SSE-C,
 * where it is 32 hex digits all the same: keyed by one, a pool object would sit under another
 * MD5's key, and every read of the version would fail. So a commit trusts the ETags only once
 * those of the oldest and the newest chunk its first such dataset lists are their MD5s: both
 * are read, hashed and sealed by their bytes (a bucket's encryption changes for new objects,
 * so the two ends of the listing tell where a change lies). Else every chunk is read.
 */
static void probe_etags(struct seal_job *j, size_t n)
{
    size_t oldest = n, newest = n;
    for (size_t i = 0; i < n; i++) {
        const struct store_stat *st = j->chunks[i].listed;
        if (!schema_is_md5_hex(st->etag) || st->size >= CHUNK_MAX)
            continue;
        if (oldest == n || st->mtime < j->chunks[oldest].listed->mtime)
            oldest = i;
        if (newest == n || st->mtime > j->chunks[newest].listed->mtime)
            newest = i;
    }
    if (oldest == n)
        return; /* no ETag to trust here */
    j->probes[j->n_probes++] = oldest;
    if (newest != oldest)
        j->probes[j->n_probes++] = newest;
    *j->etags = VSEAL_ETAGS_MD5;
    for (size_t p = 0; p < j->n_probes; p++) {
        struct sealed *s = &j->chunks[j->probes[p]];
        char key[STORE_KEY_MAX + 1];
        int rc = seal_by_bytes(j, s, key, sizeof key);
        set_uri(j, s, key, rc);
        const char *md5 = rc == 0 ? schema_pool_key_md5(key) : NULL;
        if (md5 && strcmp(md5, s->listed->etag) == 0)
            continue;
        if (md5 && *j->etags == VSEAL_ETAGS_MD5)
            log_warn("%s: the store's ETags are not the MD5s of their bytes (%s: ETag %s, MD5 "
                     "%s; SSE-KMS or SSE-C?): every chunk of this version is read and hashed",
                     j->vc->domain, s->key, s->listed->etag, md5);
        *j->etags = VSEAL_ETAGS_NOT_MD5; /* not proven: the bytes decide */
    }
}

void vseal_chunks(const struct versions_commit *vc, const char *pool,
                  const struct base_version *base, struct sealed *chunks, size_t n, int *etags)
{
    struct seal_job job = {
        .vc = vc, .pool = pool, .base = base, .chunks = chunks, .etags = etags
    };
    if (*etags == VSEAL_ETAGS_UNKNOWN)
        probe_etags(&job, n);
    pfor(n, vc->workers ? vc->workers : 1, seal_one, &job);
}
