/* zarr_consolidated: the root group's .zmetadata, Zarr v2's consolidated metadata (what
 * zarr.open_consolidated and xarray.open_zarr read first): every .zgroup, .zattrs and .zarray of
 * the tree in one file, so that opening a domain of many datasets is one read, not one per
 * metadata file. */
#include "zarr_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/util/dynbuf.h"

#define ZGROUP_JSON "{\"zarr_format\": 2}"

/* "KEY": TEXT (TEXT is already JSON: the file's own text, NaN tokens and all, which Python's
 * json reads as zarr's own writer leaves them). */
static void member(struct dynbuf *b, int *first, const char *dir, const char *name,
                   const char *text)
{
    char key[4096];
    int n = snprintf(key, sizeof key, "%s%s", dir, name);
    if (n < 0 || (size_t)n >= sizeof key) {
        dynbuf_append(b, NULL, SIZE_MAX); /* too long: a sticky error */
        return;
    }
    if (!*first)
        dynbuf_appends(b, ", ");
    *first = 0;
    hjson_dump_string(b, key, (size_t)n);
    dynbuf_appends(b, ": ");
    dynbuf_appends(b, text);
}

static int add(struct store *store, const char *domain, struct zarr_node *n, const char *dir,
               struct dynbuf *b, int *first, int depth)
{
    if (n->array) {
        char *zarray;
        size_t len;
        pthread_mutex_lock(&n->array->lock);
        int rc = zarr_settle(store, domain, n->array);
        if (rc == 0)
            rc = zarr_meta_zarray(n->array, 0, &zarray, &len);
        pthread_mutex_unlock(&n->array->lock);
        if (rc != 0)
            return rc;
        member(b, first, dir, ".zarray", zarray);
        member(b, first, dir, ".zattrs", n->zattrs);
        free(zarray);
        return 0;
    }
    member(b, first, dir, ".zgroup", ZGROUP_JSON);
    member(b, first, dir, ".zattrs", n->zattrs);
    for (size_t i = 0; i < n->n_kids && depth < 256; i++) {
        char *sub;
        if (asprintf(&sub, "%s%s/", dir, n->kids[i]->name) < 0)
            return -ENOMEM;
        int rc = add(store, domain, n->kids[i], sub, b, first, depth + 1);
        free(sub);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int zarr_consolidated(struct store *store, const char *domain, struct zarr_node *top, char **out,
                      size_t *len)
{
    struct dynbuf b = DYNBUF_INIT(DYNBUF_NO_MAX);
    int first = 1;
    dynbuf_appends(&b, "{\"metadata\": {");
    int rc = add(store, domain, top, "", &b, &first, 0);
    dynbuf_appends(&b, "}, \"zarr_consolidated_format\": 1}");
    if (rc != 0) {
        dynbuf_free(&b);
        return rc;
    }
    rc = dynbuf_take(&b, out, len);
    return rc == 0 ? 0 : -ENOMEM;
}
