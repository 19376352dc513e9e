/* callers: see include/h5osfs/fs/callers.h. */
#include "h5osfs/fs/callers.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/util/grow.h"
#include "h5osfs/util/log.h"
#include "h5osfs/util/strmap.h"
#include "h5osfs/util/why.h"

#define PASSWD_BUF_MIN 1024
#define PASSWD_BUF_MAX (1u << 20)
#define CREATORS_PRUNE_MIN 1024

struct mapped {
    uid_t uid;
    char *name;
};

struct creator {
    unsigned long serial; /* which setting this is: a prune keeps newer ones */
    char name[];
};

struct callers {
    uid_t mount_uid;
    char *mount_user;
    struct mapped *map; /* -o user_map, fixed after callers_new */
    size_t n_map;
    pthread_mutex_t lock;    /* guards creators, serial, prune_at */
    struct strmap *creators; /* path -> struct creator */
    unsigned long serial;
    size_t prune_at;
};

/* ---- -o user_map ---- */

static int parse_uid(const char *text, size_t len, uid_t *out)
{
    char digits[16];
    if (len == 0 || len >= sizeof digits || strspn(text, "0123456789") < len)
        return -EINVAL;
    memcpy(digits, text, len);
    digits[len] = '\0';
    unsigned long long v = strtoull(digits, NULL, 10);
    if (v >= (uid_t)-1)
        return -EINVAL; /* (uid_t)-1 is "no uid" to the kernel */
    *out = (uid_t)v;
    return 0;
}

static int name_acceptable(const char *name, size_t len)
{
    if (len == 0 || len >= CALLERS_NAME_MAX)
        return 0;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
            return 0;
    return 1;
}

/* Each pair of text in turn: fn(ctx, uid, name, len) for each; stops at the first error. */
static int each_pair(const char *text, uid_t mount_uid, char *why, size_t why_len,
                     int (*fn)(void *ctx, uid_t uid, const char *name, size_t len), void *ctx)
{
    const char *p = text;
    if (!text || !*text)
        return why_reject(why, why_len, "user_map is empty");
    while (*p) {
        const char *colon = strchr(p, ':');
        uid_t uid;
        if (!colon)
            return why_reject(why, why_len, "user_map must be UID:NAME pairs separated by ':'");
        if (parse_uid(p, (size_t)(colon - p), &uid) != 0)
            return why_reject(why, why_len, "user_map: '%.*s' is not a uid", (int)(colon - p), p);
        if (uid == mount_uid)
            return why_reject(why, why_len,
                              "user_map: uid %u is the mounting user, whose HSDS "
                              "name is -o user=",
                              (unsigned)uid);
        const char *name = colon + 1, *end = strchrnul(name, ':');
        if (!name_acceptable(name, (size_t)(end - name)))
            return why_reject(why, why_len,
                              "user_map: the name of uid %u must be 1 to %d bytes "
                              "without control characters",
                              (unsigned)uid, CALLERS_NAME_MAX - 1);
        int rc = fn(ctx, uid, name, (size_t)(end - name));
        if (rc == -EEXIST)
            return why_reject(why, why_len, "user_map: uid %u is given twice", (unsigned)uid);
        if (rc != 0)
            return rc;
        p = *end ? end + 1 : end;
        if (*end && !*p)
            return why_reject(why, why_len, "user_map must be UID:NAME pairs separated by ':'");
    }
    return 0;
}

struct map_builder {
    struct mapped *map;
    size_t n, cap;
};

static int add_mapped(void *ctx, uid_t uid, const char *name, size_t len)
{
    struct map_builder *b = ctx;
    for (size_t i = 0; i < b->n; i++)
        if (b->map[i].uid == uid)
            return -EEXIST;
    struct mapped *bigger = grow_array(b->map, &b->cap, b->n + 1, sizeof *bigger, 4);
    if (!bigger)
        return -ENOMEM;
    b->map = bigger;
    b->map[b->n].uid = uid;
    b->map[b->n].name = strndup(name, len);
    if (!b->map[b->n].name)
        return -ENOMEM;
    b->n++;
    return 0;
}

static void map_free(struct mapped *map, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(map[i].name);
    free(map);
}

static int build_map(const char *text, uid_t mount_uid, struct map_builder *b, char *why,
                     size_t why_len)
{
    int rc = each_pair(text, mount_uid, why, why_len, add_mapped, b);
    if (rc != 0) {
        map_free(b->map, b->n);
        b->map = NULL;
        b->n = 0;
    }
    return rc;
}

int callers_check_map(const char *text, uid_t mount_uid, char *why, size_t why_len)
{
    struct map_builder b = { 0 };
    int rc = build_map(text, mount_uid, &b, why, why_len);
    map_free(b.map, b.n);
    return rc;
}

/* ---- lifetime ---- */

static void creators_free(struct strmap *creators)
{
    strmap_free(creators, free);
}

int callers_new(const struct callers_config *cfg, struct callers **out)
{
    char why[200];
    struct map_builder b = { 0 };
    if (cfg->user_map && build_map(cfg->user_map, cfg->mount_uid, &b, why, sizeof why) != 0) {
        log_error("-o user_map: %s", why);
        return -EINVAL;
    }
    struct callers *c = calloc(1, sizeof *c);
    if (c) {
        c->mount_user = strdup(cfg->mount_user);
        c->creators = strmap_new();
    }
    if (!c || !c->mount_user || !c->creators || pthread_mutex_init(&c->lock, NULL) != 0) {
        if (c) {
            creators_free(c->creators);
            free(c->mount_user);
        }
        free(c);
        map_free(b.map, b.n);
        return -ENOMEM;
    }
    c->mount_uid = cfg->mount_uid;
    c->map = b.map;
    c->n_map = b.n;
    c->prune_at = CREATORS_PRUNE_MIN;
    *out = c;
    return 0;
}

void callers_free(struct callers *c)
{
    if (!c)
        return;
    creators_free(c->creators);
    pthread_mutex_destroy(&c->lock);
    map_free(c->map, c->n_map);
    free(c->mount_user);
    free(c);
}

/* ---- who a uid is ---- */

static int set_name(struct caller *out, const char *name)
{
    size_t len = strlen(name);
    if (!name_acceptable(name, len))
        return 0;
    memcpy(out->name, name, len + 1);
    out->has_name = 1;
    return 1;
}

static const char *mapped_name(const struct callers *c, uid_t uid)
{
    for (size_t i = 0; i < c->n_map; i++)
        if (c->map[i].uid == uid)
            return c->map[i].name;
    return NULL;
}

/* The local account's name, when uid has one that can be an HSDS name. */
static void local_name(uid_t uid, struct caller *out)
{
    struct passwd pw, *found = NULL;
    size_t size = PASSWD_BUF_MIN;
    char *buf = malloc(size);
    while (buf && getpwuid_r(uid, &pw, buf, size, &found) == ERANGE && size < PASSWD_BUF_MAX) {
        char *bigger = realloc(buf, size *= 2);
        if (!bigger)
            break;
        buf = bigger;
    }
    if (found && !set_name(out, found->pw_name))
        log_warn("uid %u: the local user name cannot be an HSDS user name: acts as a "
                 "caller without one",
                 (unsigned)uid);
    free(buf);
}

void callers_identify(const struct callers *c, uid_t uid, struct caller *out)
{
    memset(out, 0, sizeof *out);
    if (uid == c->mount_uid) {
        out->mount_user = c->mount_user;
        return;
    }
    const char *mapped = mapped_name(c, uid);
    if (mapped)
        set_name(out, mapped);
    else
        local_name(uid, out);
}

/* ---- creators of files not committed yet ---- */

int callers_set_creator(struct callers *c, const char *path, const char *user)
{
    size_t len = strlen(user);
    struct creator *cr = malloc(sizeof *cr + len + 1), *old = NULL;
    if (!cr)
        return -ENOMEM;
    memcpy(cr->name, user, len + 1);
    pthread_mutex_lock(&c->lock);
    cr->serial = ++c->serial;
    int rc = strmap_put(c->creators, path, cr, (void **)&old);
    if (rc == 0 && strmap_count(c->creators) >= c->prune_at)
        rc = 1;
    pthread_mutex_unlock(&c->lock);
    free(rc < 0 ? cr : old);
    return rc;
}

int callers_creator(struct callers *c, const char *path, char *buf, size_t len)
{
    pthread_mutex_lock(&c->lock);
    const struct creator *cr = strmap_get(c->creators, path);
    int rc = !cr ? -ENOENT : (size_t)snprintf(buf, len, "%s", cr->name) >= len ? -ENAMETOOLONG : 0;
    pthread_mutex_unlock(&c->lock);
    return rc;
}

void callers_forget_creator(struct callers *c, const char *path)
{
    pthread_mutex_lock(&c->lock);
    void *cr = strmap_remove(c->creators, path);
    pthread_mutex_unlock(&c->lock);
    free(cr);
}

void callers_rename_creator(struct callers *c, const char *from, const char *to)
{
    void *old = NULL;
    pthread_mutex_lock(&c->lock);
    struct creator *cr = strmap_remove(c->creators, from);
    if (cr && strmap_put(c->creators, to, cr, &old) != 0) {
        old = cr; /* out of memory: the file falls back to the mount's user */
        log_warn("%s: its creator is forgotten (out of memory)", to);
    }
    pthread_mutex_unlock(&c->lock);
    free(old);
}

struct snapshot {
    char **paths;
    unsigned long *serials;
    size_t n;
};

static int take_snapshot(const char *key, void *value, void *ctx)
{
    struct snapshot *s = ctx;
    char *copy = strdup(key);
    if (copy) {
        s->paths[s->n] = copy;
        s->serials[s->n++] = ((struct creator *)value)->serial;
    }
    return 0;
}

static void forget_if_unchanged(struct callers *c, const char *path, unsigned long serial)
{
    struct creator *cr = NULL;
    pthread_mutex_lock(&c->lock);
    const struct creator *now = strmap_get(c->creators, path);
    if (now && now->serial == serial)
        cr = strmap_remove(c->creators, path);
    pthread_mutex_unlock(&c->lock);
    free(cr);
}

void callers_prune_creators(struct callers *c, int (*staged)(void *ctx, const char *path),
                            void *ctx)
{
    struct snapshot s = { 0 };
    pthread_mutex_lock(&c->lock);
    size_t n = strmap_count(c->creators);
    s.paths = calloc(n ? n : 1, sizeof *s.paths);
    s.serials = calloc(n ? n : 1, sizeof *s.serials);
    if (s.paths && s.serials)
        strmap_filter(c->creators, take_snapshot, &s);
    pthread_mutex_unlock(&c->lock);
    for (size_t i = 0; i < s.n; i++) {
        if (!staged(ctx, s.paths[i]))
            forget_if_unchanged(c, s.paths[i], s.serials[i]);
        free(s.paths[i]);
    }
    free(s.paths);
    free(s.serials);
    pthread_mutex_lock(&c->lock);
    n = strmap_count(c->creators);
    c->prune_at = n * 2 > CREATORS_PRUNE_MIN ? n * 2 : CREATORS_PRUNE_MIN;
    pthread_mutex_unlock(&c->lock);
}
