/* vkept: the chunks a versions_current=ref r+ left in the pool, told by the ingest and read by
 * the version's tables (include/h5osfs/commit/versions.h, vkept.h). */
#include "vkept.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/commit/versions.h"
#include "h5osfs/schema/hjson.h"
#include "h5osfs/schema/schema.h"
#include "h5osfs/store/store.h"
#include "h5osfs/util/grow.h"
#include "h5osfs/util/strmap.h"

struct versions_kept {
    pthread_mutex_t lock;
    struct strmap *by_json_key; /* the dataset's JSON key under the new root -> kept_list */
};

int versions_kept_new(struct versions_kept **out)
{
    struct versions_kept *k = calloc(1, sizeof *k);
    if (k && !(k->by_json_key = strmap_new())) {
        free(k);
        k = NULL;
    }
    if (k && pthread_mutex_init(&k->lock, NULL) != 0) {
        strmap_free(k->by_json_key, NULL);
        free(k);
        k = NULL;
    }
    if (!k)
        return -ENOMEM;
    *out = k;
    return 0;
}

static void kept_list_free(void *v)
{
    struct kept_list *l = v;
    if (l)
        free(l->idx);
    free(l);
}

void versions_kept_free(struct versions_kept *k)
{
    if (!k)
        return;
    strmap_free(k->by_json_key, kept_list_free);
    pthread_mutex_destroy(&k->lock);
    free(k);
}

static int kept_append(struct kept_list *l, const uint64_t *idx, int rank)
{
    if (l->rank != rank)
        return -EINVAL;
    uint64_t *grown = grow_array(l->idx, &l->cap, l->n + 1, (size_t)rank * sizeof *grown, 64);
    if (!grown)
        return -ENOMEM;
    l->idx = grown;
    memcpy(l->idx + l->n * (size_t)rank, idx, (size_t)rank * sizeof *idx);
    l->n++;
    return 0;
}

int versions_kept_add(void *ctx, const char *dataset_id, const uint64_t *idx, int rank)
{
    struct versions_kept *k = ctx;
    char key[STORE_KEY_MAX + 1];
    if (rank < 1 || rank > HJSON_DIMS_MAX || schema_obj_key(dataset_id, key, sizeof key) != 0)
        return -EINVAL;
    pthread_mutex_lock(&k->lock);
    struct kept_list *l = strmap_get(k->by_json_key, key);
    int rc = 0;
    if (!l && (l = calloc(1, sizeof *l)) != NULL) {
        l->rank = rank;
        if (strmap_put(k->by_json_key, key, l, NULL) != 0) {
            free(l);
            l = NULL;
        }
    }
    rc = l ? kept_append(l, idx, rank) : -ENOMEM;
    pthread_mutex_unlock(&k->lock);
    return rc;
}

const struct kept_list *versions_kept_of(const struct versions_kept *kept, const char *json_key)
{
    if (!kept)
        return NULL;
    struct versions_kept *k = (struct versions_kept *)kept;
    pthread_mutex_lock(&k->lock);
    const struct kept_list *l = strmap_get(k->by_json_key, json_key);
    pthread_mutex_unlock(&k->lock);
    return l;
}
