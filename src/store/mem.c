/*
 * mem: a bucket in memory (include/h5osfs/store/store_test.h), for unit tests of the modules above
 * the store.
 *
 * The objects are one array sorted by key (strcmp is byte order), so a lookup is a binary
 * search and a listing one pass from the first key it may return; inserts move the tail,
 * which is cheap at the sizes tests use. One rwlock guards the array: gets, heads and
 * listings share it, every change holds it alone, so each put replaces an object whole (a
 * reader sees the old bytes or the new ones) and put_if compares and swaps atomically.
 * Data and etags are made before the lock is taken.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "h5osfs/util/clock.h"
#include "h5osfs/util/grow.h"
#include "h5osfs/util/log.h"
#include "h5osfs/store/store_test.h"

struct mem_obj {
    char *key;
    unsigned char *data; /* len bytes and one NUL, as store_buf hands them out */
    struct store_stat st;
};

struct mem_store {
    struct store base; /* first member: a struct store * is a struct mem_store * */
    pthread_rwlock_t lock;
    struct mem_obj *objs; /* sorted by key */
    size_t n, cap;
};

static struct mem_store *mem_of(struct store *st)
{
    return (struct mem_store *)st;
}

static int mem_nomem(const char *op, const char *key)
{
    log_error("store mem: %s %s: out of memory", op, key);
    return -ENOMEM;
}

/* Index of key, or where it would go (*found 0). Under the lock. */
static size_t mem_find(const struct mem_store *m, const char *key, int *found)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(m->objs[mid].key, key);
        if (c == 0) {
            *found = 1;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = 0;
    return lo;
}

static void mem_obj_free(struct mem_obj *o)
{
    free(o->key);
    free(o->data);
}

/* ---- get / head ---------------------------------------------------------------------- */

static int mem_get(struct store *st, const char *key, uint64_t off, uint64_t len, size_t max,
                   struct store_buf *out)
{
    struct mem_store *m = mem_of(st);
    int found, rc = 0;
    pthread_rwlock_rdlock(&m->lock);
    size_t i = mem_find(m, key, &found);
    if (!found) {
        rc = -ENOENT;
        goto out_unlock;
    }
    const struct mem_obj *o = &m->objs[i];
    uint64_t n = off < o->st.size ? o->st.size - off : 0;
    if (len < n)
        n = len;
    if (n > max || n >= SIZE_MAX) {
        rc = -EFBIG;
        goto out_unlock;
    }
    out->data = malloc((size_t)n + 1);
    if (!out->data) {
        rc = mem_nomem("get", key);
        goto out_unlock;
    }
    if (n)
        memcpy(out->data, o->data + off, (size_t)n);
    out->data[n] = '\0';
    out->len = (size_t)n;
    memcpy(out->etag, o->st.etag, sizeof out->etag);
out_unlock:
    pthread_rwlock_unlock(&m->lock);
    return rc;
}

static int mem_head(struct store *st, const char *key, struct store_stat *out)
{
    struct mem_store *m = mem_of(st);
    int found;
    pthread_rwlock_rdlock(&m->lock);
    size_t i = mem_find(m, key, &found);
    if (found)
        *out = m->objs[i].st;
    pthread_rwlock_unlock(&m->lock);
    return found ? 0 : -ENOENT;
}

/* ---- put / copy / delete ----------------------------------------------------------------- */

static int mem_etag(const char *key, const void *data, size_t len, char etag[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (EVP_Digest(data ? data : "", len, md, &mdlen, EVP_md5(), NULL) != 1) {
        log_error("store mem: put %s: MD5 of the content failed", key);
        return -EIO;
    }
    for (unsigned int i = 0; i < mdlen && 2 * i + 2 < 65; i++)
        snprintf(etag + 2 * i, 3, "%02x", md[i]);
    return 0;
}

/* A new object holding a copy of data (its key is set when it is placed). */
static int mem_obj_make(const char *key, const void *data, size_t len, struct mem_obj *o)
{
    memset(o, 0, sizeof *o);
    o->data = malloc(len + 1);
    if (!o->data)
        return mem_nomem("put", key);
    if (len)
        memcpy(o->data, data, len);
    o->data[len] = '\0';
    o->st.size = len;
    o->st.mtime = clock_wall();
    int rc = mem_etag(key, data, len, o->st.etag);
    if (rc != 0)
        free(o->data);
    return rc;
}

/* Put o at key (under the write lock): replaces the object there, or is inserted at i. The
 * store owns o's memory afterwards, also on failure (freed). */
static int mem_place(struct mem_store *m, const char *key, size_t i, int found, struct mem_obj *o)
{
    if (found) {
        o->key = m->objs[i].key;
        free(m->objs[i].data);
        m->objs[i] = *o;
        return 0;
    }
    o->key = strdup(key);
    if (!o->key)
        goto out_nomem;
    if (m->n == m->cap) {
        struct mem_obj *nv = grow_array(m->objs, &m->cap, m->n + 1, sizeof *m->objs, 64);
        if (!nv)
            goto out_nomem;
        m->objs = nv;
    }
    memmove(m->objs + i + 1, m->objs + i, (m->n - i) * sizeof *m->objs);
    m->objs[i] = *o;
    m->n++;
    return 0;

out_nomem:
    mem_obj_free(o);
    return mem_nomem("put", key);
}

/* Is the object at key (found or not) still the one the caller saw? 0 or -ESTALE. */
static int mem_still_same(const struct mem_store *m, size_t i, int found, const char *if_etag)
{
    if (!if_etag)
        return found ? -ESTALE : 0;
    return found && strcmp(m->objs[i].st.etag, if_etag) == 0 ? 0 : -ESTALE;
}

static int mem_put_with(struct store *st, const char *key, const void *data, size_t len,
                        int conditional, const char *if_etag)
{
    struct mem_store *m = mem_of(st);
    struct mem_obj o;
    int found, rc = mem_obj_make(key, data, len, &o);
    if (rc != 0)
        return rc;
    pthread_rwlock_wrlock(&m->lock);
    size_t i = mem_find(m, key, &found);
    rc = conditional ? mem_still_same(m, i, found, if_etag) : 0;
    if (rc == 0)
        rc = mem_place(m, key, i, found, &o);
    else
        mem_obj_free(&o);
    pthread_rwlock_unlock(&m->lock);
    return rc;
}

static int mem_put(struct store *st, const char *key, const void *data, size_t len)
{
    return mem_put_with(st, key, data, len, 0, NULL);
}

static int mem_put_if(struct store *st, const char *key, const void *data, size_t len,
                      const char *if_etag)
{
    return mem_put_with(st, key, data, len, 1, if_etag);
}

/* The bytes of src at dst, as S3's CopyObject: same content, same etag, a new mtime. */
static int mem_copy(struct store *st, const char *src, const char *dst, uint64_t size)
{
    (void)size; /* nothing to choose by size in memory */
    struct mem_store *m = mem_of(st);
    struct mem_obj o = { 0 };
    int found, rc = 0;
    pthread_rwlock_wrlock(&m->lock);
    size_t i = mem_find(m, src, &found);
    if (!found) {
        rc = -ENOENT;
        goto out_unlock;
    }
    o.st = m->objs[i].st;
    o.st.mtime = clock_wall();
    o.data = malloc(o.st.size + 1);
    if (!o.data) {
        rc = mem_nomem("copy", dst);
        goto out_unlock;
    }
    memcpy(o.data, m->objs[i].data, o.st.size + 1);
    i = mem_find(m, dst, &found);
    rc = mem_place(m, dst, i, found, &o);
out_unlock:
    pthread_rwlock_unlock(&m->lock);
    return rc;
}

static int mem_del(struct store *st, const char *key)
{
    struct mem_store *m = mem_of(st);
    int found;
    pthread_rwlock_wrlock(&m->lock);
    size_t i = mem_find(m, key, &found);
    if (found) {
        mem_obj_free(&m->objs[i]);
        memmove(m->objs + i, m->objs + i + 1, (m->n - i - 1) * sizeof *m->objs);
        m->n--;
    }
    pthread_rwlock_unlock(&m->lock);
    return found ? 0 : -ENOENT;
}

/* ---- list ---------------------------------------------------------------------------------- */

struct mem_page {
    struct store_list *out;
    size_t obj_cap, pfx_cap;
    size_t count, max; /* items so far; max 0: no limit */
    const char *last;  /* the last item added (owned by out) */
};

static int mem_page_object(struct mem_page *p, const struct mem_obj *o)
{
    struct store_list *l = p->out;
    if (l->n_objects == p->obj_cap) {
        void *nv = grow_array(l->objects, &p->obj_cap, l->n_objects + 1, sizeof *l->objects, 16);
        if (!nv)
            return -ENOMEM;
        l->objects = nv;
    }
    struct store_entry *e = &l->objects[l->n_objects];
    e->key = strdup(o->key);
    if (!e->key)
        return -ENOMEM;
    e->st = o->st;
    l->n_objects++;
    p->last = e->key;
    p->count++;
    return 0;
}

static int mem_page_prefix(struct mem_page *p, const char *key, size_t len)
{
    struct store_list *l = p->out;
    if (l->n_prefixes == p->pfx_cap) {
        void *nv = grow_array(l->prefixes, &p->pfx_cap, l->n_prefixes + 1, sizeof *l->prefixes, 16);
        if (!nv)
            return -ENOMEM;
        l->prefixes = nv;
    }
    char *s = strndup(key, len);
    if (!s)
        return -ENOMEM;
    l->prefixes[l->n_prefixes++] = s;
    p->last = s;
    p->count++;
    return 0;
}

/* Length of key's common prefix (through the delimiter after prefix), or 0 if none. */
static size_t mem_common_prefix(const char *key, size_t plen, const char *delim)
{
    if (!delim || !*delim)
        return 0;
    const char *d = strstr(key + plen, delim);
    return d ? (size_t)(d - key) + strlen(delim) : 0;
}

/* strcmp of the first len bytes of s (a whole item) with t. */
static int mem_cmp_item(const char *s, size_t len, const char *t)
{
    int c = strncmp(s, t, len);
    if (c != 0)
        return c;
    return t[len] == '\0' ? 0 : -1; /* t has s's len bytes: longer is later */
}

/*
 * One item after another in key order: an object, or the common prefix of a run of keys (all
 * keys of one common prefix are adjacent in byte order). An item at or before the token was
 * on an earlier page. 0, 1 when the page is full and another item exists, or -ENOMEM.
 */
static int mem_list_item(struct mem_page *p, const struct mem_obj *o, size_t plen,
                         const char *delim, const char *token)
{
    size_t clen = mem_common_prefix(o->key, plen, delim);
    if (clen) {
        if ((token && mem_cmp_item(o->key, clen, token) <= 0) ||
            (p->last && strlen(p->last) == clen && strncmp(p->last, o->key, clen) == 0))
            return 0; /* the prefix was listed already */
    } else if (token && strcmp(o->key, token) <= 0) {
        return 0;
    }
    if (p->max && p->count >= p->max)
        return 1;
    return clen ? mem_page_prefix(p, o->key, clen) : mem_page_object(p, o);
}

static int mem_list(struct store *st, const char *prefix, const char *delimiter, const char *token,
                    size_t max_keys, struct store_list *out)
{
    struct mem_store *m = mem_of(st);
    struct mem_page p = { .out = out, .max = max_keys };
    size_t plen = strlen(prefix);
    int found, rc = 0;
    memset(out, 0, sizeof *out);
    pthread_rwlock_rdlock(&m->lock);
    const char *from = token && strcmp(token, prefix) > 0 ? token : prefix;
    for (size_t i = mem_find(m, from, &found); i < m->n && rc == 0; i++) {
        if (strncmp(m->objs[i].key, prefix, plen) != 0)
            break; /* the keys with this prefix are one run: it ended */
        rc = mem_list_item(&p, &m->objs[i], plen, delimiter, token);
    }
    pthread_rwlock_unlock(&m->lock);
    if (rc == 1 && !(out->next_token = strdup(p.last)))
        rc = -ENOMEM;
    if (rc < 0) {
        store_list_free(out);
        return mem_nomem("list", prefix);
    }
    return 0;
}

/* ---- open / close ------------------------------------------------------------------------- */

static void mem_destroy(struct store *st)
{
    struct mem_store *m = mem_of(st);
    for (size_t i = 0; i < m->n; i++)
        mem_obj_free(&m->objs[i]);
    free(m->objs);
    pthread_rwlock_destroy(&m->lock);
    free(m);
}

static const struct store_ops mem_ops = {
    .name = "mem",
    .get = mem_get,
    .put = mem_put,
    .put_if = mem_put_if,
    .copy = mem_copy,
    .del = mem_del,
    .head = mem_head,
    .list = mem_list,
    .destroy = mem_destroy,
};

int store_mem_open(struct store **out)
{
    if (!out)
        return -EINVAL;
    *out = NULL;
    struct mem_store *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    if (pthread_rwlock_init(&m->lock, NULL) != 0) {
        free(m);
        return -ENOMEM;
    }
    m->base.ops = &mem_ops;
    *out = &m->base;
    return 0;
}
