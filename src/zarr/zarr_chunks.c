/* zarr_chunks: an array's chunk objects, listed once, and the codec its stored chunks are in
 * (zarr_int.h). */
#include "zarr_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/util/log.h"

struct listing {
    struct zarr_array *a;
    const char *domain;
    size_t prefix_len;
};

int zarr_chunk_listed(struct zarr_array *a, const char *domain, size_t prefix_len, const char *key,
                      const struct store_stat *st)
{
    const char *rel = key + prefix_len;
    uint64_t idx[HJSON_DIMS_MAX];
    char name[HJSON_DIMS_MAX * 21], want[STORE_KEY_MAX + 1];
    if (strchr(rel, '.') != NULL)
        return 0; /* .dataset.json */
    const char *slash = strchr(rel, '/');
    if (zarr_parse_index(a, slash ? slash + 1 : rel, '_', idx) != 0 ||
        schema_chunk_key(
            a->id, idx, a->rank ? a->rank : 1,
            a->partitions ? schema_chunk_partition(idx, a->rank ? a->rank : 1, a->partitions) : -1,
            want, sizeof want) != 0 ||
        strcmp(want, key) != 0 || zarr_index_name(a, idx, name, sizeof name) != 0) {
        log_info("%s: zarr view: %s is no chunk of dataset %s's grid: not shown", domain, key,
                 a->id);
        return 0;
    }
    return zarr_chunk_put(a, name, key, 0, st ? st->size : STORE_SIZE_UNKNOWN, 0);
}

static int list_one(void *ctx, const char *key, const struct store_stat *st)
{
    struct listing *l = ctx;
    return zarr_chunk_listed(l->a, l->domain, l->prefix_len, key, st);
}

int zarr_list_chunks(struct store *store, const char *domain, struct zarr_array *a)
{
    char prefix[STORE_KEY_MAX + 1];
    if (a->listed)
        return 0;
    if (a->table_failed)
        return -EIO;
    if (a->link == ZARR_LINK_TABLE || a->link == ZARR_LINK_POOL) {
        int rc = zarr_linked_table(store, domain, a);
        a->table_failed = rc == -EIO; /* logged once: each later read would log it again */
        return rc;
    }
    int rc = schema_obj_key(a->id, prefix, sizeof prefix);
    if (rc != 0)
        return -EIO;
    char *last = strrchr(prefix, '/');
    last[1] = '\0';
    struct listing l = { .a = a, .domain = domain, .prefix_len = strlen(prefix) };
    rc = store_list_keys(store, prefix, list_one, &l);
    if (rc != 0) {
        if (rc != -ENOMEM)
            log_warn("%s: zarr view: listing of %s: %s", domain, prefix, strerror(-rc));
        return rc == -ENOMEM ? rc : -EIO;
    }
    a->listed = 1;
    return 0;
}

int zarr_is_zlib_stream(const unsigned char *b, size_t len)
{
    return len >= 2 && (b[0] & 0x0f) == 8 && (b[0] >> 4) <= 7 && ((b[0] << 8) | b[1]) % 31 == 0;
}

static int first_chunk(const char *key, void *value, void *ctx)
{
    (void)key;
    const struct zarr_chunk **first = ctx;
    if (!*first)
        *first = value;
    return 0;
}

/* A gzip dataset's chunks are Blosc frames (HSDS) or zlib streams (HDF5's deflate, which
 * h5osfs's ingest keeps for the chunks wholly inside the dataset): numcodecs reads either as
 * stored, so chunk 0 (else any) decides which codec the array names, and the few others (edge
 * chunks the ingest re-encoded, a chunk HSDS rewrote) are re-encoded. */
int zarr_settle(struct store *store, const char *domain, struct zarr_array *a)
{
    const struct zarr_chunk *first = NULL;
    struct store_buf head;
    int rc = zarr_list_chunks(store, domain, a);
    if (rc != 0 || a->settled)
        return rc;
    char origin[2 * HJSON_DIMS_MAX] = "0"; /* "0.0.0": whole, where an edge chunk may not be */
    for (int k = 1; k < a->rank; k++)
        strcat(origin, ".0");
    if (!(first = strmap_get(a->chunks, origin)))
        strmap_filter(a->chunks, first_chunk, &first);
    rc = first ? store_get_range(store, first->key, first->off, 16, &head) : -ENOENT;
    if (rc == 0 && zarr_is_zlib_stream(head.data, head.len))
        a->serve = ZARR_SERVE_ZLIB;
    if (rc == 0)
        store_buf_free(&head);
    if (rc != 0 && rc != -ENOENT) {
        if (rc != -ENOMEM)
            log_warn("%s: zarr view: first chunk of %s: %s", domain, a->id, strerror(-rc));
        return rc == -ENOMEM ? rc : -EIO;
    }
    a->settled = 1;
    return 0;
}
