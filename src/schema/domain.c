/* schema domain JSON and ACLs: see include/h5osfs/schema/schema.h and
 * spec/hsds-format.md §3.1, §9. */
#include "h5osfs/schema/schema.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include "h5osfs/schema/hjson.h"
#include "h5osfs/util/why.h"

/* authUtil.ACL_KEYS, in HSDS's order. */
static const struct {
    const char *name;
    unsigned bit;
} acl_keys[] = {
    { "create", SCHEMA_ACL_CREATE },    { "read", SCHEMA_ACL_READ },
    { "update", SCHEMA_ACL_UPDATE },    { "delete", SCHEMA_ACL_DELETE },
    { "readACL", SCHEMA_ACL_READ_ACL }, { "updateACL", SCHEMA_ACL_UPDATE_ACL },
};

#define N_ACL_KEYS (sizeof(acl_keys) / sizeof(acl_keys[0]))

/* ---- members ---- */

/* HSDS refuses a domain without a root group it can load, and a v1 root cannot be checked
 * beyond its class, so: any v1 group id, or a v2 id that passes the rotation rule. */
static int root_id_acceptable(const char *id)
{
    int version = schema_id_version(id);
    if (version == 1)
        return id[0] == 'g';
    return version == 2 && schema_id_is_root(id) == 1;
}

static int parse_root(json_t *doc, struct schema_domain *out, char *why, size_t why_len)
{
    json_t *root = json_object_get(doc, "root");
    if (!root)
        return 0; /* a folder */
    if (!json_is_string(root))
        return why_reject(why, why_len, "root is not a string");
    if (!hjson_text(root) || !root_id_acceptable(hjson_text(root)))
        return why_reject(why, why_len, "root is not a root group id");
    out->root = strdup(hjson_text(root));
    return out->root ? 0 : why_oom(why, why_len);
}

/* A string for showing (the owner is shown, never compared): a NUL (HSDS takes it) as '?',
 * rather than a C string cut short; an unloadable string as its JSON text. A new string, or
 * NULL. */
static char *shown_text(const json_t *v)
{
    const char *s = json_string_value(v);
    if (hjson_unloadable(s))
        s += strlen(HJSON_UNLOADABLE);
    size_t n = json_string_length(v) - (size_t)(s - json_string_value(v));
    char *out = malloc(n + 1);
    for (size_t i = 0; out && i < n; i++)
        out[i] = s[i] ? s[i] : '?';
    if (out)
        out[n] = '\0';
    return out;
}

static int parse_owner(json_t *doc, struct schema_domain *out, char *why, size_t why_len)
{
    json_t *owner = json_object_get(doc, "owner");
    if (!owner)
        return why_reject(why, why_len, "owner missing");
    if (!json_is_string(owner))
        return why_reject(why, why_len, "owner is not a string");
    out->owner = shown_text(owner);
    return out->owner ? 0 : why_oom(why, why_len);
}

/* Timestamps are floats when HSDS writes them but ints are accepted on read (§3.0). */
static int parse_time(json_t *doc, const char *member, double *out, char *why, size_t why_len)
{
    json_t *value = json_object_get(doc, member);
    if (!value)
        return 0;
    if (!json_is_number(value))
        return why_reject(why, why_len, "%s is not a number", member);
    *out = json_number_value(value);
    return 0;
}

/* ---- ACLs ---- */

/* Missing actions deny, as in authUtil.aclCheck; other members (the stray "domain") are
 * ignored. */
static int parse_acl_rights(const char *user, json_t *entry, unsigned *rights, char *why,
                            size_t why_len)
{
    if (!json_is_object(entry))
        return why_reject(why, why_len, "ACL of \"%s\" is not an object", user);
    *rights = 0;
    for (size_t i = 0; i < N_ACL_KEYS; i++) {
        json_t *value = json_object_get(entry, acl_keys[i].name);
        if (!value)
            continue;
        if (!json_is_boolean(value))
            return why_reject(why, why_len, "ACL of \"%s\": %s is not a boolean", user,
                              acl_keys[i].name);
        if (json_is_true(value))
            *rights |= acl_keys[i].bit;
    }
    return 0;
}

static int parse_acl_entries(json_t *acls, struct schema_domain *out, char *why, size_t why_len)
{
    const char *user;
    json_t *entry;
    json_object_foreach(acls, user, entry)
    {
        struct schema_acl *acl = &out->acls[out->n_acls];
        int rc = parse_acl_rights(user, entry, &acl->rights, why, why_len);
        if (rc < 0)
            return rc;
        acl->user = strdup(user);
        if (!acl->user)
            return why_oom(why, why_len);
        out->n_acls++;
    }
    return 0;
}

/* A ref-mode domain (versions_current=ref) keeps its real ACLs in its h5osfs member; its
 * "acls" are the read-only ones HSDS enforces. NULL: not such a domain. */
static json_t *ref_mode_acls(json_t *doc)
{
    json_t *own = json_object_get(doc, SCHEMA_H5OSFS_MEMBER);
    const char *mode = hjson_text(json_object_get(own, SCHEMA_CURRENT_REF));
    json_t *acls = json_object_get(own, "acls");
    return mode && strcmp(mode, "ref") == 0 && json_is_object(acls) ? acls : NULL;
}

static int parse_acls(json_t *doc, struct schema_domain *out, char *why, size_t why_len)
{
    json_t *acls = ref_mode_acls(doc);
    out->current_ref = acls != NULL;
    if (!acls)
        acls = json_object_get(doc, "acls");
    if (!acls)
        return why_reject(why, why_len, "acls missing");
    if (!json_is_object(acls))
        return why_reject(why, why_len, "acls is not an object");
    size_t n = json_object_size(acls);
    if (n == 0)
        return 0;
    out->acls = calloc(n, sizeof(*out->acls));
    if (!out->acls)
        return why_oom(why, why_len);
    return parse_acl_entries(acls, out, why, why_len);
}

enum schema_ingest schema_ingest_parse(const char *text, size_t len)
{
    if (text && len == 4 && memcmp(text, "copy", 4) == 0)
        return SCHEMA_INGEST_COPY;
    if (text && len == 4 && memcmp(text, "link", 4) == 0)
        return SCHEMA_INGEST_LINK;
    return SCHEMA_INGEST_UNSET;
}

const char *schema_ingest_name(enum schema_ingest mode)
{
    return mode == SCHEMA_INGEST_COPY ? "copy" : mode == SCHEMA_INGEST_LINK ? "link" : NULL;
}

/* h5osfs's own setting: a value it does not know is no setting (the folder stays usable). */
static void parse_ingest(json_t *doc, struct schema_domain *out)
{
    json_t *v = json_object_get(json_object_get(doc, SCHEMA_H5OSFS_MEMBER), "ingest");
    out->ingest = json_is_string(v)
                      ? schema_ingest_parse(json_string_value(v), json_string_length(v))
                      : SCHEMA_INGEST_UNSET;
}

int schema_versions_parse(const char *text, size_t len, struct schema_versions *out)
{
    static const char keep[] = "keep:";
    const size_t keep_len = sizeof keep - 1;
    *out = (struct schema_versions){ SCHEMA_VERSIONS_UNSET, 0, 0 };
    if (!text)
        return -EINVAL;
    if (len == 2 && memcmp(text, "on", 2) == 0)
        return out->mode = SCHEMA_VERSIONS_ON, 0;
    if (len == 3 && memcmp(text, "ref", 3) == 0)
        return out->mode = SCHEMA_VERSIONS_ON, out->ref = 1, 0;
    if (len == 3 && memcmp(text, "off", 3) == 0)
        return out->mode = SCHEMA_VERSIONS_OFF, 0;
    if (len <= keep_len || len > keep_len + 9 || memcmp(text, keep, keep_len) != 0 ||
        text[keep_len] == '0')
        return -EINVAL;
    unsigned n = 0;
    for (size_t i = keep_len; i < len; i++) {
        if (text[i] < '0' || text[i] > '9')
            return -EINVAL;
        n = n * 10 + (unsigned)(text[i] - '0'); /* 9 digits: no overflow */
    }
    *out = (struct schema_versions){ SCHEMA_VERSIONS_ON, n, 0 };
    return 0;
}

int schema_versions_text(const struct schema_versions *v, char *buf, size_t len)
{
    int w;
    if (v->mode == SCHEMA_VERSIONS_OFF)
        w = snprintf(buf, len, "off");
    else if (v->mode == SCHEMA_VERSIONS_ON && v->ref)
        w = snprintf(buf, len, "ref");
    else if (v->mode == SCHEMA_VERSIONS_ON && v->keep == 0)
        w = snprintf(buf, len, "on");
    else if (v->mode == SCHEMA_VERSIONS_ON && v->keep <= SCHEMA_VERSIONS_KEEP_MAX)
        w = snprintf(buf, len, "keep:%u", v->keep);
    else
        return -EINVAL;
    return w > 0 && (size_t)w < len ? 0 : -ENAMETOOLONG;
}

/* As for ingest: a value h5osfs does not know is no setting. An object is not a folder's
 * setting (a versioned domain's head member has that name). */
static void parse_versions(json_t *doc, struct schema_domain *out)
{
    json_t *v = json_object_get(json_object_get(doc, SCHEMA_H5OSFS_MEMBER), "versions");
    if (!json_is_string(v) ||
        schema_versions_parse(json_string_value(v), json_string_length(v), &out->versions) != 0)
        out->versions = (struct schema_versions){ SCHEMA_VERSIONS_UNSET, 0, 0 };
}

/* ---- document ---- */

static int parse_members(json_t *doc, struct schema_domain *out, char *why, size_t why_len)
{
    int rc;
    if ((rc = parse_root(doc, out, why, why_len)) < 0 ||
        (rc = parse_owner(doc, out, why, why_len)) < 0 ||
        (rc = parse_acls(doc, out, why, why_len)) < 0 ||
        (rc = parse_time(doc, "created", &out->created, why, why_len)) < 0 ||
        (rc = parse_time(doc, "lastModified", &out->last_modified, why, why_len)) < 0)
        return rc;
    parse_ingest(doc, out);
    parse_versions(doc, out);
    return 0;
}

int schema_domain_parse(const char *json, size_t len, struct schema_domain *out, char *why,
                        size_t why_len)
{
    int rc;
    if (!out)
        return why_reject(why, why_len, "no output");
    memset(out, 0, sizeof(*out));
    if (!json)
        return why_reject(why, why_len, "no JSON");
    /* as every object of the bucket: HSDS takes any string Python writes, NULs and lone
     * surrogates included, and none of them may cost the folder or domain */
    char jwhy[160];
    json_t *doc = hjson_loadb(json, len, jwhy, sizeof jwhy);
    if (!doc)
        return why_reject(why, why_len, "invalid JSON: %s", jwhy);
    if (!json_is_object(doc))
        rc = why_reject(why, why_len, "not a JSON object");
    else
        rc = parse_members(doc, out, why, why_len);
    json_decref(doc);
    if (rc < 0)
        schema_domain_free(out);
    return rc;
}

void schema_domain_free(struct schema_domain *dom)
{
    if (!dom)
        return;
    for (size_t i = 0; i < dom->n_acls; i++)
        free(dom->acls[i].user);
    free(dom->acls);
    free(dom->root);
    free(dom->owner);
    memset(dom, 0, sizeof(*dom));
}

/* ---- decisions (§9) ---- */

static const struct schema_acl *find_acl(const struct schema_domain *dom, const char *name)
{
    for (size_t i = 0; i < dom->n_acls; i++) {
        if (strcmp(dom->acls[i].user, name) == 0)
            return &dom->acls[i];
    }
    return NULL;
}

static unsigned rights_of(const struct schema_domain *dom, const char *name)
{
    const struct schema_acl *acl = find_acl(dom, name);
    return acl ? acl->rights : 0;
}

/* HSDS names group entries "g:<group>"; comparing in place avoids building that name. */
static unsigned group_rights(const struct schema_domain *dom, const char *group)
{
    if (!group)
        return 0;
    for (size_t i = 0; i < dom->n_acls; i++) {
        const char *name = dom->acls[i].user;
        if (strncmp(name, "g:", 2) == 0 && strcmp(name + 2, group) == 0)
            return dom->acls[i].rights;
    }
    return 0;
}

unsigned schema_acl_rights(const struct schema_domain *dom, const char *user,
                           const char *admin_user, const char *const *groups, size_t n_groups)
{
    if (!dom || !user)
        return 0;
    if (admin_user && admin_user[0] && strcmp(user, admin_user) == 0)
        return SCHEMA_ACL_ALL;
    const struct schema_acl *own = find_acl(dom, user);
    if (own)
        return own->rights;
    /* Each action is checked on its own: "default" or any group granting it allows it. */
    unsigned rights = rights_of(dom, "default");
    for (size_t i = 0; groups && i < n_groups; i++)
        rights |= group_rights(dom, groups[i]);
    return rights;
}

/* ---- kept versions ---- */

static json_t *read_only_entry(int read)
{
    json_t *entry = json_object();
    for (size_t i = 0; entry && i < N_ACL_KEYS; i++) {
        int right = acl_keys[i].bit == SCHEMA_ACL_READ && read;
        if (json_object_set_new(entry, acl_keys[i].name, json_boolean(right)) != 0) {
            json_decref(entry);
            return NULL;
        }
    }
    return entry;
}

json_t *schema_acls_read_only(const json_t *acls, const char *owner)
{
    json_t *out = json_object();
    const char *user;
    json_t *entry;
    int bad = !out;
    if (!json_is_object(acls)) {
        if (!bad)
            bad = json_object_set_new(out, owner, read_only_entry(1)) != 0;
    } else {
        json_object_foreach((json_t *)acls, user, entry)
        {
            if (bad)
                break;
            int read = json_is_object(entry) && json_is_true(json_object_get(entry, "read"));
            bad = json_object_set_new(out, user, read_only_entry(read)) != 0;
        }
    }
    if (bad) {
        json_decref(out);
        return NULL;
    }
    return out;
}
