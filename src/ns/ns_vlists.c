/*
 * ns_vlists: the version lists read in the last ttl, parsed, shared by every lookup below one
 * DIR/.versions/NAME (ns_int.h), and the plain read of one list (ns.h's ns_vlist_read). A leaf
 * of the namespace: ns.c makes, frees and invalidates the cache, ns_versions.c reads through
 * it; it calls no other file of ns.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/util/clock.h"
#include "h5osfs/util/strmap.h"
#include "h5osfs/schema/vlist.h"
#include "ns_int.h"

#define VLISTS_PRUNE_AT 256 /* lists kept before expired ones are dropped */

struct ns_vlists {
    void (*on_removing)(void *ctx, const char *domain); /* set before any lookup */
    void *removing_ctx;
    double ttl;
    pthread_mutex_t lock; /* guards map and every refs */
    struct strmap *map;   /* domain path -> struct shared_vlist */
};

int ns_vlists_new(double ttl, struct ns_vlists **out)
{
    struct ns_vlists *c = calloc(1, sizeof *c);
    if (c && (c->map = strmap_new()) != NULL && pthread_mutex_init(&c->lock, NULL) == 0) {
        c->ttl = ttl;
        *out = c;
        return 0;
    }
    if (c)
        strmap_free(c->map, NULL);
    free(c);
    return -ENOMEM;
}

static void shared_free(struct shared_vlist *s)
{
    vlist_free(&s->l);
    free(s);
}

void ns_vlists_release(struct ns_vlists *c, struct shared_vlist *s)
{
    pthread_mutex_lock(&c->lock);
    int last = --s->refs == 0;
    pthread_mutex_unlock(&c->lock);
    if (last)
        shared_free(s);
}

static void release_all(void *value)
{
    struct shared_vlist *s = value;
    if (--s->refs == 0) /* at the end: no reader left */
        shared_free(s);
}

void ns_vlists_free(struct ns_vlists *c)
{
    if (!c)
        return;
    strmap_free(c->map, release_all);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

struct shared_vlist *ns_vlists_get(struct ns_vlists *c, const char *domain)
{
    if (c->ttl <= 0)
        return NULL;
    pthread_mutex_lock(&c->lock);
    struct shared_vlist *s = strmap_get(c->map, domain);
    if (s && s->expires > clock_monotonic())
        s->refs++;
    else
        s = NULL;
    pthread_mutex_unlock(&c->lock);
    return s;
}

static int drop_if_expired(const char *key, void *value, void *ctx)
{
    (void)key;
    struct shared_vlist *s = value;
    if (s->expires > *(double *)ctx)
        return 0;
    if (--s->refs == 0) /* under the lock; a reader's reference keeps it */
        shared_free(s);
    return 1;
}

void ns_vlists_remember(struct ns_vlists *c, const char *domain, struct shared_vlist *s)
{
    if (c->ttl <= 0)
        return;
    struct shared_vlist *old = NULL;
    double now = clock_monotonic();
    pthread_mutex_lock(&c->lock);
    if (strmap_count(c->map) >= VLISTS_PRUNE_AT)
        strmap_filter(c->map, drop_if_expired, &now);
    s->expires = now + c->ttl;
    s->refs++;
    if (strmap_put(c->map, domain, s, (void **)&old) != 0) {
        s->refs--; /* not kept: caching is an optimisation */
        old = NULL;
    }
    int last_old = old && --old->refs == 0;
    pthread_mutex_unlock(&c->lock);
    if (last_old)
        shared_free(old);
}

static void forget_list(struct ns_vlists *c, const char *domain)
{
    pthread_mutex_lock(&c->lock);
    struct shared_vlist *s = strmap_remove(c->map, domain);
    int last = s && --s->refs == 0;
    pthread_mutex_unlock(&c->lock);
    if (last)
        shared_free(s);
}

void ns_vlists_invalidate(struct ns_vlists *c, const char *path)
{
    char domain[STORE_KEY_MAX + 2];
    if (!c || c->ttl <= 0)
        return;
    forget_list(c, path); /* a commit of the domain at path appends to its list */
    if (schema_version_domain_of(path, domain, sizeof domain) == 0)
        forget_list(c, domain); /* a name changed */
}

void ns_vlists_on_removing(struct ns_vlists *c, void (*fn)(void *ctx, const char *domain),
                           void *ctx)
{
    c->on_removing = fn;
    c->removing_ctx = ctx;
}

/* A list read from the store with versions whose collection is unfinished (state in the
 * bucket: another mount's, a killed daemon's): whoever collects is told. */
void ns_vlists_tell_removing(struct ns_vlists *c, const char *domain, const struct vlist *l)
{
    for (size_t i = 0; c->on_removing && i < l->n_entries; i++)
        if (!l->entries[i].error && l->entries[i].state == VLIST_REMOVING) {
            c->on_removing(c->removing_ctx, domain);
            return;
        }
}

int ns_vlist_read(struct store *store, const char *key, struct vlist *l, char *etag, char *why,
                  size_t why_len)
{
    struct store_stat st;
    struct store_buf buf = { 0 };
    int rc = etag ? store_head(store, key, &st) : 0;
    if (rc == 0)
        rc = store_get(store, key, VLIST_MAX_BYTES, &buf);
    if (rc == -EFBIG) {
        snprintf(why, why_len, "larger than %u bytes", VLIST_MAX_BYTES);
        rc = -EINVAL;
    } else if (rc == 0 && vlist_parse((const char *)buf.data, buf.len, l, why, why_len) != 0) {
        rc = -EINVAL;
    }
    store_buf_free(&buf);
    if (rc == 0 && etag)
        snprintf(etag, sizeof st.etag, "%s", st.etag);
    return rc;
}
