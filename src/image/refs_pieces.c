/* refs_pieces: what every reference layout builds with: the keys its file_uris name (one
 * table of them per dataset) and its pieces, sorted and kept one per place. See refs.c. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/util/grow.h"
#include "h5osfs/util/strmap.h"
#include "h5osfs/util/why.h"
#include "refs_int.h"

/* ---- file_uri -> key ---- */

/* in_pool: uri was checked to be an object of the domain's own version pool (a version's
 * table), the one object of a domain that a layout may name besides its root's. */
static int uri_key(struct builder *b, const char *uri, int in_pool, char **key, char *why,
                   size_t why_len)
{
    const char *k;
    int rc = schema_linked_uri_key(uri, b->src->bucket_name, b->root_id, in_pool, &k);
    if (rc == 0 && store_key_check(k) != 0)
        rc = -EINVAL;
    if (rc == -EPERM)
        return why_reject(why, why_len,
                          "file_uri \"%s\" names an object of a domain, not an HDF5 file", uri);
    if (rc != 0)
        return why_reject(why, why_len, "file_uri \"%s\" is not a key of this bucket", uri);
    *key = strdup(k);
    return *key ? 0 : -ENOMEM;
}

int refs_add_uri(struct builder *b, struct image_dataset *ds, const char *uri, int in_pool,
                 uint32_t *index, char *why, size_t why_len)
{
    char *key = NULL, *both = NULL;
    int rc = uri_key(b, uri, in_pool, &key, why, why_len);
    if (rc != 0)
        return rc;
    /* by a map, not a search of ds->uris: a version's table names up to a million distinct
     * pool objects, and a search per entry made building it quadratic (1e5: ~10 s CPU) */
    if (!b->uri_index && !(b->uri_index = strmap_new()))
        rc = -ENOMEM;
    if (rc == 0 && asprintf(&both, "%s\n%s", ds->id ? ds->id : "", key) < 0)
        rc = -ENOMEM;
    uintptr_t found = rc == 0 ? (uintptr_t)strmap_get(b->uri_index, both) : 0;
    if (found) {
        *index = (uint32_t)(found - 1);
        free(both);
        free(key);
        return 0;
    }
    char **n = rc == 0 ? grow_array(ds->uris, &ds->cap_uris, ds->n_uris + 1, sizeof *n, 4) : NULL;
    if (n)
        ds->uris = n;
    if (!n || strmap_put(b->uri_index, both, (void *)(uintptr_t)(ds->n_uris + 1), NULL) != 0) {
        free(both);
        free(key);
        return -ENOMEM;
    }
    free(both);
    ds->uris[ds->n_uris] = key;
    *index = (uint32_t)ds->n_uris++;
    return 0;
}

int refs_json_u64(const json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return -EINVAL;
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

/* ---- the pieces of a dataset ---- */

int refs_add_piece(struct piece_list *l, struct ref_piece piece, char *why, size_t why_len)
{
    struct image_dataset *ds = l->ds;
    if (ds->n_pieces == l->cap) {
        if (l->cap >= REF_GRID_MAX)
            return why_reject(why, why_len, "more than %u linked chunks", REF_GRID_MAX);
        struct ref_piece *n = grow_array(ds->pieces, &l->cap, l->cap + 1, sizeof *n, 64);
        if (!n)
            return -ENOMEM;
        ds->pieces = n;
    }
    ds->pieces[ds->n_pieces++] = piece;
    return 0;
}

static int cmp_u64(uint64_t x, uint64_t y)
{
    return x < y ? -1 : x > y;
}

/* By place, then by source, so that two entries for one place ("0" and "00" in a chunk map)
 * give the same result whatever order they come in. */
static int by_place(const void *a, const void *b)
{
    const struct ref_piece *x = a, *y = b;
    int c = cmp_u64(x->chunk, y->chunk);
    c = c ? c : cmp_u64(x->sub, y->sub);
    c = c ? c : cmp_u64(x->uri, y->uri);
    c = c ? c : cmp_u64(x->off, y->off);
    return c ? c : cmp_u64(x->size, y->size);
}

/* Sort the pieces, keep one per place, and list the chunks that have any, in order. */
int refs_present_chunks(struct image_dataset *ds, uint64_t **out, size_t *n)
{
    size_t w = 0;
    if (ds->n_pieces > 1)
        qsort(ds->pieces, ds->n_pieces, sizeof *ds->pieces, by_place);
    for (size_t i = 0; i < ds->n_pieces; i++)
        if (w == 0 || ds->pieces[i].chunk != ds->pieces[w - 1].chunk ||
            ds->pieces[i].sub != ds->pieces[w - 1].sub)
            ds->pieces[w++] = ds->pieces[i];
    ds->n_pieces = w;
    *n = 0;
    *out = malloc((w ? w : 1) * sizeof **out);
    if (!*out)
        return -ENOMEM;
    for (size_t i = 0; i < w; i++)
        if (*n == 0 || (*out)[*n - 1] != ds->pieces[i].chunk)
            (*out)[(*n)++] = ds->pieces[i].chunk;
    return 0;
}
