/*
 * ns_route: ns.h's lookups. A path with a .versions component is a version's or a version
 * folder's (ns_versions.c), any other the bucket's (ns.c). Here, not in ns.c, so that
 * ns_versions.c, which asks ns.c about the domain and folder a version belongs to, is never
 * called back by it (tests/meson.build, --one-way).
 */
#include "h5osfs/schema/schema.h"
#include "ns_int.h"

int ns_stat_as(struct ns *ns, const char *path, const char *user, struct ns_info *out)
{
    if (schema_is_versions_path(path) == 1)
        return ns_versions_stat(ns, path, user, out);
    return ns_plain_stat_as(ns, path, user, out);
}

int ns_stat(struct ns *ns, const char *path, struct ns_info *out)
{
    return ns_stat_as(ns, path, ns_user_of(ns), out);
}

int ns_readdir(struct ns *ns, const char *path, struct ns_dir *out)
{
    if (schema_is_versions_path(path) == 1)
        return ns_versions_readdir(ns, path, out);
    return ns_plain_readdir(ns, path, out);
}
