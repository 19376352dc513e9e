/* ns_int.h: what ns.c shares with ns_versions.c (the namespace below DIR/.versions). */
#ifndef H5OSFS_NS_INT_H
#define H5OSFS_NS_INT_H

#include "h5osfs/ns/ns.h"

struct store *ns_store_of(const struct ns *ns);
const char *ns_user_of(const struct ns *ns); /* the mount's HSDS user */
/* What user may do with the domain object dom says (as HSDS decides, §9; NULL user: default's
 * read). */
unsigned ns_domain_rights(const struct ns *ns, const struct schema_domain *dom, const char *user);

/* Report a problem with key once (per ns), not on every lookup. */
void ns_warn_once(struct ns *ns, const char *key, const char *what, const char *why);

/* ns_stat_as and ns_readdir for a path with a .versions component (ns_versions.c). */
int ns_versions_stat(struct ns *ns, const char *path, const char *user, struct ns_info *out);
int ns_versions_readdir(struct ns *ns, const char *path, struct ns_dir *out);

/* The version lists read in the last ttl, parsed, shared by every lookup below one
 * DIR/.versions/NAME (so that `ls -l` of 1,000 versions reads and parses the list once, not
 * once per name). ttl <= 0: nothing kept. */
struct ns_vlists;
int ns_vlists_new(double ttl, struct ns_vlists **out);
void ns_vlists_free(struct ns_vlists *c);
/* A change at path (a domain, or a path below its .versions) makes its list be read again. */
void ns_vlists_invalidate(struct ns_vlists *c, const char *path);
struct ns_vlists *ns_vlists_of(const struct ns *ns);

#endif
