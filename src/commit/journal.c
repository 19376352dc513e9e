/* journal: see include/h5osfs/commit/journal.h. */
#include "h5osfs/commit/journal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "h5osfs/util/dirs.h"
#include "h5osfs/util/grow.h"
#include "h5osfs/util/log.h"
#include "journal_int.h"

static const char *const mode_names[] = { "new", "replace", "change" };
static const char *const state_names[] = { "clean", "dirty", "committing" };

static int open_subdir(const char *root, const char *name, int *fd)
{
    char *path = NULL;
    if (asprintf(&path, "%s/%s", root, name) < 0)
        return -ENOMEM;
    int rc = make_dirs(path);
    if (rc == 0 && (*fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        rc = -errno;
    if (rc != 0)
        log_error("cache directory %s: %s", path, strerror(-rc));
    free(path);
    return rc;
}

int journal_open(const char *cache_dir, const char *bucket, struct journal **out)
{
    if (!bucket || !*bucket)
        return -EINVAL;
    struct journal *j = calloc(1, sizeof *j);
    if (!j)
        return -ENOMEM;
    j->staging = j->records = j->rejected = -1;
    j->root = strdup(cache_dir);
    j->bucket = strdup(bucket);
    int rc = j->root && j->bucket ? 0 : -ENOMEM;
    if (rc == 0)
        rc = open_subdir(cache_dir, "staging", &j->staging);
    if (rc == 0)
        rc = open_subdir(cache_dir, "journal", &j->records);
    if (rc == 0)
        rc = open_subdir(cache_dir, "rejected", &j->rejected);
    if (rc != 0) {
        journal_close(j);
        return rc;
    }
    *out = j;
    return 0;
}

void journal_close(struct journal *j)
{
    if (!j)
        return;
    if (j->staging >= 0)
        close(j->staging);
    if (j->records >= 0)
        close(j->records);
    if (j->rejected >= 0)
        close(j->rejected);
    free(j->root);
    free(j->bucket);
    free(j);
}

static int random_name(char out[JOURNAL_NAME_LEN + 1])
{
    unsigned char bytes[JOURNAL_NAME_LEN / 2];
    if (getrandom(bytes, sizeof bytes, 0) != (ssize_t)sizeof bytes)
        return -EIO;
    for (size_t i = 0; i < sizeof bytes; i++)
        snprintf(out + 2 * i, 3, "%02x", bytes[i]);
    return 0;
}

static void file_name(const struct journal_rec *rec, const char *suffix, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s", rec->name, suffix);
}

int journal_stage(struct journal *j, const char *domain, enum journal_mode mode,
                  const char *base_root, struct journal_rec *rec, int *fd)
{
    memset(rec, 0, sizeof *rec);
    rec->mode = mode;
    rec->state = JOURNAL_CLEAN;
    snprintf(rec->base_root, sizeof rec->base_root, "%s", base_root ? base_root : "");
    if (!(rec->domain = strdup(domain)) || !(rec->bucket = strdup(j->bucket))) {
        journal_rec_free(rec);
        return -ENOMEM;
    }
    char name[64];
    for (int tries = 0; tries < 8; tries++) {
        int rc = random_name(rec->name);
        if (rc != 0)
            break;
        file_name(rec, ".h5", name, sizeof name);
        *fd = openat(j->staging, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (*fd >= 0)
            return 0;
        if (errno != EEXIST) {
            rc = -errno;
            log_error("%s: cannot create a staged file in %s/staging: %s", domain, j->root,
                      strerror(-rc));
            journal_rec_free(rec);
            return rc;
        }
    }
    journal_rec_free(rec);
    return -EIO;
}

/* The first len bytes of from into to, in the kernel where it can (else through a buffer). */
static int copy_prefix(int from, int to, uint64_t len)
{
    loff_t in = 0, out = 0;
    while ((uint64_t)in < len) {
        ssize_t n = copy_file_range(from, &in, to, &out, (size_t)(len - (uint64_t)in), 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && in == 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS))
            break;
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
    }
    char buf[1 << 16];
    while ((uint64_t)in < len) {
        size_t want = len - (uint64_t)in < sizeof buf ? (size_t)(len - (uint64_t)in) : sizeof buf;
        ssize_t n = pread(from, buf, want, in);
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
        if (pwrite(to, buf, (size_t)n, in) != n)
            return -EIO;
        in += n;
    }
    return 0;
}

int journal_restage(struct journal *j, const struct journal_rec *rec, int fd, uint64_t keep,
                    int *new_fd)
{
    char name[64], tmp[72];
    file_name(rec, ".h5", name, sizeof name);
    snprintf(tmp, sizeof tmp, "%s.new", name);
    int out = openat(j->staging, tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int rc = out < 0 ? -errno : copy_prefix(fd, out, keep);
    if (rc == 0 && renameat(j->staging, tmp, j->staging, name) != 0)
        rc = -errno;
    if (rc != 0) {
        log_error("%s: cannot copy its staged file %s/staging/%s before a change: %s", rec->domain,
                  j->root, name, strerror(-rc));
        if (out >= 0 && (close(out), unlinkat(j->staging, tmp, 0) != 0))
            log_warn("%s: %s/staging/%s stays: %s", rec->domain, j->root, tmp, strerror(errno));
        return rc;
    }
    *new_fd = out;
    return 0;
}

char *journal_staged_path(const struct journal *j, const struct journal_rec *rec)
{
    char *path = NULL;
    if (asprintf(&path, "%s/staging/%s.h5", j->root, rec->name) < 0)
        return NULL;
    return path;
}

static char *rec_text(const struct journal_rec *rec)
{
    json_t *o = json_pack("{s:s?, s:s, s:s, s:s, s:s, s:s, s:s?}", "bucket", rec->bucket, "domain",
                          rec->domain, "mode", mode_names[rec->mode], "state",
                          state_names[rec->state], "base_root", rec->base_root, "new_root",
                          rec->new_root, "vroot", rec->vroot[0] ? rec->vroot : NULL);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return text;
}

static int write_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

int journal_replace_file(int dir, const char *tmp, const char *final, const char *text)
{
    int rc = 0, fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        rc = -errno;
    if (rc == 0)
        rc = write_all(fd, text, strlen(text));
    if (rc == 0 && fsync(fd) != 0)
        rc = -errno;
    if (fd >= 0 && close(fd) != 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && renameat(dir, tmp, dir, final) != 0)
        rc = -errno;
    if (rc == 0 && fsync(dir) != 0)
        rc = -errno;
    if (rc != 0)
        unlinkat(dir, tmp, 0);
    return rc;
}

int journal_write_base(struct journal *j, const struct journal_rec *rec, const char *text)
{
    char tmp[64], final[64];
    file_name(rec, ".h5.base.tmp", tmp, sizeof tmp);
    file_name(rec, ".h5.base", final, sizeof final);
    int rc = journal_replace_file(j->staging, tmp, final, text);
    if (rc != 0)
        log_error("%s: cannot write %s/staging/%s: %s", rec->domain, j->root, final, strerror(-rc));
    return rc;
}

int journal_read_base(struct journal *j, const struct journal_rec *rec, char **text)
{
    char name[64];
    file_name(rec, ".h5.base", name, sizeof name);
    *text = NULL;
    int fd = openat(j->staging, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat sb;
    int rc = fstat(fd, &sb) == 0 ? 0 : -errno;
    char *buf = rc == 0 ? malloc((size_t)sb.st_size + 1) : NULL;
    if (rc == 0 && !buf)
        rc = -ENOMEM;
    ssize_t n = rc == 0 ? pread(fd, buf, (size_t)sb.st_size, 0) : 0;
    if (rc == 0 && n != sb.st_size)
        rc = n < 0 ? -errno : -EIO;
    close(fd);
    if (rc != 0) {
        free(buf);
        return rc;
    }
    buf[n] = '\0';
    *text = buf;
    return 0;
}

int journal_write(struct journal *j, const struct journal_rec *rec)
{
    char tmp[64], final[64];
    file_name(rec, ".json.tmp", tmp, sizeof tmp);
    file_name(rec, ".json", final, sizeof final);
    char *text = rec_text(rec);
    if (!text)
        return -ENOMEM;
    int rc = journal_replace_file(j->records, tmp, final, text);
    if (rc != 0)
        log_error("%s: cannot write the journal record %s/journal/%s: %s", rec->domain, j->root,
                  final, strerror(-rc));
    free(text);
    return rc;
}

void journal_forget(struct journal *j, const struct journal_rec *rec)
{
    char name[64];
    file_name(rec, ".json", name, sizeof name);
    if (unlinkat(j->records, name, 0) != 0 && errno != ENOENT)
        log_warn("%s: cannot remove the journal record %s: %s", rec->domain, name, strerror(errno));
}

void journal_remove(struct journal *j, const struct journal_rec *rec)
{
    char name[64];
    journal_forget(j, rec);
    file_name(rec, ".h5", name, sizeof name);
    if (unlinkat(j->staging, name, 0) != 0 && errno != ENOENT)
        log_warn("%s: cannot remove the staged file %s: %s", rec->domain, name, strerror(errno));
    file_name(rec, ".h5.base", name, sizeof name);
    if (unlinkat(j->staging, name, 0) != 0 && errno != ENOENT)
        log_warn("%s: cannot remove %s: %s", rec->domain, name, strerror(errno));
}

int journal_reject(struct journal *j, const struct journal_rec *rec, char **kept)
{
    char name[64];
    file_name(rec, ".h5", name, sizeof name);
    *kept = NULL;
    if (renameat(j->staging, name, j->rejected, name) != 0) {
        int rc = -errno;
        log_error("%s: cannot move the staged file %s to %s/rejected: %s", rec->domain, name,
                  j->root, strerror(-rc));
        return rc;
    }
    if (asprintf(kept, "%s/rejected/%s", j->root, name) < 0)
        *kept = NULL;
    fsync(j->rejected);
    journal_remove(j, rec);
    return 0;
}

int journal_rec_is_ours(const struct journal *j, const struct journal_rec *rec)
{
    return rec->bucket && strcmp(rec->bucket, j->bucket) == 0;
}

void journal_rec_free(struct journal_rec *rec)
{
    free(rec->domain);
    free(rec->bucket);
    rec->domain = rec->bucket = NULL;
}

void journal_recs_free(struct journal_rec *recs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        journal_rec_free(&recs[i]);
    free(recs);
}

static int index_of(const char *const *names, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (name && strcmp(names[i], name) == 0)
            return (int)i;
    return -1;
}

int journal_copy_root(char out[SCHEMA_ID_BUF], const char *id)
{
    if (!id)
        return -EINVAL;
    if (*id) {
        int version = schema_id_version(id);
        if (!(version == 2 && schema_id_is_root(id) == 1) && !(version == 1 && id[0] == 'g'))
            return -EINVAL;
    }
    snprintf(out, SCHEMA_ID_BUF, "%s", id);
    return 0;
}

/* A record's bucket: absent (or null) in one written before records named it. */
static int copy_bucket(char **out, const json_t *bucket)
{
    *out = NULL;
    if (!bucket || json_is_null(bucket))
        return 0;
    if (!json_is_string(bucket) || !*json_string_value(bucket))
        return -EINVAL;
    return (*out = strdup(json_string_value(bucket))) ? 0 : -ENOMEM;
}

/* Parse one record; -EINVAL for anything not written by journal_write (all len bytes are the
 * record's: bytes after a NUL are not ignored). */
static int parse_rec(const char *text, size_t len, const char *name, struct journal_rec *rec)
{
    json_t *o = json_loadb(text, len, 0, NULL);
    const char *domain = json_string_value(json_object_get(o, "domain"));
    int mode = index_of(mode_names, 3, json_string_value(json_object_get(o, "mode")));
    int state = index_of(state_names, 3, json_string_value(json_object_get(o, "state")));
    int rc = domain && domain[0] == '/' && mode >= 0 && state >= 0 ? 0 : -EINVAL;
    memset(rec, 0, sizeof *rec);
    if (rc == 0)
        rc = journal_copy_root(rec->base_root, json_string_value(json_object_get(o, "base_root")));
    if (rc == 0)
        rc = journal_copy_root(rec->new_root, json_string_value(json_object_get(o, "new_root")));
    if (rc == 0 && json_is_string(json_object_get(o, "vroot"))) /* else none (or before it) */
        rc = journal_copy_root(rec->vroot, json_string_value(json_object_get(o, "vroot")));
    if (rc == 0 && !(rec->domain = strdup(domain)))
        rc = -ENOMEM;
    if (rc == 0)
        rc = copy_bucket(&rec->bucket, json_object_get(o, "bucket"));
    rec->mode = (enum journal_mode)mode;
    rec->state = (enum journal_state)state;
    snprintf(rec->name, sizeof rec->name, "%.*s", JOURNAL_NAME_LEN, name);
    json_decref(o);
    if (rc != 0)
        journal_rec_free(rec);
    return rc;
}

static int read_rec(struct journal *j, const char *file, struct journal_rec *rec)
{
    char text[JOURNAL_REC_MAX + 1];
    int fd = openat(j->records, file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, text, sizeof text); /* one byte more: a longer file is no record */
    close(fd);
    if (n < 0 || n > JOURNAL_REC_MAX)
        return n < 0 ? -EIO : -EINVAL;
    return parse_rec(text, (size_t)n, file, rec);
}

static int is_record_name(const char *name)
{
    size_t len = strlen(name);
    if (len != JOURNAL_NAME_LEN + 5 || strcmp(name + JOURNAL_NAME_LEN, ".json") != 0)
        return 0;
    return strspn(name, "0123456789abcdef") == JOURNAL_NAME_LEN;
}

int journal_list_files(struct journal *j, const struct file_list *how, void **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    int fd = dup(j->records);
    DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
    if (!dir) {
        int rc = -errno;
        if (fd >= 0)
            close(fd);
        return rc;
    }
    rewinddir(dir);
    size_t cap = 0;
    int rc = 0;
    for (struct dirent *e; rc == 0 && (e = readdir(dir));) {
        if (!how->wanted(j, e->d_name))
            continue;
        if (*n == cap) {
            void *bigger = grow_array(*out, &cap, *n + 1, how->size, 8);
            if (!bigger) {
                rc = -ENOMEM;
                break;
            }
            *out = bigger;
        }
        if (how->read_one(j, e->d_name, (char *)*out + *n * how->size) == 0)
            (*n)++;
        else
            log_error("%s %s/journal/%s is unreadable: left as it is", how->what, j->root,
                      e->d_name);
    }
    closedir(dir);
    if (rc != 0) {
        how->free_all(*out, *n);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

static int wanted_rec(const struct journal *j, const char *name)
{
    (void)j;
    return is_record_name(name);
}

static int read_rec_elem(struct journal *j, const char *name, void *elem)
{
    return read_rec(j, name, elem);
}

static void free_recs(void *elems, size_t n)
{
    journal_recs_free(elems, n);
}

int journal_list(struct journal *j, struct journal_rec **recs, size_t *n)
{
    static const struct file_list how = { wanted_rec, read_rec_elem, free_recs, sizeof **recs,
                                          "journal record" };
    void *out;
    int rc = journal_list_files(j, &how, &out, n);
    *recs = out;
    return rc;
}

/* ---- files no record names ---- */

/* name is <JOURNAL_NAME_LEN hex digits><one of suffixes>. */
static int is_staging_name(const char *name, const char *const *suffixes, size_t n)
{
    if (strspn(name, "0123456789abcdef") != JOURNAL_NAME_LEN)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp(name + JOURNAL_NAME_LEN, suffixes[i]) == 0)
            return 1;
    return 0;
}

/* A staged file, its base ranges or their temporary, whose record is gone. An unreadable
 * record still counts: its files stay for whoever looks at it. */
static int is_orphan(struct journal *j, const char *name)
{
    static const char *const suffixes[] = { ".h5", ".h5.base", ".h5.base.tmp" };
    char rec[64];
    struct stat sb;
    if (!is_staging_name(name, suffixes, sizeof suffixes / sizeof suffixes[0]))
        return 0;
    snprintf(rec, sizeof rec, "%.*s.json", JOURNAL_NAME_LEN, name);
    return fstatat(j->records, rec, &sb, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT;
}

/* A record's temporary: journal_replace_file never finished it (a crash). */
static int is_stale_record(struct journal *j, const char *name)
{
    static const char *const suffixes[] = { ".json.tmp" };
    size_t len = strlen(name), suf = strlen(GC_SUFFIX ".tmp");
    (void)j;
    if (strncmp(name, GC_PREFIX, strlen(GC_PREFIX)) == 0 && len > suf &&
        strcmp(name + len - suf, GC_SUFFIX ".tmp") == 0)
        return 1; /* a collector's record never finished; any bucket's: the lock says none runs */
    if (strncmp(name, SWEEP_PREFIX, strlen(SWEEP_PREFIX)) == 0 && len > suf &&
        strcmp(name + len - suf, GC_SUFFIX ".tmp") == 0)
        return 1; /* the same for a sweep's record */
    return is_staging_name(name, suffixes, 1);
}

/* Remove the files of directory dirfd that stale() picks; counts them and their bytes. */
static int sweep_dir(struct journal *j, int dirfd, int (*stale)(struct journal *, const char *),
                     size_t *n, unsigned long long *bytes)
{
    int fd = dup(dirfd);
    DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
    if (!dir) {
        int rc = -errno;
        if (fd >= 0)
            close(fd);
        return rc;
    }
    rewinddir(dir);
    for (struct dirent *e; (e = readdir(dir));) {
        struct stat sb;
        if (!stale(j, e->d_name))
            continue;
        unsigned long long size = fstatat(dirfd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0
                                      ? (unsigned long long)sb.st_blocks * 512
                                      : 0;
        if (unlinkat(dirfd, e->d_name, 0) != 0) {
            log_warn("%s: cannot remove %s: %s", j->root, e->d_name, strerror(errno));
            continue;
        }
        (*n)++;
        *bytes += size;
    }
    closedir(dir);
    return 0;
}

size_t journal_sweep(struct journal *j)
{
    size_t n = 0;
    unsigned long long bytes = 0;
    int rc = sweep_dir(j, j->staging, is_orphan, &n, &bytes);
    if (rc == 0)
        rc = sweep_dir(j, j->records, is_stale_record, &n, &bytes);
    if (rc != 0)
        log_warn("%s: cannot list the staging area to remove what no record names: %s", j->root,
                 strerror(-rc));
    if (n)
        log_info("%s: removed %zu staged files that no journal record names (a write that "
                 "failed, or a crash): %llu bytes freed",
                 j->root, n, bytes);
    return n;
}

/* ---- the cache directory's lock ---- */

/* The pid the holder wrote; 0 when none is there (or it is being rewritten). */
static long lock_holder(int fd)
{
    char buf[24], *end;
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    long pid = strtol(buf, &end, 10);
    return pid > 0 && (*end == '\n' || *end == '\0') ? pid : 0;
}

int journal_lock(const char *cache_dir, int *fd, long *holder)
{
    char *path = NULL;
    *holder = 0;
    int rc = make_dirs(cache_dir);
    if (rc != 0)
        return rc;
    if (asprintf(&path, "%s/lock", cache_dir) < 0)
        return -ENOMEM;
    /* never unlinked: a lock file removed and made again could be locked twice at once */
    int lfd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    free(path);
    if (lfd < 0)
        return -errno;
    if (flock(lfd, LOCK_EX | LOCK_NB) != 0) {
        rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
        if (rc == -EBUSY)
            *holder = lock_holder(lfd);
    } else {
        rc = journal_lock_set_owner(lfd);
    }
    if (rc != 0) {
        close(lfd);
        return rc;
    }
    *fd = lfd;
    return 0;
}

int journal_lock_set_owner(int fd)
{
    char buf[24];
    int n = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0)
        return -errno;
    ssize_t w = pwrite(fd, buf, (size_t)n, 0);
    if (w < 0)
        return -errno;
    return w == n ? 0 : -EIO;
}
