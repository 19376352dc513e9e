/*
 * store: the backend-independent half of include/h5osfs/store/store.h.
 *
 * Every wrapper clears its output first (so the caller may always free it), checks the key
 * with store_key_check (a listing's prefix with prefix_check) and only then calls the backend,
 * so no backend ever sees a key that could name something outside its bucket.
 */
#include "h5osfs/store/store.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h5osfs/util/grow.h"
#include "h5osfs/util/log.h"

/* A complete key component: not empty, not "." and not "..". */
static int component_ok(const char *p, size_t n)
{
    if (n == 0)
        return 0;
    if (p[0] == '.' && (n == 1 || (n == 2 && p[1] == '.')))
        return 0;
    return 1;
}

/*
 * Check s component by component. The last component (the text after the last '/') must be
 * a complete component for a key; for a listing prefix it is a partial name, only used to
 * filter names, so anything goes there (including nothing, after a trailing '/').
 */
static int path_check(const char *s, int is_prefix)
{
    if (!s)
        return -EINVAL;
    size_t len = strnlen(s, STORE_KEY_MAX + 1);
    if (len > STORE_KEY_MAX || s[0] == '/')
        return -EINVAL;
    if (len == 0)
        return is_prefix ? 0 : -EINVAL;
    for (const char *p = s;;) {
        const char *slash = strchr(p, '/');
        if (!slash)
            return is_prefix || component_ok(p, strlen(p)) ? 0 : -EINVAL;
        if (!component_ok(p, (size_t)(slash - p)))
            return -EINVAL;
        p = slash + 1;
    }
}

int store_key_check(const char *key)
{
    return path_check(key, 0);
}

static int prefix_check(const char *prefix)
{
    return path_check(prefix, 1);
}

/* ---- counters ---- */

/* Count one request of kind that moved bytes (when it succeeded) and answered rc. */
static int counted(struct store *st, enum store_request kind, int rc, uint64_t read,
                   uint64_t written)
{
    struct store_counters *c = &st->counters;
    atomic_fetch_add_explicit(&c->requests[kind], 1, memory_order_relaxed);
    if (rc == 0) {
        atomic_fetch_add_explicit(&c->bytes_read, read, memory_order_relaxed);
        atomic_fetch_add_explicit(&c->bytes_written, written, memory_order_relaxed);
    } else if (rc != -ENOENT && rc != -ESTALE) {
        atomic_fetch_add_explicit(&c->failures, 1, memory_order_relaxed);
    }
    return rc;
}

void store_counts(struct store *st, struct store_counts *out)
{
    struct store_counters *c = &st->counters;
    for (int k = 0; k < STORE_REQUEST_KINDS; k++)
        out->requests[k] = atomic_load_explicit(&c->requests[k], memory_order_relaxed);
    out->bytes_read = atomic_load_explicit(&c->bytes_read, memory_order_relaxed);
    out->bytes_written = atomic_load_explicit(&c->bytes_written, memory_order_relaxed);
    out->failures = atomic_load_explicit(&c->failures, memory_order_relaxed);
    out->retries = atomic_load_explicit(&c->retries, memory_order_relaxed);
}

const char *store_request_name(enum store_request kind)
{
    static const char *const names[STORE_REQUEST_KINDS] = { "get",  "put",    "head",
                                                            "list", "delete", "copy" };
    return (unsigned)kind < STORE_REQUEST_KINDS ? names[kind] : "?";
}

/* Both kinds of get: the caller's buffer is always left empty on failure. */
static int get_checked(struct store *st, const char *key, uint64_t off, uint64_t len, size_t max,
                       struct store_buf *out)
{
    int err = store_key_check(key);
    if (out)
        *out = (struct store_buf){ 0 };
    if (err)
        return err;
    if (!st || !out)
        return -EINVAL;
    int rc = st->ops->get(st, key, off, len, max, out);
    return counted(st, STORE_GET, rc, rc == 0 ? out->len : 0, 0);
}

int store_get(struct store *st, const char *key, size_t max, struct store_buf *out)
{
    return get_checked(st, key, 0, STORE_RANGE_TO_END, max, out);
}

int store_get_bytes(void *st, const char *key, size_t max, unsigned char **data, size_t *len)
{
    struct store_buf buf = { 0 };
    int rc = store_get(st, key, max, &buf);
    *data = buf.data;
    *len = buf.len;
    return rc;
}

int store_keeps_files(const struct store *st)
{
    return st && st->ops->open_object != NULL;
}

int store_open_object(struct store *st, const char *key, int *fd, struct store_stat *out)
{
    *fd = -1;
    int err = store_key_check(key);
    if (err)
        return err;
    if (!st)
        return -EINVAL;
    if (!st->ops->open_object)
        return -EOPNOTSUPP;
    int rc = st->ops->open_object(st, key, fd, out);
    return counted(st, STORE_GET, rc, rc == 0 ? out->size : 0, 0);
}

int store_get_range(struct store *st, const char *key, uint64_t off, uint64_t len,
                    struct store_buf *out)
{
    return get_checked(st, key, off, len, SIZE_MAX, out);
}

/* What every put checks before the backend sees it: 0 or -errno. */
static int put_args(const struct store *st, const char *key, const void *data, size_t len)
{
    int err = store_key_check(key);
    if (err)
        return err;
    return !st || (!data && len > 0) ? -EINVAL : 0;
}

int store_put(struct store *st, const char *key, const void *data, size_t len)
{
    int err = put_args(st, key, data, len);
    return err ? err : counted(st, STORE_PUT, st->ops->put(st, key, data, len), 0, len);
}

int store_put_if(struct store *st, const char *key, const void *data, size_t len,
                 const char *if_etag)
{
    int err = put_args(st, key, data, len);
    if (err)
        return err;
    if (if_etag && (!*if_etag || strlen(if_etag) >= sizeof((struct store_stat *)0)->etag))
        return -EINVAL;
    return counted(st, STORE_PUT, st->ops->put_if(st, key, data, len, if_etag), 0, len);
}

int store_put_lazy(struct store *st, const char *key, const void *data, size_t len)
{
    int err = put_args(st, key, data, len);
    if (err)
        return err;
    int rc = (st->ops->put_lazy ? st->ops->put_lazy : st->ops->put)(st, key, data, len);
    return counted(st, STORE_PUT, rc, 0, len);
}

int store_put_new(struct store *st, const char *key, const void *data, size_t len)
{
    int err = put_args(st, key, data, len);
    if (err)
        return err;
    if (!st->ops->put_new)
        return store_put_lazy(st, key, data, len);
    return counted(st, STORE_PUT, st->ops->put_new(st, key, data, len), 0, len);
}

static int put_new_read(struct store *st, const char *key, int fd, uint64_t off, size_t len)
{
    unsigned char *buf = malloc(len ? len : 1);
    if (!buf)
        return -ENOMEM;
    size_t done = 0;
    while (done < len) {
        ssize_t n = pread(fd, buf + done, len - done, (off_t)(off + done));
        if (n <= 0) {
            int err = n < 0 ? errno : EIO;
            free(buf);
            log_error("store: put %s: read of the source failed: %s", key, strerror(err));
            return -EIO;
        }
        done += (size_t)n;
    }
    int rc = store_put_new(st, key, buf, len);
    free(buf);
    return rc;
}

int store_put_new_from_fd(struct store *st, const char *key, int fd, uint64_t off, size_t len)
{
    int err = store_key_check(key);
    if (err)
        return err;
    if (!st || fd < 0)
        return -EINVAL;
    if (!st->ops->put_new_from_fd)
        return put_new_read(st, key, fd, off, len);
    return counted(st, STORE_PUT, st->ops->put_new_from_fd(st, key, fd, off, len), 0, len);
}

int store_put_new_file(struct store *st, const char *key, int fd, size_t len, int *kept)
{
    *kept = 0;
    int err = store_key_check(key);
    if (err)
        return err;
    if (!st || fd < 0)
        return -EINVAL;
    if (!st->ops->put_new_file)
        return store_put_new_from_fd(st, key, fd, 0, len);
    return counted(st, STORE_PUT, st->ops->put_new_file(st, key, fd, len, kept), 0, len);
}

#define COPY_THROUGH_MAX (1ull << 32) /* a copy through memory: HSDS objects are far smaller */

int store_copy(struct store *st, const char *src, const char *dst)
{
    return store_copy_sized(st, src, dst, STORE_SIZE_UNKNOWN);
}

int store_copy_sized(struct store *st, const char *src, const char *dst, uint64_t size)
{
    int err = store_key_check(src);
    if (err == 0)
        err = store_key_check(dst);
    if (err)
        return err;
    if (!st)
        return -EINVAL;
    if (st->ops->copy)
        return counted(st, STORE_COPY, st->ops->copy(st, src, dst, size), 0, 0);
    struct store_buf buf;
    err = store_get(st, src, COPY_THROUGH_MAX, &buf);
    if (err)
        return err;
    err = store_put_new(st, dst, buf.data, buf.len);
    store_buf_free(&buf);
    return err;
}

int store_sync(struct store *st)
{
    if (!st)
        return -EINVAL;
    return st->ops->sync ? st->ops->sync(st) : 0;
}

int store_delete(struct store *st, const char *key)
{
    int err = store_key_check(key);
    if (err)
        return err;
    if (!st)
        return -EINVAL;
    return counted(st, STORE_DELETE, st->ops->del(st, key), 0, 0);
}

int store_head(struct store *st, const char *key, struct store_stat *out)
{
    int err = store_key_check(key);
    if (out)
        memset(out, 0, sizeof *out);
    if (err)
        return err;
    if (!st || !out)
        return -EINVAL;
    return counted(st, STORE_HEAD, st->ops->head(st, key, out), 0, 0);
}

/* Keep the names of a page that start with prefix. Callers take what follows the prefix
 * (ns a child's name, domops a key's tail): a name outside it, which only a broken server
 * sends, would have them read past its end. Logged once per page. */
static void keep_below(const char *prefix, struct store_list *l)
{
    size_t plen = strlen(prefix), kept = 0, dropped = 0;
    for (size_t i = 0; i < l->n_objects; i++) {
        if (strncmp(l->objects[i].key, prefix, plen) == 0)
            l->objects[kept++] = l->objects[i];
        else
            free(l->objects[i].key);
    }
    dropped += l->n_objects - kept;
    l->n_objects = kept;
    kept = 0;
    for (size_t i = 0; i < l->n_prefixes; i++) {
        if (strncmp(l->prefixes[i], prefix, plen) == 0)
            l->prefixes[kept++] = l->prefixes[i];
        else
            free(l->prefixes[i]);
    }
    dropped += l->n_prefixes - kept;
    l->n_prefixes = kept;
    if (dropped)
        log_error("store: list %s: the store answered %zu names that do not start with the "
                  "prefix: left out",
                  prefix, dropped);
}

/* prefix NULL is the empty prefix (the whole bucket); delimiter NULL or "" is none. */
int store_list(struct store *st, const char *prefix, const char *delimiter, const char *token,
               size_t max_keys, struct store_list *out)
{
    if (!prefix)
        prefix = "";
    int err = prefix_check(prefix);
    if (out)
        memset(out, 0, sizeof *out);
    if (err)
        return err;
    if (!st || !out)
        return -EINVAL;
    int rc = st->ops->list(st, prefix, delimiter, token, max_keys, out);
    if (rc == 0)
        keep_below(prefix, out);
    return counted(st, STORE_LIST, rc, 0, 0);
}

#define LIST_KEYS_PAGE 1000

static int list_keys_paged(struct store *st, const char *prefix,
                           int (*fn)(void *ctx, const char *key, const struct store_stat *st),
                           void *ctx)
{
    char *token = NULL;
    int rc;
    do {
        struct store_list page = { 0 };
        rc = counted(st, STORE_LIST, st->ops->list(st, prefix, NULL, token, LIST_KEYS_PAGE, &page),
                     0, 0);
        if (rc == 0)
            keep_below(prefix, &page);
        free(token);
        token = NULL;
        for (size_t i = 0; rc == 0 && i < page.n_objects; i++)
            rc = fn(ctx, page.objects[i].key, &page.objects[i].st);
        if (rc == 0) {
            token = page.next_token;
            page.next_token = NULL;
        }
        store_list_free(&page);
    } while (rc == 0 && token);
    free(token);
    return rc;
}

int store_list_keys(struct store *st, const char *prefix,
                    int (*fn)(void *ctx, const char *key, const struct store_stat *st), void *ctx)
{
    if (!prefix)
        prefix = "";
    int err = prefix_check(prefix);
    if (err)
        return err;
    if (!st || !fn)
        return -EINVAL;
    size_t len = strlen(prefix);
    int whole_dir = len == 0 || prefix[len - 1] == '/';
    if (!st->ops->list_keys || !whole_dir)
        return list_keys_paged(st, prefix, fn, ctx);
    /* a walk of the local directory: one request, whatever fn answers */
    int rc = st->ops->list_keys(st, prefix, fn, ctx);
    counted(st, STORE_LIST, rc < 0 ? rc : 0, 0, 0);
    return rc;
}

int store_abort_uploads(struct store *st, const char *prefix, size_t *aborted)
{
    size_t n = 0;
    if (aborted)
        *aborted = 0;
    if (!prefix)
        prefix = "";
    int err = prefix_check(prefix);
    if (err)
        return err;
    if (!st)
        return -EINVAL;
    if (!st->ops->abort_uploads)
        return 0;
    int rc = st->ops->abort_uploads(st, prefix, &n);
    if (rc == -EOPNOTSUPP)
        rc = 0; /* a server without the listing keeps no uploads we could find */
    atomic_fetch_add_explicit(&st->counters.requests[STORE_DELETE], n, memory_order_relaxed);
    if (aborted)
        *aborted = n;
    return counted(st, STORE_LIST, rc, 0, 0);
}

void store_close(struct store *st)
{
    if (st)
        st->ops->destroy(st);
}

void store_buf_free(struct store_buf *buf)
{
    if (!buf)
        return;
    free(buf->data);
    *buf = (struct store_buf){ 0 };
}

void store_list_free(struct store_list *list)
{
    if (!list)
        return;
    for (size_t i = 0; i < list->n_objects; i++)
        free(list->objects[i].key);
    for (size_t i = 0; i < list->n_prefixes; i++)
        free(list->prefixes[i]);
    free(list->objects);
    free(list->prefixes);
    free(list->next_token);
    memset(list, 0, sizeof *list);
}

static int keep_collected_key(void *ctx, const char *key, const struct store_stat *st)
{
    (void)st;
    struct store_keys *k = ctx;
    char **grown = grow_array(k->keys, &k->cap, k->n + 1, sizeof *grown, 64);
    if (!grown)
        return -ENOMEM;
    k->keys = grown;
    return (k->keys[k->n] = strdup(key)) ? (k->n++, 0) : -ENOMEM;
}

int store_collect_keys(struct store *st, const char *prefix, struct store_keys *out)
{
    memset(out, 0, sizeof *out);
    return store_list_keys(st, prefix, keep_collected_key, out);
}

void store_keys_free(struct store_keys *k)
{
    for (size_t i = 0; i < k->n; i++)
        free(k->keys[i]);
    free(k->keys);
    memset(k, 0, sizeof *k);
}
