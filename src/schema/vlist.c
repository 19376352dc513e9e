/* vlist: a domain's version list as pure functions; see include/h5osfs/schema/vlist.h. */
#include "h5osfs/schema/vlist.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include "h5osfs/schema/hjson.h"
#include "h5osfs/util/why.h"
#include "h5osfs/util/grow.h"

#define MAX_EXACT_INT 9007199254740992.0 /* 2^53: larger JSON numbers are not exact */
/* A version's number at most: "next" (one more) must still be exact when the list is read
 * back, or a list a commit wrote would be refused whole. */
#define N_MAX ((uint64_t)9007199254740991u) /* 2^53 - 1 */

/* ---- names ---- */

int vlist_number_name(const char *name, uint64_t *n)
{
    uint64_t v = 0;
    size_t i = 0;
    if (!name || name[0] < '1' || name[0] > '9')
        return 0;
    for (; name[i] >= '0' && name[i] <= '9'; i++) {
        if (v > (UINT64_MAX - 9) / 10)
            return 0;
        v = v * 10 + (uint64_t)(name[i] - '0');
    }
    if (strcmp(name + i, ".h5") != 0)
        return 0;
    if (n)
        *n = v;
    return 1;
}

static int number_name(uint64_t n, char *buf, size_t len)
{
    int w = snprintf(buf, len, "%" PRIu64 ".h5", n);
    return w > 0 && (size_t)w < len ? 0 : -ENAMETOOLONG;
}

static int entry_has_name(const struct vlist_entry *e, const char *name)
{
    for (size_t i = 0; i < e->n_names; i++)
        if (strcmp(e->names[i], name) == 0)
            return 1;
    return 0;
}

/* ---- entries ---- */

static void entry_free(struct vlist_entry *e)
{
    free(e->by);
    free(e->stamp);
    for (size_t i = 0; i < e->n_names; i++)
        free(e->names[i]);
    free(e->names);
    free(e->raw);
    memset(e, 0, sizeof(*e));
}

static int add_name(struct vlist_entry *e, const char *name)
{
    char **grown = grow_array(e->names, &e->cap_names, e->n_names + 1, sizeof(*grown), 2);
    if (!grown)
        return -ENOMEM;
    e->names = grown;
    if (!(e->names[e->n_names] = strdup(name)))
        return -ENOMEM;
    e->n_names++;
    return 0;
}

/* A non-negative integer member that JSON numbers hold exactly. */
static int get_count(json_t *obj, const char *key, int required, uint64_t *out)
{
    json_t *v = json_object_get(obj, key);
    *out = 0;
    if (!v)
        return required ? -EINVAL : 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0 ||
        (double)json_integer_value(v) > MAX_EXACT_INT)
        return -EINVAL;
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

static int get_text(json_t *obj, const char *key, char **out)
{
    json_t *v = json_object_get(obj, key);
    const char *text = v ? hjson_text(v) : "";
    if (!text)
        return -EINVAL;
    return (*out = strdup(text)) ? 0 : -ENOMEM;
}

static int parse_names(json_t *names, struct vlist_entry *e, const char **error)
{
    size_t i;
    json_t *v;
    if (!json_is_array(names))
        return *error = "names is not a list", 0;
    json_array_foreach(names, i, v)
    {
        const char *name = hjson_text(v);
        if (!name || schema_name_valid(name, strlen(name)) != 1)
            return *error = "a name is not a valid file name", 0;
        if (entry_has_name(e, name))
            continue;
        if (add_name(e, name) != 0)
            return -ENOMEM;
    }
    return 0;
}

/* A number name other than the entry's own would make two versions answer to "<k>.h5". */
static const char *names_error(const struct vlist_entry *e)
{
    for (size_t i = 0; i < e->n_names; i++) {
        uint64_t k;
        if (vlist_number_name(e->names[i], &k) && k != e->n)
            return "a name is another version's number";
    }
    if (e->state == VLIST_KEPT && e->n_names == 0)
        return "a kept version has no name";
    return NULL;
}

static const char *parse_state(json_t *obj, struct vlist_entry *e)
{
    const char *state = hjson_text(json_object_get(obj, "state"));
    if (state && strcmp(state, "kept") == 0)
        e->state = VLIST_KEPT;
    else if (state && strcmp(state, "removing") == 0)
        e->state = VLIST_REMOVING;
    else
        return "state is not kept or removing";
    return NULL;
}

/* Fill e from obj; a malformed entry sets e->error and returns 0. -ENOMEM only. */
static int parse_entry_fields(json_t *obj, struct vlist_entry *e)
{
    const char *root = hjson_text(json_object_get(obj, "root"));
    json_t *time = json_object_get(obj, "time");
    int rc;
    if (!json_is_object(obj))
        return e->error = "not a JSON object", 0;
    if (get_count(obj, "n", 1, &e->n) != 0 || e->n == 0 || e->n >= N_MAX)
        return e->n = 0, e->error = "n is not a positive integer below 2^53 - 1", 0;
    if (!root || strlen(root) >= SCHEMA_ID_BUF || schema_id_is_root(root) != 1)
        return e->error = "root is not a root group id", 0;
    strcpy(e->root, root);
    if (!json_is_number(time) || !isfinite(json_number_value(time)) || json_number_value(time) < 0)
        return e->error = "time is not a non-negative number", 0;
    e->time = json_number_value(time);
    if (get_count(obj, "parent", 0, &e->parent) != 0 || get_count(obj, "size", 0, &e->size) != 0)
        return e->error = "parent or size is not a non-negative integer", 0;
    const char *base = hjson_text(json_object_get(obj, "base"));
    if (json_object_get(obj, "base") &&
        (!base || strlen(base) >= SCHEMA_ID_BUF || schema_id_version(base) < 0))
        return e->error = "base is not an id", 0;
    if (base)
        strcpy(e->base, base);
    const char *current = hjson_text(json_object_get(obj, "current"));
    if (json_object_get(obj, "current") &&
        (!current || strlen(current) >= SCHEMA_ID_BUF || schema_id_version(current) < 0))
        return e->error = "current is not an id", 0;
    if (current)
        strcpy(e->current, current);
    if ((rc = get_text(obj, "by", &e->by)) != 0 || (rc = get_text(obj, "stamp", &e->stamp)) != 0)
        return rc == -ENOMEM ? rc : (e->error = "by or stamp is not text", 0);
    if ((e->error = parse_state(obj, e)) != NULL)
        return 0;
    if ((rc = parse_names(json_object_get(obj, "names"), e, &e->error)) != 0 || e->error)
        return rc;
    e->error = names_error(e);
    return 0;
}

static int keep_raw(json_t *obj, struct vlist_entry *e)
{
    char **names = e->names;
    size_t n_names = e->n_names;
    for (size_t i = 0; i < n_names; i++)
        free(names[i]);
    free(names);
    e->names = NULL;
    e->n_names = e->cap_names = 0;
    return hjson_dumps(obj, &e->raw) == -ENOMEM ? -ENOMEM : 0;
}

/* A later entry that repeats a number or a name is the malformed one: the earlier stays. */
static const char *clash_error(const struct vlist *l, const struct vlist_entry *e)
{
    for (size_t i = 0; i < l->n_entries; i++) {
        const struct vlist_entry *o = &l->entries[i];
        if (o->error)
            continue;
        if (o->n == e->n)
            return "its number is another entry's";
        for (size_t k = 0; k < e->n_names; k++)
            if (entry_has_name(o, e->names[k]))
                return "a name is another version's";
    }
    return NULL;
}

static int parse_entry(json_t *obj, struct vlist *l)
{
    struct vlist_entry *e = &l->entries[l->n_entries];
    memset(e, 0, sizeof(*e));
    int rc = parse_entry_fields(obj, e);
    if (rc == 0 && !e->error)
        e->error = clash_error(l, e);
    if (rc == 0 && e->error)
        rc = keep_raw(obj, e);
    l->n_entries++; /* even on -ENOMEM: vlist_free frees what it holds */
    if (e->n >= l->next)
        l->next = e->n + 1; /* numbers are never reused, whatever "next" said */
    return rc;
}

/* ---- the list ---- */

int vlist_init(struct vlist *l, const char *domain, const char *pool)
{
    memset(l, 0, sizeof(*l));
    if (!domain || domain[0] != '/' || !pool || strlen(pool) >= SCHEMA_ID_BUF ||
        schema_id_is_root(pool) != 1)
        return -EINVAL;
    if (!(l->domain = strdup(domain)))
        return -ENOMEM;
    strcpy(l->pool, pool);
    l->next = 1;
    return 0;
}

void vlist_free(struct vlist *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n_entries; i++)
        entry_free(&l->entries[i]);
    free(l->entries);
    free(l->domain);
    memset(l, 0, sizeof(*l));
}

static int parse_frame(json_t *doc, struct vlist *out, char *why, size_t why_len)
{
    json_t *format = json_object_get(doc, "format");
    const char *pool = hjson_text(json_object_get(doc, "pool"));
    if (!json_is_integer(format) || (json_integer_value(format) != VLIST_FORMAT &&
                                     json_integer_value(format) != VLIST_FORMAT_DROPPING))
        return why_reject(why, why_len, "format is not 1 or 2");
    if (!pool || strlen(pool) >= SCHEMA_ID_BUF || schema_id_is_root(pool) != 1)
        return why_reject(why, why_len, "pool is not a root group id");
    strcpy(out->pool, pool);
    if (get_count(doc, "next", 1, &out->next) != 0)
        return why_reject(why, why_len, "next is not a non-negative integer");
    if (out->next == 0)
        out->next = 1;
    if (get_text(doc, "domain", &out->domain) != 0)
        return why_reject(why, why_len, "domain is not text");
    json_t *dropping = json_object_get(doc, "dropping");
    if (dropping && !json_is_boolean(dropping))
        return why_reject(why, why_len, "dropping is not true or false");
    out->dropping = json_is_true(dropping);
    if ((json_integer_value(format) == VLIST_FORMAT_DROPPING) != out->dropping)
        return why_reject(why, why_len, "format 2 is a dropping list's, and only its");
    if (!json_is_array(json_object_get(doc, "versions")))
        return why_reject(why, why_len, "versions is not a list");
    return 0;
}

int vlist_parse(const char *json, size_t len, struct vlist *out, char *why, size_t why_len)
{
    memset(out, 0, sizeof(*out));
    json_t *doc = hjson_loadb(json, len, why, why_len);
    if (!doc)
        return -EINVAL;
    int rc = json_is_object(doc) ? parse_frame(doc, out, why, why_len)
                                 : why_reject(why, why_len, "not a JSON object");
    json_t *versions = json_object_get(doc, "versions");
    size_t n = rc == 0 ? json_array_size(versions) : 0;
    if (n > 0 && !(out->entries = calloc(n, sizeof(*out->entries))))
        rc = -ENOMEM;
    else
        out->cap_entries = n;
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = parse_entry(json_array_get(versions, i), out);
    json_decref(doc);
    if (rc != 0)
        vlist_free(out);
    return rc;
}

/* ---- dump ---- */

static int set(json_t *obj, const char *key, json_t *value)
{
    return value && json_object_set_new(obj, key, value) == 0 ? 0 : -ENOMEM;
}

static json_t *entry_json(const struct vlist_entry *e)
{
    if (e->error)
        return e->raw ? json_loads(e->raw, JSON_DECODE_ANY, NULL) : json_null();
    json_t *obj = json_object(), *names = json_array();
    int rc = obj && names ? 0 : -ENOMEM;
    for (size_t i = 0; rc == 0 && i < e->n_names; i++)
        rc = json_array_append_new(names, json_string(e->names[i])) == 0 ? 0 : -ENOMEM;
    if (rc == 0)
        rc = set(obj, "n", json_integer((json_int_t)e->n));
    if (rc == 0)
        rc = set(obj, "root", json_string(e->root));
    if (rc == 0)
        rc = set(obj, "time", json_real(e->time));
    if (rc == 0)
        rc = set(obj, "by", json_string(e->by ? e->by : ""));
    if (rc == 0)
        rc = set(obj, "parent", json_integer((json_int_t)e->parent));
    if (rc == 0 && e->base[0])
        rc = set(obj, "base", json_string(e->base));
    if (rc == 0 && e->current[0])
        rc = set(obj, "current", json_string(e->current));
    if (rc == 0)
        rc = set(obj, "size", json_integer((json_int_t)e->size));
    if (rc == 0)
        rc = set(obj, "stamp", json_string(e->stamp ? e->stamp : ""));
    if (rc == 0)
        rc = set(obj, "names", json_incref(names));
    if (rc == 0)
        rc = set(obj, "state", json_string(e->state == VLIST_KEPT ? "kept" : "removing"));
    json_decref(names);
    if (rc != 0)
        json_decref(obj);
    return rc == 0 ? obj : NULL;
}

static json_t *list_json(const struct vlist *l)
{
    json_t *doc = json_object(), *versions = json_array();
    int rc = doc && versions ? 0 : -ENOMEM;
    if (rc == 0)
        rc = set(doc, "format", json_integer(l->dropping ? VLIST_FORMAT_DROPPING : VLIST_FORMAT));
    if (rc == 0)
        rc = set(doc, "domain", json_string(l->domain ? l->domain : ""));
    if (rc == 0)
        rc = set(doc, "pool", json_string(l->pool));
    if (rc == 0)
        rc = set(doc, "next", json_integer((json_int_t)l->next));
    if (rc == 0 && l->dropping)
        rc = set(doc, "dropping", json_true());
    for (size_t i = 0; rc == 0 && i < l->n_entries; i++)
        rc = json_array_append_new(versions, entry_json(&l->entries[i])) == 0 ? 0 : -ENOMEM;
    if (rc == 0)
        rc = set(doc, "versions", json_incref(versions));
    json_decref(versions);
    if (rc != 0)
        json_decref(doc);
    return rc == 0 ? doc : NULL;
}

int vlist_dump(const struct vlist *l, char **out)
{
    *out = NULL;
    if (!l || schema_id_is_root(l->pool) != 1)
        return -EINVAL;
    json_t *doc = list_json(l);
    if (!doc)
        return -ENOMEM;
    int rc = hjson_dumps(doc, out);
    json_decref(doc);
    return rc;
}

/* ---- queries ---- */

const struct vlist_entry *vlist_entry_of(const struct vlist *l, uint64_t n)
{
    for (size_t i = 0; n > 0 && i < l->n_entries; i++)
        if (l->entries[i].n == n && !l->entries[i].error)
            return &l->entries[i];
    for (size_t i = 0; n > 0 && i < l->n_entries; i++)
        if (l->entries[i].n == n)
            return &l->entries[i];
    return NULL;
}

const struct vlist_entry *vlist_lookup(const struct vlist *l, const char *name)
{
    uint64_t n;
    for (size_t i = 0; name && i < l->n_entries; i++)
        if (!l->entries[i].error && entry_has_name(&l->entries[i], name))
            return &l->entries[i];
    if (!vlist_number_name(name, &n))
        return NULL;
    const struct vlist_entry *e = vlist_entry_of(l, n);
    return e && e->error ? e : NULL; /* a valid entry that dropped its number: gone */
}

const struct vlist_entry *vlist_latest(const struct vlist *l)
{
    const struct vlist_entry *best = NULL;
    for (size_t i = 0; i < l->n_entries; i++) {
        const struct vlist_entry *e = &l->entries[i];
        if (!e->error && e->state == VLIST_KEPT && (!best || e->n > best->n))
            best = e;
    }
    return best;
}

/* ---- changes ---- */

static struct vlist_entry *mutable_entry(struct vlist *l, const struct vlist_entry *e)
{
    return e ? &l->entries[e - l->entries] : NULL;
}

int vlist_append(struct vlist *l, const char *root, double time, const char *by, uint64_t size,
                 const char *stamp, uint64_t *n_out)
{
    char name[32];
    if (!root || strlen(root) >= SCHEMA_ID_BUF || schema_id_is_root(root) != 1 || !(time >= 0) ||
        l->next == 0 || l->next >= N_MAX)
        return -EINVAL; /* a next that large: only a forged list has it */
    const struct vlist_entry *latest = vlist_latest(l);
    uint64_t parent = latest ? latest->n : 0; /* before growing moves the entries */
    struct vlist_entry *grown =
        grow_array(l->entries, &l->cap_entries, l->n_entries + 1, sizeof(*grown), 8);
    if (!grown)
        return -ENOMEM;
    l->entries = grown;
    struct vlist_entry *e = &l->entries[l->n_entries];
    memset(e, 0, sizeof(*e));
    e->n = l->next;
    e->parent = parent;
    strcpy(e->root, root);
    e->time = time;
    e->size = size;
    e->state = VLIST_KEPT;
    int rc = number_name(e->n, name, sizeof name);
    if (rc == 0)
        rc =
            (e->by = strdup(by ? by : "")) && (e->stamp = strdup(stamp ? stamp : "")) ? 0 : -ENOMEM;
    if (rc == 0)
        rc = add_name(e, name);
    if (rc != 0) {
        entry_free(e);
        return rc;
    }
    l->n_entries++;
    l->next++;
    if (n_out)
        *n_out = e->n;
    return 0;
}

static int optional_id(const char *id)
{
    return !id || (strlen(id) < SCHEMA_ID_BUF && (!id[0] || schema_id_version(id) > 0));
}

int vlist_append_on(struct vlist *l, const char *base, const char *current, const char *root,
                    double time, const char *by, uint64_t *n_out)
{
    uint64_t n;
    if (!optional_id(base) || !optional_id(current))
        return -EINVAL;
    int rc = vlist_append(l, root, time, by, 0, "", &n);
    if (rc == 0 && base)
        strcpy(l->entries[l->n_entries - 1].base, base);
    if (rc == 0 && current)
        strcpy(l->entries[l->n_entries - 1].current, current);
    if (rc == 0 && n_out)
        *n_out = n;
    return rc;
}

const struct vlist_entry *vlist_committed_on(const struct vlist *l, const char *base)
{
    for (size_t i = 0; base && base[0] && i < l->n_entries; i++)
        if (!l->entries[i].error && strcmp(l->entries[i].base, base) == 0)
            return &l->entries[i];
    return NULL;
}

const struct vlist_entry *vlist_listed_as(const struct vlist *l, const char *current)
{
    for (size_t i = 0; current && current[0] && i < l->n_entries; i++)
        if (!l->entries[i].error && strcmp(l->entries[i].current, current) == 0)
            return &l->entries[i];
    return NULL;
}

/* A tag is a name a domain may have, not "<n>.h5" (a version's number), and not the list's
 * own name: its domain object DIR/.versions/NAME/<tag>/.domain.json would nest below it. */
static int tag_allowed(const char *tag)
{
    return schema_name_allowed(tag, NULL) == 0 && strcmp(tag, VLIST_OBJECT_NAME) != 0 &&
           !vlist_number_name(tag, NULL) && strlen(tag) <= VLIST_NAME_MAX;
}

int vlist_name(struct vlist *l, const char *existing, const char *tag)
{
    if (!tag_allowed(tag))
        return -EINVAL;
    if (vlist_lookup(l, tag))
        return -EEXIST;
    struct vlist_entry *e = mutable_entry(l, vlist_lookup(l, existing));
    if (!e || e->error)
        return -ENOENT;
    return add_name(e, tag);
}

static void remove_name(struct vlist_entry *e, const char *name)
{
    for (size_t i = 0; i < e->n_names; i++)
        if (strcmp(e->names[i], name) == 0) {
            free(e->names[i]);
            memmove(&e->names[i], &e->names[i + 1], (e->n_names - i - 1) * sizeof(*e->names));
            e->n_names--;
            break;
        }
    if (e->n_names == 0)
        e->state = VLIST_REMOVING;
}

int vlist_unname(struct vlist *l, const char *name, uint64_t head)
{
    uint64_t n;
    struct vlist_entry *e = mutable_entry(l, vlist_lookup(l, name));
    if (!e || e->error)
        return -ENOENT;
    if (head != 0 && e->n == head &&
        (e->n_names == 1 || (vlist_number_name(name, &n) && n == e->n)))
        return -EBUSY;
    remove_name(e, name);
    return 0;
}

/* The newest kept version below number below whose only name is its number. */
static struct vlist_entry *newest_untagged_below(struct vlist *l, uint64_t below)
{
    char own[32];
    struct vlist_entry *best = NULL;
    for (size_t i = 0; i < l->n_entries; i++) {
        struct vlist_entry *e = &l->entries[i];
        if (e->error || e->state != VLIST_KEPT || e->n >= below || e->n_names != 1 ||
            number_name(e->n, own, sizeof own) != 0 || strcmp(e->names[0], own) != 0)
            continue; /* tagged, removing, malformed or seen */
        if (!best || e->n > best->n)
            best = e;
    }
    return best;
}

size_t vlist_expire(struct vlist *l, unsigned keep, uint64_t head)
{
    size_t seen = 0, dropped = 0;
    uint64_t below = UINT64_MAX;
    struct vlist_entry *e;
    if (keep == 0)
        return 0;
    while ((e = newest_untagged_below(l, below)) != NULL) {
        below = e->n;
        if (++seen > keep && e->n != head) {
            remove_name(e, e->names[0]);
            dropped++;
        }
    }
    return dropped;
}

int vlist_drop(struct vlist *l, uint64_t n)
{
    for (size_t i = 0; i < l->n_entries; i++)
        if (l->entries[i].n == n) {
            entry_free(&l->entries[i]);
            memmove(&l->entries[i], &l->entries[i + 1],
                    (l->n_entries - i - 1) * sizeof(*l->entries));
            l->n_entries--;
            return 0;
        }
    return -ENOENT;
}
