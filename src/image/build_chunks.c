/*
 * build_chunks: which chunk objects of a dataset exist. Listed per dataset, or ahead for every
 * dataset of a root while the objects are fetched (one listing of db/A-B/); a v1 dataset's
 * chunks cannot be listed, so its whole grid is declared (build.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "build.h"
#include "h5osfs/util/grow.h"
#include "h5osfs/schema/hjson.h"
#include "h5osfs/util/log.h"
#include "h5osfs/util/pfor.h"

int build_chunk_list_add(struct chunk_list *l, uint64_t linear)
{
    if (l->n == l->cap) {
        uint64_t *nv = grow_array(l->v, &l->cap, l->cap + 1, sizeof *nv, 256);
        if (!nv)
            return -ENOMEM;
        l->v = nv;
    }
    l->v[l->n++] = linear;
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* "3_0_12" (after the dataset prefix and any "pN/") -> linear index; 0, 1 (outside), <0 bad. */
int build_parse_index(const struct image_dataset *ds, const char *s, uint64_t *linear)
{
    *linear = 0;
    for (int k = 0; k < ds->rank; k++) {
        char *end;
        if (*s < '0' || *s > '9')
            return -EINVAL;
        unsigned long long v = strtoull(s, &end, 10);
        if (*end != (k + 1 < ds->rank ? '_' : '\0'))
            return -EINVAL;
        if (v >= ds->grid[k])
            return 1; /* beyond the current shape: not part of this version */
        *linear = *linear * ds->grid[k] + v;
        s = end + 1;
    }
    return 0;
}

static const char *index_part(const struct image_dataset *ds, const char *rel)
{
    if (ds->partition_count > 0 && rel[0] == 'p') {
        const char *slash = strchr(rel, '/');
        return slash ? slash + 1 : NULL;
    }
    return strchr(rel, '/') ? NULL : rel;
}

struct chunk_walk {
    struct builder *b;
    const struct image_dataset *ds;
    struct chunk_list *out;
    size_t plen;
    int bad;
};

static int chunk_key_found(void *ctx, const char *key, const struct store_stat *st)
{
    (void)st;
    struct chunk_walk *w = ctx;
    const char *rel = key + w->plen, *idx = index_part(w->ds, rel);
    uint64_t linear;
    if (strcmp(rel, ".dataset.json") == 0)
        return 0;
    int rc = idx ? build_parse_index(w->ds, idx, &linear) : -EINVAL;
    if (rc < 0 && !w->bad++)
        log_warn("%s: dataset %s: key %s is not a chunk of its grid: ignored", w->b->domain_path,
                 w->ds->path, key);
    return rc == 0 ? build_chunk_list_add(w->out, linear) : 0;
}

#define BITMAP_GRID_MAX (1ull << 30) /* chunks of a grid sorted through a bitmap */

/* The listed indexes in order, each once. A grid of at most BITMAP_GRID_MAX chunks and not
 * much larger than the list goes through a bitmap of the grid (a million chunks: 125 KB and a
 * pass, where a sort took 12% of the build and a second array); others are sorted. */
static int sort_unique(const struct image_dataset *ds, struct chunk_list *l)
{
    if (l->n == 0)
        return 0; /* nothing listed: v may be NULL, which qsort must not get */
    uint64_t grid = 1;
    for (int k = 0; k < ds->rank && grid <= BITMAP_GRID_MAX; k++)
        grid = ds->grid[k] && grid > BITMAP_GRID_MAX / ds->grid[k] ? BITMAP_GRID_MAX + 1
                                                                   : grid * ds->grid[k];
    uint64_t *bits = grid <= BITMAP_GRID_MAX && grid / 64 <= l->n ? calloc(grid / 64 + 1, 8) : NULL;
    size_t u = 0;
    if (!bits) {
        qsort(l->v, l->n, sizeof *l->v, cmp_u64);
        for (size_t i = 0; i < l->n; i++)
            if (u == 0 || l->v[i] != l->v[u - 1])
                l->v[u++] = l->v[i];
    } else {
        for (size_t i = 0; i < l->n; i++)
            bits[l->v[i] / 64] |= UINT64_C(1) << (l->v[i] % 64);
        for (uint64_t w = 0; w <= grid / 64; w++)
            for (uint64_t word = bits[w]; word; word &= word - 1)
                l->v[u++] = w * 64 + (uint64_t)__builtin_ctzll(word);
        free(bits);
    }
    l->n = u;
    return 0;
}

/* Every chunk of a v1 dataset's grid: v1 chunk keys share no prefix and cannot be listed
 * (spec §11), so each is declared and a missing one reads as the fill value. -EFBIG beyond
 * V1_PROBE_MAX. */
int build_all_chunks(const struct image_dataset *ds, struct chunk_list *out)
{
    uint64_t total = 1;
    for (int k = 0; k < ds->rank; k++)
        total = ds->grid[k] && total <= V1_PROBE_MAX / ds->grid[k] ? total * ds->grid[k]
                                                                   : V1_PROBE_MAX + 1;
    if (total > V1_PROBE_MAX)
        return -EFBIG;
    for (uint64_t i = 0; i < total; i++)
        if (build_chunk_list_add(out, i) != 0)
            return -ENOMEM;
    return 0;
}

/* The dataset's chunk objects, as sorted linear indexes: one walk of its key prefix, each key
 * parsed as it comes (a million chunks cost their indexes, not a million listing entries); for
 * a v1 id every chunk of the grid (-EFBIG when too many). */
int build_dataset_chunks(struct builder *b, const struct image_dataset *ds, struct chunk_list *out)
{
    if (schema_id_version(ds->id) == 1)
        return build_all_chunks(ds, out);
    struct chunk_walk w = { b, ds, out, strlen(ds->key_prefix), 0 };
    int rc = store_list_keys(b->src->store, ds->key_prefix, chunk_key_found, &w);
    uint64_t *fit = rc == 0 && out->n > 0 && out->n < out->cap
                        ? realloc(out->v, out->n * sizeof *out->v)
                        : NULL;
    if (fit) {
        out->v = fit; /* held until the chunks are declared, at the end of the build */
        out->cap = out->n;
    }
    if (rc == 0 && out->n > 1)
        rc = sort_unique(ds, out);
    return rc == -ENOMEM ? rc : rc ? -EIO : 0;
}

int build_extent_chunks(struct builder *b, const struct image_dataset *ds, struct chunk_list *out)
{
    if (b->unlisted && schema_id_version(ds->id) == 2) {
        int rc = build_all_chunks(ds, out);
        if (rc != -EFBIG)
            return rc;
    }
    return build_dataset_chunks(b, ds, out);
}

int build_chunk_key_prefix(const char *dset_id, int rank, char *buf, size_t len)
{
    uint64_t zero[IMAGE_MAX_RANK] = { 0 };
    int rc = schema_chunk_key(dset_id, zero, rank, -1, buf, len);
    if (rc != 0)
        return rc;
    if (schema_id_version(dset_id) == 1) {
        buf[0] = '\0'; /* each v1 chunk key starts with its own hash: no prefix */
        return 0;
    }
    char *cut = strrchr(buf, '/');
    if (!cut)
        return -EINVAL;
    cut[1] = '\0'; /* chunk 0's key up to its index string */
    return 0;
}

/* ---- listing ahead ---- */

/* The grid and key prefix of dataset o from its JSON alone (a simple shape, a chunked layout
 * of the same rank, a v2 id): what its listing needs. 0, or -1 when the build decides. */
static int listing_grid(struct builder *b, const struct build_obj *o, struct image_dataset *ds)
{
    const json_t *dims = json_object_get(json_object_get(o->json, "shape"), "dims");
    const json_t *layout = json_object_get(o->json, "layout");
    const json_t *cdims = json_object_get(layout, "dims");
    const char *ref = hjson_text(json_object_get(
        json_object_get(json_object_get(o->json, "creationProperties"), "layout"), "class"));
    size_t rank = json_array_size(dims);
    if (o->cls != 'd' || schema_id_version(o->id) != 2 || (ref && strstr(ref, "_REF")) ||
        rank < 1 || rank > IMAGE_MAX_RANK || json_array_size(cdims) != rank)
        return -1;
    for (size_t k = 0; k < rank; k++) {
        json_int_t d = json_integer_value(json_array_get(dims, k));
        json_int_t c = json_integer_value(json_array_get(cdims, k));
        if (d < 0 || c < 1)
            return -1;
        ds->grid[k] = ((uint64_t)d + (uint64_t)c - 1) / (uint64_t)c;
    }
    ds->rank = (int)rank;
    ds->partition_count = (int)json_integer_value(json_object_get(layout, "partition_count"));
    ds->path = (char *)build_path(b, o); /* borrowed, for log lines: ds is not kept */
    if (!ds->path)
        return -1;
    return build_chunk_key_prefix(o->id, ds->rank, ds->key_prefix, sizeof ds->key_prefix) ? -1 : 0;
}

/* ---- one listing of the whole root (db/A-B/), while the objects are fetched ---- */

/* More chunk keys than fit in one S3 listing page (1,000 keys, with room left for the JSON
 * keys listed among them): the root is not listed further, nor any dataset
 * (builder.unlisted). Listing them all cost one request per 1,000 chunks at every open. */
#define ROOT_LISTING_KEYS 900

int build_root_listing_add(struct root_listing *rl, const char *key)
{
    if (rl->n == ROOT_LISTING_KEYS)
        return 1; /* too many: the walk stops, the listing is not used */
    if (rl->n == rl->cap) {
        char **bigger = grow_array(rl->keys, &rl->cap, rl->cap + 1, sizeof *bigger, 256);
        if (!bigger)
            return -ENOMEM;
        rl->keys = bigger;
    }
    return (rl->keys[rl->n] = strdup(key)) ? (rl->n++, 0) : -ENOMEM;
}

static int keep_root_key(void *ctx, const char *key, const struct store_stat *st)
{
    (void)st;
    size_t len = strlen(key);
    if (len > 5 && strcmp(key + len - 5, ".json") == 0)
        return 0; /* objects are fetched by id */
    return build_root_listing_add(ctx, key);
}

static void *root_lister(void *arg)
{
    struct root_listing *rl = arg;
    int rc = store_list_keys(rl->store, rl->prefix, keep_root_key, rl);
    rl->complete = rc == 0;
    rl->too_many = rc == 1;
    return NULL;
}

void build_root_listing_init(struct store *store, const char *root_id, struct root_listing *rl)
{
    memset(rl, 0, sizeof *rl);
    rl->store = store;
    snprintf(rl->prefix, sizeof rl->prefix, "db/%.8s-%.8s/", root_id + 2, root_id + 11);
}

void build_root_listing_start(struct builder *b, struct root_listing *rl)
{
    if (rl->complete || rl->too_many)
        return; /* listed before the build (image_cache_key) */
    build_root_listing_init(b->src->store, b->root_id, rl);
    if (b->src->requests <= 1 || schema_id_version(b->root_id) != 2)
        return;
    rl->started = pthread_create(&rl->thread, NULL, root_lister, rl) == 0;
}

void build_root_listing_end(struct root_listing *rl)
{
    if (rl->started)
        pthread_join(rl->thread, NULL);
    rl->started = 0;
    for (size_t i = 0; i < rl->n; i++)
        free(rl->keys[i]);
    free(rl->keys);
    rl->keys = NULL;
    rl->n = rl->cap = 0;
}

/* The datasets' chunks from the root listing: every dataset with a grid is listed (with no
 * chunks when none of the keys is its). */
static void lists_from_root(struct builder *b, struct build_obj **objs, struct image_dataset *grids,
                            size_t n, const struct root_listing *rl)
{
    struct strmap *by_prefix = strmap_new();
    struct chunk_list *lists = calloc(n ? n : 1, sizeof *lists);
    for (size_t i = 0; by_prefix && lists && i < n; i++)
        if (strmap_put(by_prefix, grids[i].key_prefix, (void *)(uintptr_t)(i + 1), NULL) != 0)
            goto out;
    for (size_t k = 0; by_prefix && lists && k < rl->n; k++) {
        const char *key = rl->keys[k], *rel = key;
        for (int slashes = 0; slashes < 4 && rel; slashes++)
            rel = strchr(rel, '/') ? strchr(rel, '/') + 1 : NULL;
        if (!rel)
            continue;
        char prefix[STORE_KEY_MAX + 1];
        snprintf(prefix, sizeof prefix, "%.*s", (int)(rel - key), key);
        uintptr_t i = (uintptr_t)strmap_get(by_prefix, prefix);
        struct chunk_walk w = { b, &grids[i ? i - 1 : 0], &lists[i ? i - 1 : 0], rel - key, 0 };
        if (i && chunk_key_found(&w, key, NULL) != 0)
            goto out;
    }
    for (size_t i = 0; lists && i < n; i++) {
        if (sort_unique(&grids[i], &lists[i]) != 0)
            continue;
        objs[i]->listed = lists[i].v;
        objs[i]->n_listed = lists[i].n;
        objs[i]->listed_rank = grids[i].rank;
        memcpy(objs[i]->listed_grid, grids[i].grid, sizeof objs[i]->listed_grid);
        objs[i]->listed_ok = 1;
        lists[i].v = NULL;
    }
out:
    for (size_t i = 0; lists && i < n; i++)
        free(lists[i].v);
    free(lists);
    strmap_free(by_prefix, NULL);
}

struct list_job {
    struct builder *b;
    struct build_obj **objs;
    struct image_dataset *grids;
};

static void list_one(void *ctx, size_t i)
{
    struct list_job *j = ctx;
    struct build_obj *o = j->objs[i];
    struct chunk_list l = { 0 };
    if (build_dataset_chunks(j->b, &j->grids[i], &l) != 0) {
        free(l.v);
        return;
    }
    o->listed = l.v;
    o->n_listed = l.n;
    o->listed_rank = j->grids[i].rank;
    memcpy(o->listed_grid, j->grids[i].grid, sizeof o->listed_grid);
    o->listed_ok = 1;
}

int build_list_ahead(struct builder *b, struct root_listing *rl)
{
    if (rl->started)
        pthread_join(rl->thread, NULL);
    rl->started = 0;
    if (rl->too_many) {
        b->unlisted = 1;
        b->img->unlisted = 1;
        return 0;
    }
    if (b->src->requests <= 1 && !rl->complete)
        return 0;
    struct build_obj **objs = calloc(b->n_objs ? b->n_objs : 1, sizeof *objs);
    struct image_dataset *grids = calloc(b->n_objs ? b->n_objs : 1, sizeof *grids);
    size_t n = 0;
    if (!objs || !grids) {
        free(objs);
        free(grids);
        return -ENOMEM;
    }
    for (size_t i = 0; i < b->n_objs; i++)
        if (listing_grid(b, &b->objs[i], &grids[n]) == 0)
            objs[n++] = &b->objs[i];
    if (rl->complete) {
        lists_from_root(b, objs, grids, n, rl);
    } else {
        struct list_job job = { b, objs, grids };
        pfor(n, b->src->requests, list_one, &job);
    }
    free(objs);
    free(grids);
    return 0;
}

int build_take_listed(struct build_obj *o, const struct image_dataset *ds, struct chunk_list *out)
{
    if (!o->listed_ok || o->listed_rank != ds->rank ||
        memcmp(o->listed_grid, ds->grid, (size_t)ds->rank * sizeof *ds->grid) != 0)
        return 0;
    free(out->v);
    *out = (struct chunk_list){ o->listed, o->n_listed, o->n_listed };
    o->listed = NULL;
    o->listed_ok = 0;
    return 1;
}

int build_list_chunks(struct builder *b, const struct image_dataset *ds, uint64_t **v, size_t *n)
{
    struct chunk_list l = { 0 };
    int rc = build_dataset_chunks(b, ds, &l);
    if (rc != 0) {
        free(l.v);
        return rc;
    }
    *v = l.v;
    *n = l.n;
    return 0;
}

int build_all_chunks_nonzero(const struct image_dataset *ds)
{
    for (int k = 0; k < ds->rank; k++)
        if (ds->grid[k] == 0)
            return 0;
    return 1;
}
