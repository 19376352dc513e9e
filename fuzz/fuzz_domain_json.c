/*
 * fuzz_domain_json: a .domain.json and its ACLs, as the namespace reads them (spec §3.1, §9):
 * schema_domain_parse + schema_acl_rights (src/schema/domain.c) on the text, then the same
 * object as home/fuzz/d.h5/.domain.json in a POSIX bucket (in /dev/shm when it exists) seen
 * through ns_stat_as and ns_readdir (src/ns/ns.c), once from the store and once from the cache.
 *
 * Input: the .domain.json's bytes.
 *
 * Checks beyond "no crash, no leak, no UB", against a reading of the same JSON here (jansson
 * directly): schema_domain_parse accepts exactly the objects with a string "owner", an object
 * "acls" whose entries are objects whose six actions are absent or booleans, a "root" absent or
 * a root group id, and "created"/"lastModified" absent or numbers; it gives a reason and an
 * empty result otherwise. Rights (§9): the admin gets everything; a user with an entry gets
 * exactly what it says; anyone else what "default" or any of their "g:<group>" entries allow;
 * never a bit beyond the six; the owner nothing for being the owner. The namespace shows an
 * accepted object as a domain (root) or folder with its root, owner, times and those rights for
 * every user asked (a caller without a name: default's read alone), a refused one as broken
 * with no rights, and its listing agrees with its stat; the cached answer equals the first.
 */
#include <errno.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "h5osfs/util/log.h"
#include "h5osfs/ns/ns.h"
#include "h5osfs/schema/schema.h"
#include "h5osfs/store/store.h"
#include "fuzz_scratch.h"

#define DOMAIN_PATH "/home/fuzz/d.h5"
#define DOMAIN_DIR "home/fuzz/d.h5"
#define MOUNT_USER "test_user1"
#define ADMIN "admin"
#define MAX_NAMES 12

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char g_bucket[256];
static struct store *g_store;

static void fail(const char *what, const char *user)
{
    fprintf(stderr, "fuzz_domain_json: %s (user %s)\n", what, user ? user : "(none)");
    abort();
}

static void remove_bucket(void)
{
    store_close(g_store);
    fuzz_rm_tree(g_bucket);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_log_setup();
    const char *base = fuzz_scratch_base();
    snprintf(g_bucket, sizeof g_bucket, "%s/h5osfs-fuzz-domain.%ld", base, (long)getpid());
    char dir[512];
    snprintf(dir, sizeof dir, "%s/" DOMAIN_DIR, g_bucket);
    for (char *p = dir + strlen(g_bucket);; p++) {
        char c = *p;
        if (c != '/' && c != '\0')
            continue;
        *p = '\0';
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
            perror(dir);
            abort();
        }
        *p = c;
        if (!c)
            break;
    }
    if (store_posix_open(g_bucket, &g_store) != 0)
        abort();
    atexit(remove_bucket);
    return 0;
}

/* ---- the reference ---- */

static const char *const ACTIONS[6] = {
    "create", "read", "update", "delete", "readACL", "updateACL"
};
static const unsigned BITS[6] = { SCHEMA_ACL_CREATE, SCHEMA_ACL_READ,     SCHEMA_ACL_UPDATE,
                                  SCHEMA_ACL_DELETE, SCHEMA_ACL_READ_ACL, SCHEMA_ACL_UPDATE_ACL };

static int root_acceptable(const char *id)
{
    int v = schema_id_version(id);
    return (v == 1 && id[0] == 'g') || (v == 2 && schema_id_is_root(id) == 1);
}

static int entry_valid(json_t *entry)
{
    if (!json_is_object(entry))
        return 0;
    for (size_t i = 0; i < 6; i++) {
        json_t *v = json_object_get(entry, ACTIONS[i]);
        if (v && !json_is_boolean(v))
            return 0;
    }
    return 1;
}

static int doc_valid(json_t *doc)
{
    if (!json_is_object(doc))
        return 0;
    json_t *root = json_object_get(doc, "root"), *acls = json_object_get(doc, "acls");
    if (root && !(json_is_string(root) && root_acceptable(json_string_value(root))))
        return 0;
    if (!json_is_string(json_object_get(doc, "owner")) || !json_is_object(acls))
        return 0;
    const char *user;
    json_t *entry;
    json_object_foreach(acls, user, entry)
    {
        if (!entry_valid(entry))
            return 0;
    }
    static const char *const times[2] = { "created", "lastModified" };
    for (size_t i = 0; i < 2; i++) {
        json_t *t = json_object_get(doc, times[i]);
        if (t && !json_is_number(t))
            return 0;
    }
    return 1;
}

static unsigned entry_rights(json_t *entry)
{
    unsigned r = 0;
    for (size_t i = 0; i < 6; i++)
        if (json_is_true(json_object_get(entry, ACTIONS[i])))
            r |= BITS[i];
    return r;
}

static unsigned ref_rights(json_t *acls, const char *user, const char *admin,
                           const char *const *groups, size_t n_groups)
{
    if (admin && *admin && strcmp(user, admin) == 0)
        return SCHEMA_ACL_ALL;
    json_t *own = json_object_get(acls, user);
    if (own)
        return entry_rights(own);
    unsigned r = entry_rights(json_object_get(acls, "default"));
    /* group names of any length: the daemon takes them as the system gives them */
    for (size_t i = 0; i < n_groups; i++) {
        char *name = NULL;
        if (asprintf(&name, "g:%s", groups[i]) < 0)
            abort();
        r |= entry_rights(json_object_get(acls, name));
        free(name);
    }
    return r;
}

static double time_of(json_t *doc, const char *member)
{
    json_t *t = json_object_get(doc, member);
    return t ? json_number_value(t) : 0;
}

/* ---- users and groups to ask about: every name the ACL has, and some it has not ---- */

struct names {
    const char *users[MAX_NAMES + 6];
    size_t n_users;
    const char *groups[MAX_NAMES + 1];
    size_t n_groups;
};

static void collect_names(json_t *doc, struct names *nm)
{
    static const char *const fixed[] = { ADMIN, MOUNT_USER, "default", "nobody", "" };
    memset(nm, 0, sizeof *nm);
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        nm->users[nm->n_users++] = fixed[i];
    const char *owner = json_string_value(json_object_get(doc, "owner"));
    if (owner)
        nm->users[nm->n_users++] = owner;
    const char *user;
    json_t *entry;
    json_object_foreach(json_object_get(doc, "acls"), user, entry)
    {
        if (nm->n_users < MAX_NAMES + 6 - 1)
            nm->users[nm->n_users++] = user;
        if (strncmp(user, "g:", 2) == 0 && nm->n_groups < MAX_NAMES)
            nm->groups[nm->n_groups++] = user + 2;
    }
    nm->groups[nm->n_groups++] = "nogroup";
}

/* ---- schema_domain_parse and schema_acl_rights ---- */

static void check_schema(const char *text, size_t size, json_t *doc, int valid,
                         const struct names *nm)
{
    struct schema_domain dom;
    char why[160] = "";
    int rc = schema_domain_parse(text, size, &dom, why, sizeof why);
    if (rc != 0) {
        if (rc != -EINVAL && rc != -ENOMEM)
            fail("schema_domain_parse: neither 0, -EINVAL nor -ENOMEM", NULL);
        if (valid && rc != -ENOMEM)
            fail("schema_domain_parse refused a valid .domain.json", NULL);
        if (!why[0])
            fail("schema_domain_parse failed without a reason", NULL);
        if (dom.root || dom.owner || dom.acls || dom.n_acls)
            fail("schema_domain_parse failed but left a result", NULL);
        return;
    }
    if (!valid)
        fail("schema_domain_parse accepted an invalid .domain.json", NULL);
    json_t *acls = json_object_get(doc, "acls"), *root = json_object_get(doc, "root");
    if (dom.n_acls != json_object_size(acls) ||
        strcmp(dom.owner, json_string_value(json_object_get(doc, "owner"))) != 0 ||
        (root == NULL) != (dom.root == NULL) ||
        (root && strcmp(dom.root, json_string_value(root)) != 0))
        fail("schema_domain_parse: the result is not the document", NULL);
    if (dom.created != time_of(doc, "created") || dom.last_modified != time_of(doc, "lastModified"))
        fail("schema_domain_parse: times are not the document's", NULL);
    static const char *const admins[3] = { ADMIN, "", NULL };
    for (size_t u = 0; u < nm->n_users; u++)
        for (size_t a = 0; a < 3; a++)
            for (size_t g = 0; g <= nm->n_groups; g += nm->n_groups ? nm->n_groups : 1) {
                unsigned got = schema_acl_rights(&dom, nm->users[u], admins[a], nm->groups, g);
                unsigned want = ref_rights(acls, nm->users[u], admins[a], nm->groups, g);
                if (got != want || (got & ~SCHEMA_ACL_ALL))
                    fail("schema_acl_rights differs from §9", nm->users[u]);
            }
    if (schema_acl_rights(NULL, MOUNT_USER, ADMIN, NULL, 0) != 0 ||
        schema_acl_rights(&dom, NULL, ADMIN, NULL, 0) != 0)
        fail("schema_acl_rights: rights without a domain or a user", NULL);
    schema_domain_free(&dom);
}

/* ---- the namespace ---- */

static void put_object(const uint8_t *data, size_t size)
{
    char path[512];
    snprintf(path, sizeof path, "%s/" DOMAIN_DIR "/.domain.json", g_bucket);
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        perror(path);
        abort();
    }
}

static void check_info(const struct ns_info *info, json_t *doc, int valid, const char *user,
                       unsigned want_rights)
{
    if (!valid) {
        if (info->kind != NS_BROKEN || info->rights != 0)
            fail("ns: an invalid .domain.json is not shown as broken without rights", user);
        return;
    }
    json_t *root = json_object_get(doc, "root");
    const char *owner = json_string_value(json_object_get(doc, "owner"));
    if (info->kind != (root ? NS_DOMAIN : NS_FOLDER))
        fail("ns: kind is not the document's", user);
    if (root && strcmp(info->root, json_string_value(root)) != 0)
        fail("ns: root is not the document's", user);
    if (strncmp(info->owner, owner, sizeof info->owner - 1) != 0)
        fail("ns: owner is not the document's", user);
    if (info->mtime != time_of(doc, "lastModified") || info->ctime != time_of(doc, "created"))
        fail("ns: times are not the document's", user);
    if (info->rights != want_rights)
        fail("ns: rights differ from §9", user);
}

static int same_info(const struct ns_info *a, const struct ns_info *b)
{
    return a->kind == b->kind && a->rights == b->rights && a->mtime == b->mtime &&
           a->ctime == b->ctime && a->size == b->size && strcmp(a->root, b->root) == 0 &&
           strcmp(a->owner, b->owner) == 0;
}

static void check_ns(json_t *doc, int valid, const struct names *nm)
{
    struct ns *ns;
    struct ns_config cfg = { .user = MOUNT_USER, .admin_user = ADMIN, .ttl = 3600 };
    if (ns_new(g_store, &cfg, &ns) != 0)
        abort();
    json_t *acls = json_object_get(doc, "acls");
    struct ns_info first, info;
    /* the first answer comes from the store, every later one from the cache */
    for (int round = 0; round < 2; round++) {
        for (size_t u = 0; u <= nm->n_users; u++) {
            const char *user = u < nm->n_users ? nm->users[u] : NULL;
            if (ns_stat_as(ns, DOMAIN_PATH, user, &info) != 0)
                fail("ns_stat_as: the domain object is there but not shown", user);
            unsigned want = !valid ? 0
                            : user ? ref_rights(acls, user, ADMIN, NULL, 0)
                                   : ref_rights(acls, "default", NULL, NULL, 0) & SCHEMA_ACL_READ;
            check_info(&info, doc, valid, user, want);
        }
    }
    if (ns_stat(ns, DOMAIN_PATH, &first) != 0)
        fail("ns_stat: the domain object is there but not shown", MOUNT_USER);
    struct ns_dir dir;
    if (ns_readdir(ns, "/home/fuzz", &dir) != 0)
        fail("ns_readdir: the parent of a domain object is not a directory", MOUNT_USER);
    if (dir.n != 1 || strcmp(dir.entries[0].name, "d.h5") != 0 ||
        !same_info(&dir.entries[0].info, &first))
        fail("ns_readdir: the listing does not show what ns_stat does", MOUNT_USER);
    ns_dir_free(&dir);
    ns_free(ns);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    json_error_t error;
    json_t *doc = json_loadb(text, size, 0, &error);
    int valid = doc && doc_valid(doc);
    struct names nm;
    collect_names(doc, &nm);
    check_schema(text, size, doc, valid, &nm);
    put_object(data, size);
    check_ns(doc, valid, &nm);
    json_decref(doc);
    return 0;
}
