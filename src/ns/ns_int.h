/*
 * ns_int.h: the files of the namespace and what they share. ns_route.c holds ns.h's lookups
 * and sends a path with a .versions component to ns_versions.c, any other to ns.c (the
 * bucket's namespace); ns_versions.c asks ns.c about the domain and folder a version belongs
 * to, never the reverse; ns_vlists.c (the parsed version lists) calls no other file.
 */
#ifndef H5OSFS_NS_INT_H
#define H5OSFS_NS_INT_H

#include "h5osfs/ns/ns.h"
#include "h5osfs/schema/vlist.h"

/* ---- ns.c: the bucket's namespace (paths without a .versions component) ---- */

/* ns_stat_as and ns_readdir for a path without a .versions component. */
int ns_plain_stat_as(struct ns *ns, const char *path, const char *user, struct ns_info *out);
int ns_plain_readdir(struct ns *ns, const char *path, struct ns_dir *out);

struct store *ns_store_of(const struct ns *ns);
const char *ns_user_of(const struct ns *ns); /* the mount's HSDS user */
/* What user may do with the domain object dom says (as HSDS decides, §9; NULL user: default's
 * read). */
unsigned ns_domain_rights(const struct ns *ns, const struct schema_domain *dom, const char *user);

/* Report a problem with key once (per ns), not on every lookup. */
void ns_warn_once(struct ns *ns, const char *key, const char *what, const char *why);

struct ns_vlists *ns_vlists_of(const struct ns *ns);

/* ---- ns_versions.c: the namespace below DIR/.versions ---- */

/* ns_stat_as and ns_readdir for a path with a .versions component. */
int ns_versions_stat(struct ns *ns, const char *path, const char *user, struct ns_info *out);
int ns_versions_readdir(struct ns *ns, const char *path, struct ns_dir *out);

/* ---- ns_vlists.c ---- */

/* The version lists read in the last ttl, parsed, shared by every lookup below one
 * DIR/.versions/NAME (so that `ls -l` of 1,000 versions reads and parses the list once, not
 * once per name). ttl <= 0: nothing kept. */
struct ns_vlists;
int ns_vlists_new(double ttl, struct ns_vlists **out);
void ns_vlists_free(struct ns_vlists *c);
/* A change at path (a domain, or a path below its .versions) makes its list be read again. */
void ns_vlists_invalidate(struct ns_vlists *c, const char *path);

/* One parsed list, shared: the cache holds a reference, each reader one while it reads. */
struct shared_vlist {
    struct vlist l;
    unsigned refs; /* under the cache's lock */
    double expires;
};
/* The cached list of domain with a reference for the caller, or NULL (none, or expired). */
struct shared_vlist *ns_vlists_get(struct ns_vlists *c, const char *domain);
/* Keep s (read now, refs 1: the caller's) as domain's list for ttl; the cache takes a
 * reference of its own (none when the ttl is 0 or memory runs out: caching is optional). */
void ns_vlists_remember(struct ns_vlists *c, const char *domain, struct shared_vlist *s);
/* Give back a reference; the last one frees the list. */
void ns_vlists_release(struct ns_vlists *c, struct shared_vlist *s);
/* Who finishes versions whose collection is unfinished (ns.h's ns_on_removing), and telling
 * it when list l of domain, just read from the store, has such an entry. */
void ns_vlists_on_removing(struct ns_vlists *c, void (*fn)(void *ctx, const char *domain),
                           void *ctx);
void ns_vlists_tell_removing(struct ns_vlists *c, const char *domain, const struct vlist *l);

#endif
