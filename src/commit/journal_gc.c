/*
 * journal_gc: the records of collection in the journal directory (journal.h): the root
 * collector's (gc.<bucket tag>.<root>.json: a root to delete, durable until it is gone) and
 * the pool sweeps' (sweep.<bucket tag>.<pool>.json: a sweep owed). Each is written atomically
 * and durably, named after the bucket's identity so that buckets sharing a cache directory
 * never see each other's, and listed by what journal.c lists records with.
 */
#include "h5osfs/commit/journal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "h5osfs/util/log.h"
#include "journal_int.h"

/* ---- the collector's records ---- */

/* FNV-1a of the bucket's identity: the records of two buckets sharing a cache_dir never share
 * a name, even for one root id. */
static void bucket_tag(const char *bucket, char out[17])
{
    uint64_t h = 1469598103934665603ull;
    for (const unsigned char *p = (const unsigned char *)bucket; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}

/* "gc.<tag>.<root>.json" (suffix appended); -EINVAL when root is no root id. */
static int gc_file_name(const struct journal *j, const char *root, const char *suffix, char *buf,
                        size_t len)
{
    char tag[17], checked[SCHEMA_ID_BUF];
    if (!*root || journal_copy_root(checked, root) != 0 || strpbrk(root, "/."))
        return -EINVAL;
    bucket_tag(j->bucket, tag);
    snprintf(buf, len, GC_PREFIX "%s.%s" GC_SUFFIX "%s", tag, root, suffix);
    return 0;
}

int journal_gc_write(struct journal *j, const char *root, const char *domain,
                     const char *replaced_by)
{
    char tmp[128], final[128];
    int rc = gc_file_name(j, root, ".tmp", tmp, sizeof tmp);
    if (rc == 0)
        rc = gc_file_name(j, root, "", final, sizeof final);
    if (rc != 0)
        return rc;
    json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "bucket", j->bucket, "root", root, "domain",
                          domain ? domain : "", "replaced_by", replaced_by ? replaced_by : "");
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!text)
        return -ENOMEM;
    rc = journal_replace_file(j->records, tmp, final, text);
    if (rc != 0)
        log_error("%s: cannot write the collector's record %s/journal/%s: %s",
                  domain ? domain : root, j->root, final, strerror(-rc));
    free(text);
    return rc;
}

void journal_gc_remove(struct journal *j, const char *root)
{
    char name[128];
    if (gc_file_name(j, root, "", name, sizeof name) != 0)
        return;
    if (unlinkat(j->records, name, 0) != 0 && errno != ENOENT)
        log_warn("cannot remove the collector's record %s/journal/%s: %s (root %s is collected "
                 "again, finding nothing, at the next mount)",
                 j->root, name, strerror(errno), root);
}

/* The JSON of a small record file of the journal (a gc or sweep record) in *out, or -errno
 * (-EINVAL: too long). An unparseable file gives a NULL *out, which every field check refuses. */
static int load_record(struct journal *j, const char *file, json_t **out)
{
    char text[JOURNAL_REC_MAX + 1];
    *out = NULL;
    int fd = openat(j->records, file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, text, sizeof text);
    close(fd);
    if (n < 0 || n > JOURNAL_REC_MAX)
        return n < 0 ? -EIO : -EINVAL;
    *out = json_loadb(text, (size_t)n, 0, NULL);
    return 0;
}

/* One record file; -EINVAL for anything journal_gc_write did not write for this bucket. */
static int read_gc_rec(struct journal *j, const char *file, struct journal_gc_rec *rec)
{
    char want[128];
    json_t *o;
    int rc = load_record(j, file, &o);
    if (rc != 0)
        return rc;
    const char *bucket = json_string_value(json_object_get(o, "bucket"));
    const char *root = json_string_value(json_object_get(o, "root"));
    const char *domain = json_string_value(json_object_get(o, "domain"));
    memset(rec, 0, sizeof *rec);
    rc = bucket && root && domain && strcmp(bucket, j->bucket) == 0 ? 0 : -EINVAL;
    if (rc == 0 && (gc_file_name(j, root, "", want, sizeof want) != 0 || strcmp(want, file) != 0))
        rc = -EINVAL;
    if (rc == 0)
        rc = journal_copy_root(rec->root, root);
    if (rc == 0)
        rc = journal_copy_root(rec->replaced_by,
                               json_string_value(json_object_get(o, "replaced_by")));
    if (rc == 0 && !(rec->domain = strdup(domain)))
        rc = -ENOMEM;
    json_decref(o);
    return rc;
}

/* A record of this journal's bucket, by its name alone: PREFIX<bucket tag>.<...>GC_SUFFIX. */
static int is_our_record_name(const struct journal *j, const char *name, const char *prefix)
{
    char tag[17];
    size_t len = strlen(name), pre = strlen(prefix) + 16 + 1, suf = strlen(GC_SUFFIX);
    bucket_tag(j->bucket, tag);
    return len > pre + suf && strncmp(name, prefix, strlen(prefix)) == 0 &&
           strncmp(name + strlen(prefix), tag, 16) == 0 && name[pre - 1] == '.' &&
           strcmp(name + len - suf, GC_SUFFIX) == 0;
}

static int is_our_gc_name(const struct journal *j, const char *name)
{
    return is_our_record_name(j, name, GC_PREFIX);
}

static int read_gc_elem(struct journal *j, const char *name, void *elem)
{
    return read_gc_rec(j, name, elem);
}

static void free_gc_recs(void *elems, size_t n)
{
    journal_gc_recs_free(elems, n);
}

int journal_gc_list(struct journal *j, struct journal_gc_rec **recs, size_t *n)
{
    static const struct file_list how = { is_our_gc_name, read_gc_elem, free_gc_recs, sizeof **recs,
                                          "the collector's record" };
    void *out;
    int rc = journal_list_files(j, &how, &out, n);
    *recs = out;
    return rc;
}

void journal_gc_recs_free(struct journal_gc_rec *recs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(recs[i].domain);
    free(recs);
}

/* ---- the pool sweeps' records ---- */

/* "sweep.<tag>.<pool>.json" (suffix appended); -EINVAL when pool is no root id. */
static int sweep_file_name(const struct journal *j, const char *pool, const char *suffix, char *buf,
                           size_t len)
{
    char tag[17], checked[SCHEMA_ID_BUF];
    if (!*pool || journal_copy_root(checked, pool) != 0 || strpbrk(pool, "/."))
        return -EINVAL;
    bucket_tag(j->bucket, tag);
    snprintf(buf, len, SWEEP_PREFIX "%s.%s" GC_SUFFIX "%s", tag, pool, suffix);
    return 0;
}

int journal_pool_sweep_write(struct journal *j, const char *pool, const char *domain, double t0)
{
    char tmp[128], final[128];
    int rc = sweep_file_name(j, pool, ".tmp", tmp, sizeof tmp);
    if (rc == 0)
        rc = sweep_file_name(j, pool, "", final, sizeof final);
    if (rc != 0)
        return rc;
    json_t *o = json_pack("{s:s, s:s, s:s, s:f}", "bucket", j->bucket, "pool", pool, "domain",
                          domain, "t0", t0);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!text)
        return -ENOMEM;
    rc = journal_replace_file(j->records, tmp, final, text);
    if (rc != 0)
        log_error("%s: cannot write the sweep's record %s/journal/%s: %s", domain, j->root, final,
                  strerror(-rc));
    free(text);
    return rc;
}

void journal_pool_sweep_remove(struct journal *j, const char *pool)
{
    char name[128];
    if (sweep_file_name(j, pool, "", name, sizeof name) != 0)
        return;
    if (unlinkat(j->records, name, 0) != 0 && errno != ENOENT)
        log_warn("cannot remove the sweep's record %s/journal/%s: %s (pool %s is swept again, "
                 "finding nothing to delete, at the next mount)",
                 j->root, name, strerror(errno), pool);
}

static int read_sweep_rec(struct journal *j, const char *file, struct journal_sweep_rec *rec)
{
    char want[128];
    json_t *o;
    int rc = load_record(j, file, &o);
    if (rc != 0)
        return rc;
    const char *bucket = json_string_value(json_object_get(o, "bucket"));
    const char *pool = json_string_value(json_object_get(o, "pool"));
    const char *domain = json_string_value(json_object_get(o, "domain"));
    memset(rec, 0, sizeof *rec);
    rc = bucket && pool && domain && domain[0] == '/' && strcmp(bucket, j->bucket) == 0 ? 0
                                                                                        : -EINVAL;
    if (rc == 0 &&
        (sweep_file_name(j, pool, "", want, sizeof want) != 0 || strcmp(want, file) != 0))
        rc = -EINVAL;
    if (rc == 0)
        rc = journal_copy_root(rec->pool, pool);
    if (rc == 0 && !(rec->domain = strdup(domain)))
        rc = -ENOMEM;
    rec->t0 = json_number_value(json_object_get(o, "t0"));
    json_decref(o);
    return rc;
}

static int is_our_sweep_name(const struct journal *j, const char *name)
{
    return is_our_record_name(j, name, SWEEP_PREFIX);
}

static int read_sweep_elem(struct journal *j, const char *name, void *elem)
{
    return read_sweep_rec(j, name, elem);
}

static void free_sweep_recs(void *elems, size_t n)
{
    journal_sweep_recs_free(elems, n);
}

int journal_pool_sweep_list(struct journal *j, struct journal_sweep_rec **recs, size_t *n)
{
    static const struct file_list how = { is_our_sweep_name, read_sweep_elem, free_sweep_recs,
                                          sizeof **recs, "the sweep's record" };
    void *out;
    int rc = journal_list_files(j, &how, &out, n);
    *recs = out;
    return rc;
}

void journal_sweep_recs_free(struct journal_sweep_rec *recs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(recs[i].domain);
    free(recs);
}
