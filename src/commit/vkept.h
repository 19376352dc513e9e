/* vkept: the chunks an r+ of a versions_current=ref domain left in the pool, per dataset
 * (the ingest adds them through versions_kept_add, versions.h), for the new version's tables. */
#ifndef H5OSFS_COMMIT_VKEPT_H
#define H5OSFS_COMMIT_VKEPT_H

#include <stddef.h>
#include <stdint.h>

struct versions_kept;

struct kept_list {
    uint64_t *idx; /* n indexes of rank coordinates each */
    size_t n, cap;
    int rank;
};

/* The chunks kept in the pool for the dataset whose JSON key under the new root is json_key,
 * or NULL (none, or kept NULL). Valid until kept is freed; read once the ingest is over. */
const struct kept_list *versions_kept_of(const struct versions_kept *kept, const char *json_key);

#endif
