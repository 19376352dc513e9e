/*
 * fuzz_vlist: what a bucket writer controls of a domain's versions (issue 26): the version
 * list DIR/.versions/NAME/.h5osfs-versions (src/schema/vlist.c), the pool's marker
 * db/<P>/.h5osfs-pool and the domain object that may say ref mode (src/schema/pool.c), and
 * the rule built on them: which pool a version's chunk table may name (schema_pool_check).
 *
 * Input: parts separated by the line "\n@@\n":
 *   0  the version list of /d/x.h5
 *   1  the marker of the pool a table claims (empty: no marker)
 *   2  /d/x.h5's .domain.json (empty: none)
 *   3  lines: names to tag and untag, then the rest of the bytes choose keep for expiry
 * In parts 0-2, @P and @R are replaced by fixed root ids (the pool, the root being read), so
 * that a mutation need not keep a 38-character id intact.
 *
 * Checks beyond "no crash, no leak, no UB":
 *   - vlist_parse: 0, -EINVAL or -ENOMEM; a parsed list keeps its own rules (every valid entry
 *     numbered below next, a root id, a valid name each while kept, no number or name twice,
 *     no other version's number as a name) and dumps to text that parses to the same list
 *     (dump . parse . dump = dump);
 *   - every change (tag, untag, expire, append, drop) leaves a list that still keeps those
 *     rules, and whose dump parses with no entry made malformed by it;
 *   - the marker: a domain read from it is the JSON's whole "domain" string, never a cut one;
 *     what schema_pool_marker_dump writes reads back the same;
 *   - schema_pool_check grants a pool only when the list parses and names it, the marker (if
 *     any) names /d/x.h5 as owner or as the domain an mv moves from, and, for the current
 *     domain, its object says ref mode and names the root being read.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "h5osfs/schema/hjson.h"
#include "h5osfs/schema/pool.h"
#include "h5osfs/schema/schema.h"
#include "h5osfs/schema/vlist.h"
#include "fuzz_scratch.h"

#define SEP "\n@@\n"
#define PARTS 4
/* Root ids (schema_root_of of these), made once at start: the pool, the root being read,
 * another pool. */
static char POOL_ID[SCHEMA_ID_BUF], ROOT_ID[SCHEMA_ID_BUF], OTHER_POOL[SCHEMA_ID_BUF];
#define DOMAIN "/d/x.h5"
#define VERSION_PATH "/d/.versions/x.h5/1.h5"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_vlist: %s (%s)\n", what, detail ? detail : "-");
    abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_log_setup();
    if (schema_root_of("g-11111111-22222222-3333-444444-555555", POOL_ID) != 0 ||
        schema_root_of("g-aaaaaaaa-bbbbbbbb-cccc-dddddd-eeeeee", ROOT_ID) != 0 ||
        schema_root_of("g-99999999-88888888-7777-666666-555555", OTHER_POOL) != 0)
        abort();
    return 0;
}

/* ---- input ---- */

struct part {
    char *p; /* malloc'd, NUL-terminated (the bytes may hold NULs) */
    size_t len;
    int given; /* non-empty */
};

/* The bytes with @P and @R replaced by the fixed ids. */
static void expand(const uint8_t *data, size_t len, struct part *out)
{
    size_t cap = len * SCHEMA_ID_BUF + 1, n = 0;
    char *p = malloc(cap);
    if (!p)
        abort();
    for (size_t i = 0; i < len; i++) {
        if (data[i] == '@' && i + 1 < len && (data[i + 1] == 'P' || data[i + 1] == 'R')) {
            const char *id = data[i + 1] == 'P' ? POOL_ID : ROOT_ID;
            memcpy(p + n, id, strlen(id));
            n += strlen(id);
            i++;
        } else {
            p[n++] = (char)data[i];
        }
    }
    p[n] = '\0';
    *out = (struct part){ p, n, len > 0 };
}

static size_t split(const uint8_t *data, size_t size, struct part parts[PARTS])
{
    size_t n = 0, at = 0;
    memset(parts, 0, PARTS * sizeof parts[0]);
    for (; n < PARTS && at <= size; n++) {
        const uint8_t *end = memmem(data + at, size - at, SEP, strlen(SEP));
        size_t len = end ? (size_t)(end - (data + at)) : size - at;
        if (n < 3)
            expand(data + at, len, &parts[n]);
        else if (!(parts[n].p = strndup((const char *)data + at, len)))
            abort();
        else
            parts[n].len = len, parts[n].given = len > 0;
        at += len + strlen(SEP);
    }
    for (size_t i = n; i < PARTS; i++)
        if (!(parts[i].p = strdup("")))
            abort();
    return n;
}

/* ---- the list's own rules ---- */

static int has_name(const struct vlist_entry *e, const char *name)
{
    for (size_t i = 0; i < e->n_names; i++)
        if (strcmp(e->names[i], name) == 0)
            return 1;
    return 0;
}

static void check_entry(const struct vlist *l, size_t i, const char *when)
{
    const struct vlist_entry *e = &l->entries[i];
    if (e->error) {
        if (!e->raw && e->n_names)
            fail("a malformed entry keeps names but not its text", when);
        return;
    }
    if (e->n == 0 || e->n >= l->next)
        fail("a valid entry's number is 0 or not below next", when);
    if (schema_id_is_root(e->root) != 1)
        fail("a valid entry's root is no root id", when);
    if (e->state == VLIST_KEPT && e->n_names == 0)
        fail("a kept version has no name", when);
    for (size_t k = 0; k < e->n_names; k++) {
        uint64_t m;
        if (schema_name_valid(e->names[k], strlen(e->names[k])) != 1)
            fail("a valid entry has an invalid name", when);
        if (vlist_number_name(e->names[k], &m) && m != e->n)
            fail("a valid entry answers to another version's number", when);
        if (vlist_lookup(l, e->names[k]) != e)
            fail("vlist_lookup of a name does not find its entry", e->names[k]);
    }
    for (size_t j = 0; j < i; j++) {
        const struct vlist_entry *o = &l->entries[j];
        if (o->error)
            continue;
        if (o->n == e->n)
            fail("two valid entries share a number", when);
        for (size_t k = 0; k < e->n_names; k++)
            if (has_name(o, e->names[k]))
                fail("two valid entries share a name", e->names[k]);
    }
}

static void check_rules(const struct vlist *l, const char *when)
{
    if (schema_id_is_root(l->pool) != 1 || l->next == 0)
        fail("the frame's pool or next is wrong", when);
    for (size_t i = 0; i < l->n_entries; i++)
        check_entry(l, i, when);
    const struct vlist_entry *latest = vlist_latest(l);
    for (size_t i = 0; i < l->n_entries; i++) {
        const struct vlist_entry *e = &l->entries[i];
        if (!e->error && e->state == VLIST_KEPT && (!latest || e->n > latest->n))
            fail("vlist_latest is not the highest kept version", when);
    }
}

static size_t count_valid(const struct vlist *l)
{
    size_t n = 0;
    for (size_t i = 0; i < l->n_entries; i++)
        n += l->entries[i].error == NULL;
    return n;
}

/* dump(l) parses to a list with l's valid entries valid, and dumps to the same text again. */
static void check_round_trip(const struct vlist *l, const char *when)
{
    char *d1 = NULL, *d2 = NULL, why[200] = "";
    struct vlist again;
    int rc = vlist_dump(l, &d1);
    if (rc == -ENOMEM)
        return;
    if (rc != 0)
        fail("vlist_dump of a parsed list failed", when);
    rc = vlist_parse(d1, strlen(d1), &again, why, sizeof why);
    if (rc == -ENOMEM) {
        free(d1);
        return;
    }
    if (rc != 0)
        fail("the dump of a list does not parse", why);
    check_rules(&again, when);
    if (again.n_entries != l->n_entries || count_valid(&again) != count_valid(l) ||
        again.next != l->next || strcmp(again.pool, l->pool) != 0 || again.dropping != l->dropping)
        fail("the dump of a list parses to another list", when);
    for (size_t i = 0; i < l->n_entries; i++) {
        const struct vlist_entry *a = &l->entries[i], *b = &again.entries[i];
        if ((a->error == NULL) != (b->error == NULL) || a->n != b->n ||
            (!a->error && (strcmp(a->root, b->root) != 0 || a->n_names != b->n_names ||
                           a->state != b->state || strcmp(a->base, b->base) != 0 ||
                           strcmp(a->current, b->current) != 0 || a->size != b->size)))
            fail("an entry changed through dump and parse", when);
    }
    if (vlist_dump(&again, &d2) == 0 && strcmp(d1, d2) != 0)
        fail("dump . parse . dump is not dump", when);
    free(d1);
    free(d2);
    vlist_free(&again);
}

/* ---- changes ---- */

static uint64_t head_of(const struct vlist *l)
{
    const struct vlist_entry *e = vlist_latest(l);
    return e ? e->n : 0;
}

static void check_tag(struct vlist *l, const char *tag)
{
    const struct vlist_entry *e = vlist_latest(l);
    if (!e || e->n_names == 0)
        return;
    uint64_t n = e->n;
    char *existing = strdup(e->names[0]);
    if (!existing)
        abort();
    int rc = vlist_name(l, existing, tag);
    if (rc == 0 && (!vlist_lookup(l, tag) || vlist_lookup(l, tag)->n != n))
        fail("a tag does not name the version it was given to", tag);
    if (rc != 0 && rc != -EINVAL && rc != -EEXIST && rc != -ENOENT && rc != -ENOMEM)
        fail("vlist_name returned an unexpected error", tag);
    free(existing);
    check_rules(l, "after vlist_name");
}

static void check_untag(struct vlist *l, const char *name)
{
    uint64_t head = head_of(l);
    const struct vlist_entry *e = vlist_lookup(l, name);
    int valid = e && !e->error;
    uint64_t n = valid ? e->n : 0;
    int rc = vlist_unname(l, name, head);
    if (rc == 0 && !valid)
        fail("vlist_unname removed the name of no valid version", name);
    if (rc == 0 && vlist_lookup(l, name) && vlist_lookup(l, name)->n == n &&
        !vlist_lookup(l, name)->error)
        fail("a removed name still finds its version", name);
    if (rc == -EBUSY && !(valid && n == head))
        fail("vlist_unname refused a name that is not the head's", name);
    uint64_t k;
    if (valid && n == head && vlist_number_name(name, &k) && k == head && rc != -EBUSY)
        fail("vlist_unname removed the head's number", name);
    if (head && (!vlist_entry_of(l, head) || vlist_entry_of(l, head)->state != VLIST_KEPT))
        fail("the head lost its last name", name);
    check_rules(l, "after vlist_unname");
}

/* Kept, and called by its number alone: what expiry may remove. */
static int untagged(const struct vlist_entry *e)
{
    char own[32];
    snprintf(own, sizeof own, "%" PRIu64 ".h5", e->n);
    return !e->error && e->state == VLIST_KEPT && e->n_names == 1 && strcmp(e->names[0], own) == 0;
}

static void check_expire(struct vlist *l, unsigned keep)
{
    uint64_t head = head_of(l), newest_removed = 0;
    size_t was_kept = 0, left = 0;
    unsigned char *kept = calloc(l->n_entries + 1, 1);
    if (!kept)
        abort();
    for (size_t i = 0; i < l->n_entries; i++) /* 2: kept and tagged, never expired */
        kept[i] = !l->entries[i].error && l->entries[i].state == VLIST_KEPT
                      ? (untagged(&l->entries[i]) ? 1 : 2)
                      : 0;
    for (size_t i = 0; i < l->n_entries; i++)
        was_kept += untagged(&l->entries[i]);
    vlist_expire(l, keep, head);
    if (head && vlist_entry_of(l, head)->state != VLIST_KEPT)
        fail("expiry removed the head", NULL);
    for (size_t i = 0; i < l->n_entries; i++) {
        const struct vlist_entry *e = &l->entries[i];
        left += untagged(e);
        if (kept[i] && e->state != VLIST_KEPT && e->n > newest_removed)
            newest_removed = e->n;
        if (kept[i] == 2 && e->state != VLIST_KEPT)
            fail("expiry removed a tagged version", NULL);
    }
    if (keep == 0 && left != was_kept)
        fail("keep 0 removed a version", NULL);
    if (keep > 0 && left > keep)
        fail("expiry kept more untagged versions than keep", NULL);
    if (keep > 0 && left < keep && left < was_kept)
        fail("expiry removed versions while fewer than keep were left", NULL);
    for (size_t i = 0; i < l->n_entries; i++)
        if (untagged(&l->entries[i]) && l->entries[i].n < newest_removed)
            fail("expiry removed a newer untagged version than one it kept", NULL);
    free(kept);
    check_rules(l, "after vlist_expire");
}

static void check_append(struct vlist *l)
{
    uint64_t next = l->next, n = 0;
    int rc = vlist_append_on(l, ROOT_ID, ROOT_ID, POOL_ID, 1764390000.5, "fuzz@host", &n);
    if (rc == -ENOMEM)
        return;
    if (rc != 0)
        fail("vlist_append_on of a valid root failed", NULL);
    char name[32];
    snprintf(name, sizeof name, "%" PRIu64 ".h5", n);
    if (n != next || l->next != next + 1 || !vlist_lookup(l, name) ||
        vlist_lookup(l, name)->n != n || vlist_listed_as(l, ROOT_ID) == NULL)
        fail("an appended version is not found by its number", name);
    check_rules(l, "after vlist_append_on");
}

/* ---- the marker ---- */

/* The marker's "domain" as the daemon's JSON reader gives it ("" when it gives none). */
static char *marker_domain_ref(const struct part *m)
{
    char why[160];
    json_t *doc = hjson_loadb(m->p, m->len, why, sizeof why);
    const char *s = hjson_text(json_object_get(doc, "domain"));
    char *copy = strdup(s ? s : "");
    json_decref(doc);
    if (!copy)
        abort();
    return copy;
}

static void check_marker(const struct part *m)
{
    char owner[1026], from[1026], *dumped = NULL;
    int rc = schema_pool_marker_read(m->p, m->len, owner, sizeof owner, from, sizeof from);
    char *want = marker_domain_ref(m);
    if (rc == 0 && strcmp(want, owner) != 0)
        fail("the marker's domain is not the JSON's whole string", want);
    if (rc != 0 && *want && strlen(want) < sizeof owner)
        fail("a marker naming a domain was refused", want);
    free(want);
    if (rc != 0)
        return;
    if (schema_pool_marker_dump(owner, from[0] ? from : NULL, &dumped) != 0)
        return; /* -ENOMEM */
    char o2[1026], f2[1026];
    if (schema_pool_marker_read(dumped, strlen(dumped), o2, sizeof o2, f2, sizeof f2) != 0 ||
        strcmp(o2, owner) != 0 || strcmp(f2, from) != 0)
        fail("a dumped marker reads back differently", dumped);
    free(dumped);
}

/* ---- which pool a table may name ---- */

struct bucket {
    const struct part *parts;
    char list_key[1100], marker_key[1100], domain_key[1100];
};

static int bucket_get(void *ctx, const char *key, size_t max, unsigned char **data, size_t *len)
{
    const struct bucket *b = ctx;
    const struct part *p = strcmp(key, b->list_key) == 0     ? &b->parts[0]
                           : strcmp(key, b->marker_key) == 0 ? &b->parts[1]
                           : strcmp(key, b->domain_key) == 0 ? &b->parts[2]
                                                             : NULL;
    if (!p || !p->given)
        return -ENOENT;
    if (p->len > max)
        return -EFBIG;
    if (!(*data = malloc(p->len + 1)))
        return -ENOMEM;
    memcpy(*data, p->p, p->len);
    (*data)[p->len] = '\0';
    *len = p->len;
    return 0;
}

/* What the rule must find for claimed: 1 granted, 0 refused. */
static int pool_may_be_named(const struct part *parts, const char *claimed, int current)
{
    struct vlist l;
    char why[200];
    if (!parts[0].given || parts[0].len > VLIST_MAX_BYTES ||
        vlist_parse(parts[0].p, parts[0].len, &l, why, sizeof why) != 0)
        return 0;
    int named = strcmp(l.pool, claimed) == 0;
    vlist_free(&l);
    if (!named)
        return 0;
    if (parts[1].given) {
        char owner[1026], from[1026];
        if (parts[1].len > SCHEMA_POOL_MARKER_MAX ||
            schema_pool_marker_read(parts[1].p, parts[1].len, owner, sizeof owner, from,
                                    sizeof from) != 0 ||
            (strcmp(owner, DOMAIN) != 0 && strcmp(from, DOMAIN) != 0))
            return 0;
    }
    if (!current)
        return 1;
    json_t *dom = parts[2].given ? hjson_loadb(parts[2].p, parts[2].len, why, sizeof why) : NULL;
    const char *mode =
        hjson_text(json_object_get(json_object_get(dom, SCHEMA_H5OSFS_MEMBER), "current"));
    const char *root = hjson_text(json_object_get(dom, "root"));
    int ref = mode && strcmp(mode, "ref") == 0 && root && strcmp(root, ROOT_ID) == 0;
    json_decref(dom);
    return ref;
}

static void check_pool_rule(const struct part *parts)
{
    struct bucket b = { parts, "", "", "" };
    struct schema_fetch fetch = { &b, bucket_get };
    const char *claims[2] = { POOL_ID, OTHER_POOL };
    const char *paths[2] = { VERSION_PATH, DOMAIN };
    if (schema_vlist_key(DOMAIN, b.list_key, sizeof b.list_key) != 0 ||
        schema_domain_key(DOMAIN, b.domain_key, sizeof b.domain_key) != 0)
        abort();
    for (int c = 0; c < 2; c++) {
        if (schema_pool_marker_key(claims[c], b.marker_key, sizeof b.marker_key) != 0)
            abort();
        for (int k = 0; k < 2; k++) {
            char why[300] = "";
            int rc = schema_pool_check(paths[k], ROOT_ID, claims[c], &fetch, why, sizeof why);
            if (rc == -ENOMEM)
                continue;
            if (rc != 0 && rc != -EINVAL)
                fail("schema_pool_check returned an unexpected error", why);
            if (rc == 0 && !pool_may_be_named(parts, claims[c], k == 1))
                fail("schema_pool_check granted a pool the rules refuse", paths[k]);
            if (rc != 0 && pool_may_be_named(parts, claims[c], k == 1))
                fail("schema_pool_check refused a pool the rules grant", why);
        }
    }
}

/* ---- the run ---- */

static void check_list(const struct part *parts)
{
    struct vlist l;
    char why[200] = "";
    int rc = vlist_parse(parts[0].p, parts[0].len, &l, why, sizeof why);
    if (rc != 0 && rc != -EINVAL && rc != -ENOMEM)
        fail("vlist_parse returned an unexpected error", why);
    if (rc != 0)
        return;
    check_rules(&l, "parsed");
    check_round_trip(&l, "parsed");
    /* part 3: a tag, a name to remove, keep for the expiry */
    char *ops = parts[3].p, *nl = strchr(ops, '\n');
    char *second = nl ? nl + 1 : ops + strlen(ops), *nl2 = strchr(second, '\n');
    if (nl)
        *nl = '\0';
    if (nl2)
        *nl2 = '\0';
    unsigned keep = nl2 ? (unsigned char)nl2[1] % 8 : 1;
    check_tag(&l, ops);
    check_untag(&l, second);
    check_expire(&l, keep);
    check_append(&l);
    check_round_trip(&l, "changed");
    if (l.n_entries > 0) {
        uint64_t n = l.entries[0].n;
        if (n && vlist_drop(&l, n) != 0)
            fail("vlist_drop of a listed number failed", NULL);
        check_rules(&l, "after vlist_drop");
    }
    vlist_free(&l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct part parts[PARTS];
    split(data, size, parts);
    check_list(parts);
    check_marker(&parts[1]);
    check_pool_rule(parts);
    for (int i = 0; i < PARTS; i++)
        free(parts[i].p);
    return 0;
}
