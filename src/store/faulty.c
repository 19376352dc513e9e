/*
 * faulty: a store that fails on purpose (include/h5osfs/store/store_test.h), over any other.
 *
 * Each call takes the lock once to count itself and ask the rules, runs without it (the inner
 * store may be slow, or called by many threads), and takes it again to record its answer.
 * The inner store is called through the store_* wrappers, so its own counters and fallbacks
 * (put_new -> put_lazy -> put, copy through get and put) work as they do without the wrapper.
 */
#include <errno.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/util/grow.h"
#include "h5osfs/util/log.h"
#include "h5osfs/store/store_test.h"

struct faulty_rule_state {
    struct faulty_rule rule; /* pattern: a copy, owned */
    uint64_t seen;           /* matching calls so far */
    uint64_t fired;
};

struct faulty_store {
    struct store base; /* first member: a struct store * is a struct faulty_store * */
    struct store *inner;
    pthread_mutex_t lock; /* everything below */
    struct faulty_rule_state *rules;
    size_t n_rules, rules_cap;
    uint64_t calls[FAULTY_OPS];
    uint64_t fired;
    struct faulty_call *record;
    size_t n_record, record_cap;
};

/* What a call is to do: pass through, or the rule that fired (a copy). */
struct faulty_verdict {
    int fire;
    enum faulty_mode mode;
    int err;
    size_t keep;
};

static const struct store_ops faulty_ops;

static struct faulty_store *faulty_of(struct store *st)
{
    return st && st->ops == &faulty_ops ? (struct faulty_store *)st : NULL;
}

static const char *op_name(enum faulty_op op)
{
    static const char *const names[FAULTY_OPS] = { "get",  "head",   "put",  "put_if",
                                                   "copy", "delete", "list", "sync" };
    return (unsigned)op < FAULTY_OPS ? names[op] : "?";
}

static int rule_matches(const struct faulty_rule *r, enum faulty_op op, const char *key)
{
    if (r->ops && !(r->ops & FAULTY_MASK(op)))
        return 0;
    return !r->pattern || fnmatch(r->pattern, key, 0) == 0;
}

/* Count the call and find the first rule due for it (every matching rule counts it). */
static struct faulty_verdict faulty_judge(struct faulty_store *f, enum faulty_op op,
                                          const char *key)
{
    struct faulty_verdict v = { 0 };
    pthread_mutex_lock(&f->lock);
    f->calls[op]++;
    for (size_t i = 0; i < f->n_rules; i++) {
        struct faulty_rule_state *s = &f->rules[i];
        if (!rule_matches(&s->rule, op, key))
            continue;
        s->seen++;
        uint64_t first = s->rule.nth ? s->rule.nth : 1;
        if (v.fire || s->seen < first || (s->rule.times && s->fired >= s->rule.times))
            continue;
        s->fired++;
        f->fired++;
        log_info("store faulty: %s %s: rule %zu fires", op_name(op), key, i + 1);
        v = (struct faulty_verdict){ 1, s->rule.mode, s->rule.err ? s->rule.err : -EIO,
                                     s->rule.keep };
    }
    pthread_mutex_unlock(&f->lock);
    return v;
}

/* Record the answer the caller gets; returns it. A record that cannot grow loses the call
 * (logged) but never changes the answer. */
static int faulty_done(struct faulty_store *f, enum faulty_op op, const char *key, int rc,
                       const struct faulty_verdict *v)
{
    pthread_mutex_lock(&f->lock);
    char *copy = strdup(key);
    void *nv = f->n_record < f->record_cap
                   ? f->record
                   : grow_array(f->record, &f->record_cap, f->n_record + 1, sizeof *f->record, 64);
    if (copy && nv) {
        f->record = nv;
        f->record[f->n_record++] = (struct faulty_call){ op, copy, rc, v->fire };
    } else {
        free(copy);
        log_error("store faulty: %s: out of memory: the call is not recorded", key);
    }
    pthread_mutex_unlock(&f->lock);
    return rc;
}

/* The verdict keeps the inner store from seeing the call. */
static int skipped(const struct faulty_verdict *v)
{
    return v->fire && v->mode == FAULTY_FAIL;
}

/* The answer of a call that is not a read: the inner store's rc, or the verdict's error
 * after it succeeded ("reply lost"); recorded. */
static int faulty_answer(struct faulty_store *f, enum faulty_op op, const char *key, int rc,
                         const struct faulty_verdict *v)
{
    if (rc == 0 && v->fire && v->mode == FAULTY_AFTER)
        rc = v->err;
    return faulty_done(f, op, key, rc, v);
}

/* ---- reads ---------------------------------------------------------------------------------- */

static void garble(unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)~p[i];
}

static int faulty_get(struct store *st, const char *key, uint64_t off, uint64_t len, size_t max,
                      struct store_buf *out)
{
    struct faulty_store *f = faulty_of(st);
    struct faulty_verdict v = faulty_judge(f, FAULTY_GET, key);
    int rc;
    if (skipped(&v))
        rc = v.err;
    else if (off == 0 && len == STORE_RANGE_TO_END)
        rc = store_get(f->inner, key, max, out);
    else
        rc = store_get_range(f->inner, key, off, len, out);
    if (rc == 0 && v.fire && v.mode == FAULTY_AFTER) {
        store_buf_free(out);
        rc = v.err;
    } else if (rc == 0 && v.fire && v.mode == FAULTY_TRUNCATE && v.keep < out->len) {
        out->len = v.keep;
        out->data[v.keep] = '\0';
    } else if (rc == 0 && v.fire && v.mode == FAULTY_GARBLE) {
        garble(out->data, out->len);
    }
    return faulty_done(f, FAULTY_GET, key, rc, &v);
}

static int faulty_head(struct store *st, const char *key, struct store_stat *out)
{
    struct faulty_store *f = faulty_of(st);
    struct faulty_verdict v = faulty_judge(f, FAULTY_HEAD, key);
    int rc = skipped(&v) ? v.err : store_head(f->inner, key, out);
    return faulty_answer(f, FAULTY_HEAD, key, rc, &v);
}

/* A name cut to half its length, its last byte inverted: no longer below the prefix asked
 * for, as a broken server might answer. */
static void garble_name(char *name)
{
    size_t keep = (strlen(name) + 1) / 2;
    name[keep] = '\0';
    if (keep > 0)
        garble((unsigned char *)name + keep - 1, 1);
}

static void garble_names(struct store_list *l)
{
    for (size_t i = 0; i < l->n_objects; i++)
        garble_name(l->objects[i].key);
    for (size_t i = 0; i < l->n_prefixes; i++)
        garble_name(l->prefixes[i]);
}

static int faulty_list(struct store *st, const char *prefix, const char *delimiter,
                       const char *token, size_t max_keys, struct store_list *out)
{
    struct faulty_store *f = faulty_of(st);
    struct faulty_verdict v = faulty_judge(f, FAULTY_LIST, prefix);
    int rc = skipped(&v) ? v.err : store_list(f->inner, prefix, delimiter, token, max_keys, out);
    if (rc == 0 && v.fire && v.mode == FAULTY_AFTER) {
        store_list_free(out);
        rc = v.err;
    } else if (rc == 0 && v.fire && v.mode == FAULTY_GARBLE) {
        garble_names(out);
    }
    return faulty_done(f, FAULTY_LIST, prefix, rc, &v);
}

/* ---- changes -------------------------------------------------------------------------------- */

static int faulty_put(struct store *st, const char *key, const void *data, size_t len)
{
    struct faulty_store *f = faulty_of(st);
    struct faulty_verdict v = faulty_judge(f, FAULTY_PUT, key);
    int rc = skipped(&v) ? v.err : store_put(f->inner, key, data, len);
    return faulty_answer(f, FAULTY_PUT, key, rc, &v);
}

static int faulty_put_lazy(struct store *st, const char *key, const void *data, size_t len)
{
    struct faulty_store *f = faulty_of(st);
    struct faulty_verdict v = faulty_judge(f, FAULTY_PUT, key);
    int rc = skipped(&v) ? v.err : store_put_lazy(f->inner, key, data, len);
    return faulty_answer(f, FAULTY_PUT, key, rc, &v);
}

static int faulty_put_new(struct store *st, const char *key, const void *data, size_t len)
{
    struct faulty_store *f = faulty_of(st);
    struct faulty_verdict v = faulty_judge(f, FAULTY_PUT, key);
    int rc = skipped(&v) ? v.err : store_put_new(f->inner, key, data, len);
    return faulty_answer(f, FAULTY_PUT, key, rc, &v);
}

static int faulty_put_new_from_fd(struct store *st, const char *key, int fd, uint64_t off,
                                  size_t len)
{
    struct faulty_store *f = faulty_of(st);
    struct faulty_verdict v = faulty_judge(f, FAULTY_PUT, key);
    int rc = skipped(&v) ? v.err : store_put_new_from_fd(f->inner, key, fd, off, len);
    return faulty_answer(f, FAULTY_PUT, key, rc, &v);
}

static int faulty_put_if(struct store *st, const char *key, const void *data, size_t len,
                         const char *if_etag)
{
    struct faulty_store *f = faulty_of(st);
    struct faulty_verdict v = faulty_judge(f, FAULTY_PUT_IF, key);
    int rc = skipped(&v) ? v.err : store_put_if(f->inner, key, data, len, if_etag);
    return faulty_answer(f, FAULTY_PUT_IF, key, rc, &v);
}

static int faulty_copy(struct store *st, const char *src, const char *dst, uint64_t size)
{
    struct faulty_store *f = faulty_of(st);
    struct faulty_verdict v = faulty_judge(f, FAULTY_COPY, dst);
    int rc = skipped(&v) ? v.err : store_copy_sized(f->inner, src, dst, size);
    return faulty_answer(f, FAULTY_COPY, dst, rc, &v);
}

static int faulty_sync(struct store *st)
{
    struct faulty_store *f = faulty_of(st);
    struct faulty_verdict v = faulty_judge(f, FAULTY_SYNC, "");
    int rc = skipped(&v) ? v.err : store_sync(f->inner);
    return faulty_answer(f, FAULTY_SYNC, "", rc, &v);
}

static int faulty_del(struct store *st, const char *key)
{
    struct faulty_store *f = faulty_of(st);
    struct faulty_verdict v = faulty_judge(f, FAULTY_DELETE, key);
    int rc = skipped(&v) ? v.err : store_delete(f->inner, key);
    return faulty_answer(f, FAULTY_DELETE, key, rc, &v);
}

/* ---- rules and counters --------------------------------------------------------------------- */

static int rule_valid(const struct faulty_rule *r)
{
    unsigned reads = FAULTY_MASK(FAULTY_GET) | FAULTY_MASK(FAULTY_LIST);
    switch (r->mode) {
    case FAULTY_FAIL:
    case FAULTY_AFTER:
        return r->err <= 0;
    case FAULTY_TRUNCATE:
        return r->ops == FAULTY_MASK(FAULTY_GET);
    case FAULTY_GARBLE:
        return r->ops && !(r->ops & ~reads);
    }
    return 0;
}

int store_faulty_add(struct store *st, const struct faulty_rule *rule)
{
    struct faulty_store *f = faulty_of(st);
    if (!f || !rule || !rule_valid(rule))
        return -EINVAL;
    struct faulty_rule_state s = { .rule = *rule };
    if (rule->pattern && !(s.rule.pattern = strdup(rule->pattern)))
        return -ENOMEM;
    int rc = 0;
    pthread_mutex_lock(&f->lock);
    void *nv = f->n_rules < f->rules_cap
                   ? f->rules
                   : grow_array(f->rules, &f->rules_cap, f->n_rules + 1, sizeof *f->rules, 8);
    if (nv) {
        f->rules = nv;
        f->rules[f->n_rules++] = s;
    } else {
        free((char *)s.rule.pattern);
        rc = -ENOMEM;
    }
    pthread_mutex_unlock(&f->lock);
    return rc;
}

static void free_rules(struct faulty_store *f)
{
    for (size_t i = 0; i < f->n_rules; i++)
        free((char *)f->rules[i].rule.pattern);
    f->n_rules = 0;
}

static void free_record(struct faulty_store *f)
{
    for (size_t i = 0; i < f->n_record; i++)
        free(f->record[i].key);
    f->n_record = 0;
}

void store_faulty_clear(struct store *st)
{
    struct faulty_store *f = faulty_of(st);
    if (!f)
        return;
    pthread_mutex_lock(&f->lock);
    free_rules(f);
    pthread_mutex_unlock(&f->lock);
}

void store_faulty_reset(struct store *st)
{
    struct faulty_store *f = faulty_of(st);
    if (!f)
        return;
    pthread_mutex_lock(&f->lock);
    free_record(f);
    memset(f->calls, 0, sizeof f->calls);
    f->fired = 0;
    pthread_mutex_unlock(&f->lock);
}

uint64_t store_faulty_calls(struct store *st, enum faulty_op op)
{
    return store_faulty_calls_matching(st, op, NULL);
}

uint64_t store_faulty_calls_matching(struct store *st, enum faulty_op op, const char *glob)
{
    struct faulty_store *f = faulty_of(st);
    uint64_t n = 0;
    if (!f || (unsigned)op >= FAULTY_OPS)
        return 0;
    pthread_mutex_lock(&f->lock);
    if (!glob) {
        n = f->calls[op];
    } else {
        for (size_t i = 0; i < f->n_record; i++)
            n += f->record[i].op == op && fnmatch(glob, f->record[i].key, 0) == 0;
    }
    pthread_mutex_unlock(&f->lock);
    return n;
}

uint64_t store_faulty_fired(struct store *st)
{
    struct faulty_store *f = faulty_of(st);
    if (!f)
        return 0;
    pthread_mutex_lock(&f->lock);
    uint64_t n = f->fired;
    pthread_mutex_unlock(&f->lock);
    return n;
}

const struct faulty_call *store_faulty_record(struct store *st, size_t *n)
{
    struct faulty_store *f = faulty_of(st);
    *n = 0;
    if (!f)
        return NULL;
    pthread_mutex_lock(&f->lock);
    const struct faulty_call *r = f->record;
    *n = f->n_record;
    pthread_mutex_unlock(&f->lock);
    return r;
}

/* ---- open / close --------------------------------------------------------------------------- */

static void faulty_destroy(struct store *st)
{
    struct faulty_store *f = faulty_of(st);
    free_rules(f);
    free(f->rules);
    free_record(f);
    free(f->record);
    pthread_mutex_destroy(&f->lock);
    free(f);
}

static const struct store_ops faulty_ops = {
    .name = "faulty",
    .get = faulty_get,
    .put = faulty_put,
    .put_lazy = faulty_put_lazy,
    .put_new = faulty_put_new,
    .put_if = faulty_put_if,
    .put_new_from_fd = faulty_put_new_from_fd,
    .copy = faulty_copy,
    .sync = faulty_sync,
    .del = faulty_del,
    .head = faulty_head,
    .list = faulty_list,
    /* no list_keys: store_list_keys pages through faulty_list, where rules apply */
    .destroy = faulty_destroy,
};

int store_faulty_open(struct store *inner, struct store **out)
{
    if (!out || !inner)
        return -EINVAL;
    *out = NULL;
    struct faulty_store *f = calloc(1, sizeof *f);
    if (!f)
        return -ENOMEM;
    if (pthread_mutex_init(&f->lock, NULL) != 0) {
        free(f);
        return -ENOMEM;
    }
    f->base.ops = &faulty_ops;
    f->inner = inner;
    *out = &f->base;
    return 0;
}
