/* commit_int.h: what the files of a commit share (commit.c the new root, commit_domain.c the
 * domain object and its swap, commit_collect.c what the swap leaves unnamed, commit_settle.c
 * an interrupted commit, commit_recover.c the journal at mount). */
#ifndef H5OSFS_COMMIT_INT_H
#define H5OSFS_COMMIT_INT_H

#include <jansson.h>

#include "h5osfs/commit/commit.h"
#include "h5osfs/commit/versions.h"
#include "h5osfs/store/store.h"

/* What a versioned commit settled: the version kept (vroot "" none) and what it said. */
struct kept_version {
    char vroot[SCHEMA_ID_BUF];
    struct versions_stats st;
};

/* Hand root ("" none) of domain, replaced by replaced_by, to the collector (logged if none). */
void commit_collect(const struct commit_ctx *c, const char *root, const char *domain,
                    const char *replaced_by);

/* Queue (or write) the .info.json of the new root. */
void commit_summarise(const struct commit_ctx *c, const char *root);

/* Collect a root a commit replaced unless it is a kept version's root. */
void commit_collect_replaced(const struct commit_ctx *c, const char *root, const char *domain,
                             const char *replaced_by);

/* After the swap: collect the root replaced (and in ref mode the root sealed into kv). */
void commit_collect_after_swap(const struct commit_ctx *c, const struct journal_rec *rec,
                               const char *old, int base_ref, const struct kept_version *kv,
                               int ref);

/* The domain object at key now: *now its etag ("" none), *dom its JSON. 0 or -errno. */
int commit_read_domain(const struct commit_ctx *c, const char *key, struct store_stat *now,
                       json_t **dom);

/* The root dom names ("" no domain): 0, -EIO (no domain object) or -EISDIR (a folder's). */
int commit_named_root(const char *path, const char *key, const json_t *dom, const char **root);

/* The h5osfs member of a versions_current=ref domain object, or NULL. */
json_t *commit_ref_member(const json_t *dom);

/* Log that rec's domain moved on to root now since it was staged; returns -ESTALE. */
int commit_lost_to_another_writer(const struct journal_rec *rec, const char *now);

/* The conditional put making root the domain; old gets the root replaced. 0 or -errno. */
int commit_swap_domain(const struct commit_ctx *c, const struct journal_rec *rec, const char *root,
                       int ref, char old[SCHEMA_ID_BUF], int *in_doubt);

/* The root the domain at path names now ("" none). 0 or -errno (unreadable). */
int commit_current_root(const struct commit_ctx *c, const char *path, char out[SCHEMA_ID_BUF]);

/* Whether the domain at path keeps versions with versions_current=ref (*keep: how many). */
int commit_ref_mode_for(const struct commit_ctx *c, const char *path, unsigned *keep);

/* An interrupted or in-doubt commit of rec->new_root: 1 finished, 0 undone, -errno unknown. */
int commit_settle_new_root(const struct commit_ctx *c, struct journal_rec *rec);

#endif
