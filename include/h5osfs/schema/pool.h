/*
 * pool: which version pool a pooled chunk table may name (doc/versions.md §3). A layout's
 * "h5osfs": {"pool": P} claims that the table's entries are objects of pool P. The claim holds
 * only for a domain's own pool, the one its version list names, and only where that domain's
 * chunks may live in it:
 *   - a kept version, DIR/.versions/NAME/<x>: the pool of DIR/NAME's list;
 *   - the current domain DIR/NAME in ref mode (versions_current=ref): its object's h5osfs
 *     member says so and names the root being read; again its list's pool.
 * Anything else naming a pool is refused, so that no bucket writer can point one domain's
 * datasets at another's objects. Rules only: the caller's get() fetches the objects.
 */
#ifndef H5OSFS_SCHEMA_POOL_H
#define H5OSFS_SCHEMA_POOL_H

#include <stddef.h>

struct schema_fetch {
    void *ctx;
    /* The object at key, at most max bytes, into *data (malloc'd: the caller frees it) and
     * *len. 0 or -errno. */
    int (*get)(void *ctx, const char *key, size_t max, unsigned char **data, size_t *len);
};

/*
 * Whether claimed is the pool the datasets of domain_path (a path: "/DIR/NAME" or
 * "/DIR/.versions/NAME/<x>"), whose root being read is root_id, may name. 0 (yes), -EINVAL
 * (no, or an object needed to tell cannot be read or used: why says which), -ENOMEM.
 */
int schema_pool_check(const char *domain_path, const char *root_id, const char *claimed,
                      const struct schema_fetch *fetch, char *why, size_t why_len);

#endif
