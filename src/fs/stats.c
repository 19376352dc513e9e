/* stats: see stats.h. */
#include "stats.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

static json_t *store_json(const struct fs_stats *s)
{
    json_t *req = json_object();
    for (int k = 0; req && k < STORE_REQUEST_KINDS; k++)
        json_object_set_new(req, store_request_name((enum store_request)k),
                            json_integer((json_int_t)s->store.requests[k]));
    return json_pack("{s:s, s:o*, s:I, s:I, s:I, s:I}", "backend", s->backend, "requests", req,
                     "bytes_read", (json_int_t)s->store.bytes_read, "bytes_written",
                     (json_int_t)s->store.bytes_written, "failures", (json_int_t)s->store.failures,
                     "retries", (json_int_t)s->store.retries);
}

static json_t *cache_json(const struct fs_stats *s)
{
    return json_pack(
        "{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "hits",
        (json_int_t)s->cache.hits, "misses", (json_int_t)s->cache.misses, "waits",
        (json_int_t)s->cache.waits, "evictions", (json_int_t)s->cache.evictions, "bytes",
        (json_int_t)s->cache.bytes, "entries", (json_int_t)s->cache.entries, "charged",
        (json_int_t)s->cache.charged, "capacity", (json_int_t)s->cache.capacity,
        "read_ahead_queued", (json_int_t)s->read_ahead.queued, "read_ahead_dropped",
        (json_int_t)s->read_ahead.dropped, "read_ahead_present", (json_int_t)s->read_ahead.present,
        "spread_queued", (json_int_t)s->read_ahead.spread, "spread_loaded",
        (json_int_t)s->cache.spread_loaded, "spread_used", (json_int_t)s->cache.spread_used,
        "spread_unused", (json_int_t)s->cache.spread_unused);
}

static json_t *images_json(const struct fs_stats *s)
{
    return json_pack("{s:I, s:I, s:f, s:I}", "built", (json_int_t)s->images.builds, "failed",
                     (json_int_t)s->images.failures, "build_seconds", s->images.seconds, "held",
                     (json_int_t)s->images.held);
}

static json_t *writes_json(const struct fs_stats *s)
{
    if (s->read_only)
        return json_null();
    return json_pack("{s:I, s:I, s:I, s:I, s:I}", "commits", (json_int_t)s->staging.commits,
                     "commit_failures", (json_int_t)s->staging.failures, "commits_lost",
                     (json_int_t)s->staging.lost, "files_staged", (json_int_t)s->staging.open,
                     "bytes_staged", (json_int_t)s->staged_bytes);
}

int stats_json(const struct fs_stats *s, int pretty, char **out)
{
    json_t *o = json_pack("{s:s, s:f, s:o*, s:o*, s:o*, s:o*}", "version", H5OSFS_VERSION,
                          "uptime_seconds", s->uptime, "store", store_json(s), "chunk_cache",
                          cache_json(s), "images", images_json(s), "writes", writes_json(s));
    char *text =
        o ? json_dumps(o, (pretty ? JSON_INDENT(2) : JSON_COMPACT) | JSON_SORT_KEYS) : NULL;
    json_decref(o);
    if (!text)
        return -ENOMEM;
    size_t n = strlen(text);
    *out = realloc(text, n + 2);
    if (!*out) {
        free(text);
        return -ENOMEM;
    }
    memcpy(*out + n, "\n", 2);
    return 0;
}

uint64_t stats_dir_bytes(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    uint64_t total = 0;
    struct dirent *e;
    struct stat st;
    while ((e = readdir(d)) != NULL)
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
            total += (uint64_t)st.st_blocks * 512;
    closedir(d);
    return total;
}
