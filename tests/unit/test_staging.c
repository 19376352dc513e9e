/*
 * test_staging: domains open for writing (h5osfs/staging/staging.h), driven as the fs layer
 * drives them but without a mount, over a memory bucket behind the faulty store. What the
 * header promises: handles of a path share one staged file; writes, reads and truncates go to
 * it; the bucket sees nothing until a commit; the last close commits; a failed commit keeps
 * the staged bytes and its record (a later commit, or the next mount, stores them); bytes
 * that are not HDF5 go to rejected/; an O_TRUNC empties without committing; a removed entry
 * is dropped and never committed; a renamed one commits under its new name; an r+ change
 * starts as the domain's file.
 */
#include <dirent.h>
#include <sys/wait.h>

/* a small file: what is tested here does not depend on its size (valgrind runs it too) */
#define RIG_VALUES (1 << 16)
#include "commit_rig.h"
#include "h5osfs/staging/staging.h"

#define PIECE 100000 /* written in pieces of this size, as a cp writes */

struct stack {
    struct rig r;
    struct image_source src;
    struct chunk_cache *cache;
    struct staging *t;
    int committed; /* calls of the committed hook */
    char last_committed[256];
};

static int base_of(void *ctx, const char *path, const char *root, struct image **img)
{
    struct stack *s = ctx;
    return image_build(&s->src, path, root, img);
}

static void on_committed(void *ctx, const char *path)
{
    struct stack *s = ctx;
    s->committed++;
    snprintf(s->last_committed, sizeof s->last_committed, "%s", path);
}

static void stack_open(struct stack *s, const char *name)
{
    memset(s, 0, sizeof *s);
    rig_open(&s->r, name);
    s->src = (struct image_source){ .store = s->r.st, .bucket_name = "bucket" };
    REQUIRE((s->cache = chunk_cache_new(16u << 20)) != NULL);
    struct staging_hooks hooks = {
        .base = base_of, .cache = s->cache, .committed = on_committed, .ctx = s
    };
    REQUIRE(staging_new(&s->r.commit, &hooks, &s->t) == 0);
}

static void stack_close(struct stack *s)
{
    staging_free(s->t);
    chunk_cache_free(s->cache);
    gc_drain(s->r.gc);
    rig_close(&s->r);
}

static struct staging_counts counts_of(struct stack *s)
{
    struct staging_counts c;
    staging_counts(s->t, &c);
    return c;
}

/* Files in the cache directory's sub (staging, journal, rejected). */
static size_t files_in(struct stack *s, const char *sub)
{
    char path[400];
    size_t n = 0;
    snprintf(path, sizeof path, "%s/%s", s->r.cache_dir, sub);
    DIR *d = opendir(path);
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Write bytes to the handle front to back in pieces; 0 when every piece was taken whole. */
static int write_all(struct stack *s, struct staged *h, const unsigned char *bytes, size_t len)
{
    for (size_t off = 0; off < len; off += PIECE) {
        size_t n = len - off < PIECE ? len - off : PIECE;
        if (staging_write(s->t, h, bytes + off, n, off) != (ssize_t)n)
            return -1;
    }
    return 0;
}

/* 1 when the handle reads back exactly bytes (and nothing after them). */
static int reads_back(struct stack *s, struct staged *h, const unsigned char *bytes, size_t len)
{
    unsigned char *buf = malloc(len + 16);
    REQUIRE(buf != NULL);
    ssize_t n = staging_read(s->t, h, buf, len + 16, 0);
    int same = n == (ssize_t)len && memcmp(buf, bytes, len) == 0;
    free(buf);
    return same;
}

/* 1 when the domain at path in the bucket reads as the file of seed. */
static int domain_holds(struct stack *s, const char *path, int seed)
{
    char root[SCHEMA_ID_BUF];
    struct image *img = NULL;
    unsigned char *bytes = NULL;
    size_t len = 0;
    rig_named_root(s->r.mem, path, root);
    if (!root[0] || image_build(&s->src, path, root, &img) != 0)
        return 0;
    int ok = rig_read_image(img, &bytes, &len) == 0 && rig_values_ok(bytes, len, seed);
    free(bytes);
    image_put(img);
    return ok;
}

/* A new file: shared by two handles, read back as written, invisible to the bucket until the
 * last close commits it. */
static void test_new_file_commits_at_last_close(void)
{
    struct stack s;
    struct staged *a = NULL, *b = NULL;
    struct ns_info info;
    char root[SCHEMA_ID_BUF], **names = NULL;
    size_t len, n = 0;
    unsigned char *bytes = rig_h5_bytes(1, &len);
    stack_open(&s, "new");
    CHECK_INT(staging_open(s.t, "/home/u/x.h5", NULL, 1, &a), 0);
    CHECK_INT(staging_open(s.t, "/home/u/x.h5", NULL, 0, &b), 0);
    CHECK(a != NULL && a == b); /* one entry for both handles */
    CHECK_INT(staging_is_new(a), 1);
    CHECK_INT(write_all(&s, a, bytes, len), 0);
    CHECK(reads_back(&s, b, bytes, len));
    staging_info(b, &info);
    CHECK_INT(info.kind, NS_DOMAIN);
    CHECK_INT(info.size, len);
    CHECK_INT(staging_children(s.t, "/home/u", &names, &n), 0);
    CHECK_INT(n, 1);
    if (n == 1)
        CHECK_STR(names[0], "x.h5");
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    CHECK_INT(staging_children(s.t, "/home", &names, &n), 0);
    CHECK_INT(n, 0); /* only direct children */
    free(names);
    struct staged *found = staging_find(s.t, "/home/u/x.h5");
    CHECK(found == a);
    if (found)
        staging_release(s.t, found);
    CHECK(staging_find(s.t, "/home/u/y.h5") == NULL);

    /* the bucket sees nothing, also after the first of two closes */
    rig_named_root(s.r.mem, "/home/u/x.h5", root);
    CHECK_STR(root, "");
    staging_release(s.t, a);
    rig_named_root(s.r.mem, "/home/u/x.h5", root);
    CHECK_STR(root, "");
    CHECK_INT(counts_of(&s).open, 1);
    CHECK_INT(s.committed, 0);
    staging_release(s.t, b); /* the last close commits */
    CHECK(domain_holds(&s, "/home/u/x.h5", 1));
    struct staging_counts c = counts_of(&s);
    CHECK_INT(c.commits, 1);
    CHECK_INT(c.failures, 0);
    CHECK_INT(c.open, 0);
    CHECK_INT(s.committed, 1);
    CHECK_STR(s.last_committed, "/home/u/x.h5");
    CHECK_INT(files_in(&s, "staging"), 0); /* committed and closed: nothing left behind */
    CHECK_INT(files_in(&s, "journal"), 0);
    free(bytes);
    stack_close(&s);
}

/* A commit that fails keeps the staged bytes and the record; a later commit stores them,
 * and a close that still fails leaves them for the next mount's recovery. */
static void test_failed_commit_keeps_bytes(void)
{
    struct stack s;
    struct staged *h = NULL;
    char root[SCHEMA_ID_BUF];
    size_t len;
    unsigned char *bytes = rig_h5_bytes(2, &len);
    stack_open(&s, "failed");
    CHECK_INT(staging_open(s.t, "/home/u/f.h5", NULL, 1, &h), 0);
    CHECK_INT(write_all(&s, h, bytes, len), 0);
    unsigned domain_puts = FAULTY_MASK(FAULTY_PUT) | FAULTY_MASK(FAULTY_PUT_IF);
    rig_add_rule(s.r.st, domain_puts, RIG_DOMAIN_KEYS, FAULTY_FAIL, -EIO);
    CHECK_INT(staging_commit(s.t, h), -EIO);
    CHECK_INT(counts_of(&s).failures, 1);
    CHECK_INT(s.committed, 0);
    rig_named_root(s.r.mem, "/home/u/f.h5", root);
    CHECK_STR(root, "");
    CHECK(reads_back(&s, h, bytes, len));
    CHECK_INT(files_in(&s, "journal"), 1);
    store_faulty_clear(s.r.st);
    CHECK_INT(staging_commit(s.t, h), 0); /* the flush after: stored */
    CHECK(domain_holds(&s, "/home/u/f.h5", 2));
    CHECK_INT(counts_of(&s).commits, 1);
    CHECK_INT(staging_commit(s.t, h), 0); /* nothing changed since: no second commit */
    CHECK_INT(counts_of(&s).commits, 1);
    staging_release(s.t, h);
    CHECK_INT(counts_of(&s).commits, 1);

    /* the last close fails to commit: staged file and record stay, the next mount stores */
    unsigned char *other = rig_h5_bytes(3, &len);
    CHECK_INT(staging_open(s.t, "/home/u/g.h5", NULL, 1, &h), 0);
    CHECK_INT(write_all(&s, h, other, len), 0);
    rig_add_rule(s.r.st, domain_puts, RIG_DOMAIN_KEYS, FAULTY_FAIL, -EIO);
    staging_release(s.t, h);
    CHECK_INT(counts_of(&s).failures, 2);
    CHECK_INT(counts_of(&s).open, 0);
    CHECK_INT(files_in(&s, "staging"), 1);
    CHECK_INT(files_in(&s, "journal"), 1);
    rig_named_root(s.r.mem, "/home/u/g.h5", root);
    CHECK_STR(root, "");
    store_faulty_clear(s.r.st);
    CHECK_INT(staging_recover(s.t), 0);
    CHECK(domain_holds(&s, "/home/u/g.h5", 3));
    CHECK_INT(files_in(&s, "journal"), 0);
    free(other);
    free(bytes);
    stack_close(&s);
}

/* Truncates: shorter reads end at the new size, longer ones read zeros; bytes that are not
 * HDF5 are refused (-EINVAL) and kept in rejected/ at the last close. */
static void test_truncate_and_rejected(void)
{
    struct stack s;
    struct staged *h = NULL;
    unsigned char buf[64];
    char root[SCHEMA_ID_BUF];
    stack_open(&s, "truncate");
    CHECK_INT(staging_open(s.t, "/home/u/t.h5", NULL, 1, &h), 0);
    CHECK_INT(staging_write(s.t, h, "hello, world", 12, 0), 12);
    CHECK_INT(staging_truncate(s.t, h, 5), 0);
    CHECK_INT(staging_read(s.t, h, buf, sizeof buf, 0), 5);
    CHECK(memcmp(buf, "hello", 5) == 0);
    CHECK_INT(staging_truncate(s.t, h, 8), 0);
    memset(buf, 'x', sizeof buf);
    CHECK_INT(staging_read(s.t, h, buf, sizeof buf, 0), 8);
    CHECK(memcmp(buf, "hello\0\0\0", 8) == 0);
    CHECK_INT(staging_read(s.t, h, buf, sizeof buf, 8), 0); /* at the end */
    CHECK_INT(staging_write(s.t, h, "!", 1, 10), 1);        /* past the end: a hole */
    struct ns_info info;
    staging_info(h, &info);
    CHECK_INT(info.size, 11);
    CHECK_INT(staging_commit(s.t, h), -EINVAL);
    CHECK_INT(staging_commit(s.t, h), -EINVAL); /* unchanged since: the same answer */
    staging_release(s.t, h);
    rig_named_root(s.r.mem, "/home/u/t.h5", root);
    CHECK_STR(root, "");
    CHECK_INT(files_in(&s, "rejected"), 1);
    CHECK_INT(files_in(&s, "staging"), 0);
    CHECK_INT(files_in(&s, "journal"), 0);
    stack_close(&s);
}

/* An O_TRUNC open of an entry with uncommitted bytes: empty, and nothing is committed. */
static void test_empty_drops_uncommitted(void)
{
    struct stack s;
    struct staged *a = NULL, *b = NULL;
    char root[SCHEMA_ID_BUF];
    size_t len;
    unsigned char *bytes = rig_h5_bytes(4, &len), buf[8];
    stack_open(&s, "empty");
    CHECK_INT(staging_open(s.t, "/home/u/e.h5", NULL, 1, &a), 0);
    CHECK_INT(write_all(&s, a, bytes, len), 0);
    CHECK_INT(staging_open(s.t, "/home/u/e.h5", NULL, 1, &b), 0); /* emptied as it joins */
    CHECK(a == b);
    CHECK_INT(staging_read(s.t, a, buf, sizeof buf, 0), 0);
    staging_release(s.t, b);
    staging_release(s.t, a);
    rig_named_root(s.r.mem, "/home/u/e.h5", root);
    CHECK_STR(root, "");
    CHECK_INT(counts_of(&s).commits, 0);
    CHECK_INT(files_in(&s, "staging"), 0);
    CHECK_INT(files_in(&s, "rejected"), 0);
    free(bytes);
    stack_close(&s);
}

struct removal {
    int calls, fresh, answer;
};

static int remove_in_bucket(void *ctx, const char *path, int fresh)
{
    (void)path;
    struct removal *r = ctx;
    r->calls++;
    r->fresh = fresh;
    return r->answer;
}

/* unlink of a staged file: remove decides; when it agrees the entry is dropped, its handles
 * read ESTALE, flush and close succeed, and nothing is ever committed. */
static void test_unlink_drops_entry(void)
{
    struct stack s;
    struct staged *h = NULL;
    char root[SCHEMA_ID_BUF], buf[8];
    size_t len;
    unsigned char *bytes = rig_h5_bytes(5, &len);
    struct removal no = { .answer = -EACCES }, yes = { .answer = 0 };
    stack_open(&s, "unlink");
    CHECK_INT(staging_open(s.t, "/home/u/d.h5", NULL, 1, &h), 0);
    CHECK_INT(write_all(&s, h, bytes, len), 0);
    CHECK_INT(staging_unlink(s.t, "/home/u/d.h5", remove_in_bucket, &no), -EACCES);
    CHECK_INT(no.fresh, 1);
    CHECK(reads_back(&s, h, bytes, len)); /* refused: as it was */
    CHECK_INT(staging_unlink(s.t, "/home/u/d.h5", remove_in_bucket, &yes), 0);
    CHECK_INT(yes.fresh, 1);
    CHECK(staging_find(s.t, "/home/u/d.h5") == NULL);
    CHECK_INT(staging_read(s.t, h, buf, sizeof buf, 0), -ESTALE);
    CHECK_INT(staging_write(s.t, h, "x", 1, 0), -ESTALE);
    CHECK_INT(staging_truncate(s.t, h, 0), -ESTALE);
    CHECK_INT(staging_commit(s.t, h), 0);
    CHECK_INT(files_in(&s, "journal"), 0);
    staging_release(s.t, h);
    rig_named_root(s.r.mem, "/home/u/d.h5", root);
    CHECK_STR(root, "");
    CHECK_INT(counts_of(&s).commits, 0);
    CHECK_INT(files_in(&s, "staging"), 0);
    /* no entry: remove is asked for a committed file */
    struct removal plain = { .answer = -ENOENT };
    CHECK_INT(staging_unlink(s.t, "/home/u/none.h5", remove_in_bucket, &plain), -ENOENT);
    CHECK_INT(plain.calls, 1);
    CHECK_INT(plain.fresh, 0);
    free(bytes);
    stack_close(&s);
}

/* A rename moves the entry: found under the new name only, committed there. */
static void test_rename_commits_under_new_name(void)
{
    struct stack s;
    struct staged *h = NULL;
    char root[SCHEMA_ID_BUF];
    size_t len;
    unsigned char *bytes = rig_h5_bytes(6, &len);
    stack_open(&s, "rename");
    CHECK_INT(staging_open(s.t, "/home/u/old.h5", NULL, 1, &h), 0);
    CHECK_INT(write_all(&s, h, bytes, len), 0);
    staging_rename(s.t, "/home/u/old.h5", "/home/u/new.h5");
    CHECK(staging_find(s.t, "/home/u/old.h5") == NULL);
    struct staged *found = staging_find(s.t, "/home/u/new.h5");
    CHECK(found == h);
    if (found)
        staging_release(s.t, found);
    staging_release(s.t, h);
    CHECK(domain_holds(&s, "/home/u/new.h5", 6));
    rig_named_root(s.r.mem, "/home/u/old.h5", root);
    CHECK_STR(root, "");
    free(bytes);
    stack_close(&s);
}

/* mv of a folder that holds a file being written: the file moves with its folder, as open
 * files do on any file system (the fs layer moves the handles' inodes with it): found under
 * its new path only, listed in the new folder, and committed there at its last close. */
static void test_rename_of_its_folder_moves_the_entry(void)
{
    struct stack s;
    struct staged *h = NULL, *other = NULL;
    char root[SCHEMA_ID_BUF], **names = NULL;
    size_t len, n = 0;
    unsigned char *bytes = rig_h5_bytes(10, &len);
    stack_open(&s, "rename_folder");
    const char *folder = "{\"owner\": \"u\", \"acls\": {\"u\": {\"create\": true, \"read\": true, "
                         "\"update\": true, \"delete\": true, \"readACL\": true, \"updateACL\": "
                         "true}}, \"created\": 1, \"lastModified\": 1}";
    REQUIRE(store_put(s.r.mem, "home/u/.domain.json", folder, strlen(folder)) == 0);
    REQUIRE(store_put(s.r.mem, "home/u/d/.domain.json", folder, strlen(folder)) == 0);
    CHECK_INT(staging_open(s.t, "/home/u/d/new.h5", NULL, 1, &h), 0);
    CHECK_INT(staging_open(s.t, "/home/u/dd.h5", NULL, 1, &other), 0); /* not below it */
    CHECK_INT(write_all(&s, h, bytes, len), 0);
    CHECK_INT(domops_rename(&s.r.ops, "u", "/home/u/d", "/home/u/e", 0), 0);
    staging_rename(s.t, "/home/u/d", "/home/u/e");
    CHECK(staging_find(s.t, "/home/u/d/new.h5") == NULL);
    struct staged *found = staging_find(s.t, "/home/u/e/new.h5");
    CHECK(found == h);
    if (found)
        staging_release(s.t, found);
    found = staging_find(s.t, "/home/u/dd.h5");
    CHECK(found == other);
    if (found)
        staging_release(s.t, found);
    CHECK_INT(staging_children(s.t, "/home/u/e", &names, &n), 0);
    CHECK_INT(n, 1);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    staging_release(s.t, other);
    staging_release(s.t, h);
    CHECK(domain_holds(&s, "/home/u/e/new.h5", 10));
    rig_named_root(s.r.mem, "/home/u/d/new.h5", root);
    CHECK_STR(root, "");
    CHECK_INT(files_in(&s, "journal"), 0);
    free(bytes);
    stack_close(&s);
}

/* r+: the staged file reads as the domain's file; rewriting it commits a new root whose
 * values are the same, the old root is collected; O_TRUNC over it replaces it. */
static void test_change_of_a_domain(void)
{
    struct stack s;
    struct staged *h = NULL;
    char root[SCHEMA_ID_BUF], now[SCHEMA_ID_BUF];
    struct image *img = NULL;
    unsigned char *image_bytes = NULL;
    size_t image_len = 0, len;
    stack_open(&s, "change");
    rig_commit(&s.r, "/home/u/c.h5", 7, root);
    REQUIRE(image_build(&s.src, "/home/u/c.h5", root, &img) == 0);
    REQUIRE(rig_read_image(img, &image_bytes, &image_len) == 0);
    image_put(img);

    CHECK_INT(staging_open(s.t, "/home/u/c.h5", root, 0, &h), 0);
    CHECK_INT(staging_is_new(h), 0);
    CHECK_INT(staging_root_in_use(s.t, root), 1);
    CHECK(reads_back(&s, h, image_bytes, image_len));
    CHECK_INT(staging_commit(s.t, h), 0); /* nothing written: nothing to commit */
    CHECK_INT(counts_of(&s).commits, 0);
    CHECK_INT(write_all(&s, h, image_bytes, image_len), 0);
    staging_release(s.t, h);
    CHECK_INT(counts_of(&s).commits, 1);
    rig_named_root(s.r.mem, "/home/u/c.h5", now);
    CHECK(now[0] && strcmp(now, root) != 0);
    CHECK(domain_holds(&s, "/home/u/c.h5", 7));
    gc_drain(s.r.gc);
    CHECK_INT(rig_root_objects(s.r.mem, root), 0);
    CHECK_INT(staging_root_in_use(s.t, root), 0);

    /* O_TRUNC over the domain: its file is never staged, the new bytes replace it */
    unsigned char *bytes = rig_h5_bytes(8, &len);
    snprintf(root, sizeof root, "%s", now);
    CHECK_INT(staging_open(s.t, "/home/u/c.h5", root, 1, &h), 0);
    CHECK_INT(staging_read(s.t, h, image_bytes, 16, 0), 0);
    CHECK_INT(write_all(&s, h, bytes, len), 0);
    staging_release(s.t, h);
    CHECK(domain_holds(&s, "/home/u/c.h5", 8));
    rig_named_root(s.r.mem, "/home/u/c.h5", now);
    CHECK(strcmp(now, root) != 0);
    free(bytes);
    free(image_bytes);
    stack_close(&s);
}

/* r+ of a domain whose file cannot be built: every use of the entry fails, nothing is
 * committed, the domain stays as it was. */
static void test_change_base_fails(void)
{
    struct stack s;
    struct staged *h = NULL;
    char root[SCHEMA_ID_BUF], now[SCHEMA_ID_BUF], glob[64], buf[8];
    stack_open(&s, "base");
    rig_commit(&s.r, "/home/u/b.h5", 9, root);
    snprintf(glob, sizeof glob, "db/%.17s/.group.json", root + 2);
    rig_add_rule(s.r.st, FAULTY_MASK(FAULTY_GET), glob, FAULTY_FAIL, -EIO);
    CHECK_INT(staging_open(s.t, "/home/u/b.h5", root, 0, &h), 0); /* staged at first use */
    CHECK_INT(staging_read(s.t, h, buf, sizeof buf, 0), -EIO);
    CHECK_INT(staging_write(s.t, h, "x", 1, 0), -EIO);
    store_faulty_clear(s.r.st);
    CHECK_INT(staging_read(s.t, h, buf, sizeof buf, 0), -EIO); /* stays with the entry */
    staging_release(s.t, h);
    CHECK_INT(counts_of(&s).commits, 0);
    rig_named_root(s.r.mem, "/home/u/b.h5", now);
    CHECK_STR(now, root);
    CHECK_INT(files_in(&s, "journal"), 0);
    CHECK_INT(files_in(&s, "staging"), 0);
    stack_close(&s);
}

static int first_small_extent(void *ctx, uint64_t off, uint64_t len)
{
    uint64_t *found = ctx;
    if (len < 4096 && !found[1]) {
        found[0] = off;
        found[1] = len;
    }
    return 0;
}

/*
 * A crash after an r+ write into a small chunk (one that holds no whole file-system block):
 * the next mount's recovery commits the write. A child process stands for the daemon that
 * dies: it stages the change and writes, then exits without a close.
 */
static void test_recovery_keeps_a_write_into_a_small_chunk(void)
{
    struct stack s;
    struct image *img = NULL;
    char root[SCHEMA_ID_BUF], now[SCHEMA_ID_BUF];
    uint64_t small[2] = { 0, 0 };
    unsigned char *bytes = NULL;
    size_t len = 0;
    stack_open(&s, "crash");
    rig_commit_small(&s.r, "/home/u/small.h5", root);
    REQUIRE(image_build(&s.src, "/home/u/small.h5", root, &img) == 0);
    REQUIRE(image_for_each_chunk(img, first_small_extent, small) == 0 && small[1] > 0);
    image_put(img);
    fflush(NULL);
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        struct staged *h = NULL;
        int ok = staging_open(s.t, "/home/u/small.h5", root, 0, &h) == 0 &&
                 staging_write(s.t, h, "\x7f\x7f\x7f\x7f", 4, small[0] + 2 * sizeof(int)) == 4;
        _exit(ok ? 0 : 1); /* the crash: no close, no commit */
    }
    int status = -1;
    REQUIRE(waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_INT(files_in(&s, "journal"), 1);
    CHECK_INT(staging_recover(s.t), 0);
    rig_named_root(s.r.mem, "/home/u/small.h5", now);
    CHECK(now[0] && strcmp(now, root) != 0);
    REQUIRE(image_build(&s.src, "/home/u/small.h5", now, &img) == 0);
    CHECK_INT(rig_read_image(img, &bytes, &len), 0);
    CHECK_INT(rig_small_value(bytes, len, 2), 0x7f7f7f7f);
    CHECK_INT(rig_small_value(bytes, len, 3), 4); /* the rest as it was */
    free(bytes);
    image_put(img);
    stack_close(&s);
}

/* The last open's close takes the entry off its path though a reference (the kernel's
 * release, held back) remains: the path is free for a new entry, and the old one is
 * finished (its rejected bytes kept) only at its last release. */
static void test_closed_entry_leaves_its_path(void)
{
    struct stack s;
    struct staged *a = NULL, *b = NULL, *c = NULL;
    char **names = NULL;
    size_t n = 0;
    stack_open(&s, "closed");
    CHECK_INT(staging_open(s.t, "/home/u/c.h5", NULL, 1, &a), 0);
    CHECK_INT(staging_open(s.t, "/home/u/c.h5", NULL, 0, &b), 0);
    CHECK_INT(staging_write(s.t, a, "not hdf5", 8, 0), 8);
    CHECK_INT(staging_commit(s.t, a), -EINVAL);
    staging_close(s.t, a);
    struct staged *found = staging_find(s.t, "/home/u/c.h5");
    CHECK(found == a); /* b is still open */
    if (found)
        staging_release(s.t, found);
    staging_close(s.t, b);
    CHECK(staging_find(s.t, "/home/u/c.h5") == NULL);
    CHECK_INT(staging_children(s.t, "/home/u", &names, &n), 0);
    CHECK_INT(n, 0);
    free(names);
    CHECK_INT(counts_of(&s).open, 1); /* its staged file is still there */
    CHECK_INT(staging_open(s.t, "/home/u/c.h5", NULL, 1, &c), 0);
    CHECK(c != NULL && c != a); /* a new entry, empty */
    CHECK_INT(staging_is_new(c), 1);
    CHECK_INT(counts_of(&s).open, 2);
    staging_release(s.t, a);
    CHECK_INT(files_in(&s, "rejected"), 0);
    staging_release(s.t, b); /* the release: the rejected bytes are kept now */
    CHECK_INT(files_in(&s, "rejected"), 1);
    CHECK_INT(counts_of(&s).open, 1);
    staging_close(s.t, c);
    staging_release(s.t, c);
    CHECK_INT(counts_of(&s).open, 0);
    CHECK_INT(files_in(&s, "staging"), 0);
    CHECK_INT(files_in(&s, "journal"), 0);
    stack_close(&s);
}

/* An r+ entry taken off its path by its last close still reads its base version's objects
 * until its release: the collector keeps them (staging_root_in_use). */
static void test_closed_change_keeps_its_base(void)
{
    struct stack s;
    struct staged *h = NULL;
    char root[SCHEMA_ID_BUF];
    stack_open(&s, "closed-change");
    rig_commit(&s.r, "/home/u/k.h5", 7, root);
    CHECK_INT(staging_open(s.t, "/home/u/k.h5", root, 0, &h), 0);
    CHECK_INT(staging_write(s.t, h, "x", 1, 0), 1); /* its overlay now reads the base */
    staging_close(s.t, h);
    CHECK(staging_find(s.t, "/home/u/k.h5") == NULL);
    CHECK_INT(staging_root_in_use(s.t, root), 1);
    staging_release(s.t, h);
    CHECK_INT(staging_root_in_use(s.t, root), 0);
    gc_drain(s.r.gc);
    stack_close(&s);
}

/* A last close whose commit failed leaves a detached entry that its release tries again: an
 * unlink of its path in between drops it (else the release would store what was just
 * removed), and a rename of its folder takes it along (else it would be stored at the old
 * path). */
static void test_unlink_and_rename_reach_a_closed_entry(void)
{
    struct stack s;
    struct staged *h = NULL, *g = NULL;
    char root[SCHEMA_ID_BUF];
    size_t len;
    unsigned char *bytes = rig_h5_bytes(11, &len);
    struct removal yes = { .answer = 0 };
    unsigned domain_puts = FAULTY_MASK(FAULTY_PUT) | FAULTY_MASK(FAULTY_PUT_IF);
    stack_open(&s, "closed_ns");
    CHECK_INT(staging_open(s.t, "/home/u/gone.h5", NULL, 1, &h), 0);
    CHECK_INT(staging_open(s.t, "/home/u/d/moved.h5", NULL, 1, &g), 0);
    CHECK_INT(write_all(&s, h, bytes, len), 0);
    CHECK_INT(write_all(&s, g, bytes, len), 0);
    rig_add_rule(s.r.st, domain_puts, RIG_DOMAIN_KEYS, FAULTY_FAIL, -EIO);
    CHECK_INT(staging_commit(s.t, h), -EIO); /* the last close's error */
    CHECK_INT(staging_commit(s.t, g), -EIO);
    staging_close(s.t, h);
    staging_close(s.t, g);
    store_faulty_clear(s.r.st);
    CHECK_INT(staging_unlink(s.t, "/home/u/gone.h5", remove_in_bucket, &yes), 0);
    CHECK_INT(yes.calls, 1);
    CHECK_INT(yes.fresh, 1);
    staging_rename(s.t, "/home/u/d", "/home/u/e");
    staging_release(s.t, h); /* the releases */
    staging_release(s.t, g);
    rig_named_root(s.r.mem, "/home/u/gone.h5", root);
    CHECK_STR(root, "");
    rig_named_root(s.r.mem, "/home/u/d/moved.h5", root);
    CHECK_STR(root, "");
    CHECK(domain_holds(&s, "/home/u/e/moved.h5", 11));
    CHECK_INT(files_in(&s, "journal"), 0);
    free(bytes);
    stack_close(&s);
}

/* A new file whose last close failed to commit (-EIO: the store refused), detached at path
 * with its release still to come (the release tries the commit again). */
static struct staged *closed_after_a_failed_commit(struct stack *s, const char *path, int seed)
{
    struct staged *h = NULL;
    size_t len;
    unsigned char *bytes = rig_h5_bytes(seed, &len);
    unsigned domain_puts = FAULTY_MASK(FAULTY_PUT) | FAULTY_MASK(FAULTY_PUT_IF);
    CHECK_INT(staging_open(s->t, path, NULL, 1, &h), 0);
    CHECK_INT(write_all(s, h, bytes, len), 0);
    rig_add_rule(s->r.st, domain_puts, RIG_DOMAIN_KEYS, FAULTY_FAIL, -EIO);
    CHECK_INT(staging_commit(s->t, h), -EIO);
    staging_close(s->t, h);
    store_faulty_clear(s->r.st);
    free(bytes);
    return h;
}

/* A path can have several entries: two writers' last closes failed one after the other (each
 * detached, each release still to come) and a third writer has it open. An unlink reaches all
 * three: no release stores anything under the removed name, and nothing is kept. */
static void test_unlink_reaches_every_entry_of_the_path(void)
{
    struct stack s;
    struct staged *c = NULL;
    char root[SCHEMA_ID_BUF], buf[8];
    struct removal yes = { .answer = 0 };
    stack_open(&s, "unlink_every");
    struct staged *a = closed_after_a_failed_commit(&s, "/home/u/x.h5", 12);
    struct staged *b = closed_after_a_failed_commit(&s, "/home/u/x.h5", 13);
    CHECK(a != b);
    CHECK_INT(staging_open(s.t, "/home/u/x.h5", NULL, 1, &c), 0);
    CHECK_INT(staging_write(s.t, c, "not yet", 7, 0), 7);
    CHECK_INT(staging_unlink(s.t, "/home/u/x.h5", remove_in_bucket, &yes), 0);
    CHECK_INT(yes.calls, 1);
    CHECK_INT(yes.fresh, 1); /* asked of the open one: never committed */
    CHECK_INT(staging_read(s.t, a, buf, sizeof buf, 0), -ESTALE);
    CHECK_INT(staging_write(s.t, b, "x", 1, 0), -ESTALE);
    CHECK_INT(staging_commit(s.t, a), 0);
    staging_close(s.t, c);
    staging_release(s.t, c);
    staging_release(s.t, b); /* the releases: they would try the commits again */
    staging_release(s.t, a);
    rig_named_root(s.r.mem, "/home/u/x.h5", root);
    CHECK_STR(root, "");
    CHECK_INT(counts_of(&s).commits, 0);
    CHECK_INT(counts_of(&s).open, 0);
    CHECK_INT(files_in(&s, "staging"), 0);
    CHECK_INT(files_in(&s, "journal"), 0);
    CHECK_INT(files_in(&s, "rejected"), 0);
    stack_close(&s);
}

/* A rename onto a path removes what is staged there first (the fs layer's staging_unlink of
 * the target): every entry, not the first found, so that no release stores over the file
 * that took the name. The file moved there is what is committed. */
static void test_rename_onto_reaches_every_entry_of_the_target(void)
{
    struct stack s;
    struct staged *moved = NULL;
    size_t len;
    unsigned char *bytes = rig_h5_bytes(14, &len);
    struct removal yes = { .answer = 0 };
    stack_open(&s, "rename_onto_every");
    struct staged *a = closed_after_a_failed_commit(&s, "/home/u/to.h5", 15);
    struct staged *b = closed_after_a_failed_commit(&s, "/home/u/to.h5", 16);
    CHECK_INT(staging_open(s.t, "/home/u/from.h5", NULL, 1, &moved), 0);
    CHECK_INT(write_all(&s, moved, bytes, len), 0);
    CHECK_INT(staging_unlink(s.t, "/home/u/to.h5", remove_in_bucket, &yes), 0);
    CHECK_INT(yes.fresh, 1); /* asked of the latest closed one: no domain behind it */
    staging_rename(s.t, "/home/u/from.h5", "/home/u/to.h5");
    staging_close(s.t, moved);
    staging_release(s.t, moved);
    CHECK(domain_holds(&s, "/home/u/to.h5", 14));
    staging_release(s.t, a);
    staging_release(s.t, b);
    CHECK(domain_holds(&s, "/home/u/to.h5", 14));
    CHECK_INT(counts_of(&s).commits, 1);
    CHECK_INT(files_in(&s, "journal"), 0);
    CHECK_INT(files_in(&s, "rejected"), 0);
    free(bytes);
    stack_close(&s);
}

/* rmdir of a folder: a file open for writing below it keeps it (ENOTEMPTY, remove not
 * asked), as a listing shows that file; once only closed writers' entries are left below it
 * (not listed: their closes failed), remove decides, and they all go with the folder. */
static void test_rmdir_reaches_the_entries_below(void)
{
    struct stack s;
    struct staged *open = NULL;
    char root[SCHEMA_ID_BUF];
    struct removal yes = { .answer = 0 };
    stack_open(&s, "rmdir_below");
    struct staged *a = closed_after_a_failed_commit(&s, "/home/u/d/a.h5", 17);
    struct staged *b = closed_after_a_failed_commit(&s, "/home/u/d/e/b.h5", 18);
    struct staged *beside = closed_after_a_failed_commit(&s, "/home/u/dd.h5", 19);
    CHECK_INT(staging_open(s.t, "/home/u/d/open.h5", NULL, 1, &open), 0);
    CHECK_INT(staging_rmdir(s.t, "/home/u/d", remove_in_bucket, &yes), -ENOTEMPTY);
    CHECK_INT(yes.calls, 0);
    staging_close(s.t, open);
    staging_release(s.t, open); /* nothing written: nothing to commit */
    CHECK_INT(staging_rmdir(s.t, "/home/u/d", remove_in_bucket, &yes), 0);
    CHECK_INT(yes.calls, 1);
    CHECK_INT(yes.fresh, 0);
    staging_release(s.t, a);
    staging_release(s.t, b);
    staging_release(s.t, beside); /* not below the folder: its release stores it */
    rig_named_root(s.r.mem, "/home/u/d/a.h5", root);
    CHECK_STR(root, "");
    rig_named_root(s.r.mem, "/home/u/d/e/b.h5", root);
    CHECK_STR(root, "");
    CHECK(domain_holds(&s, "/home/u/dd.h5", 19));
    CHECK_INT(files_in(&s, "journal"), 0);
    CHECK_INT(files_in(&s, "rejected"), 0);
    stack_close(&s);
}

/* A handle writes after its last close (a child that inherited the descriptor): an open of
 * the path again. A writer that opened the path meanwhile has an entry of its own: the handle
 * joins it, so one staged file and one commit hold both writers' bytes (no ESTALE between
 * two entries of one path). */
static void test_reopen_joins_the_writer_of_the_path(void)
{
    struct stack s;
    struct staged *a = NULL, *w = NULL, *now = NULL;
    char root[SCHEMA_ID_BUF];
    size_t len;
    unsigned char *bytes = rig_h5_bytes(21, &len);
    stack_open(&s, "reopen_joins");
    rig_commit(&s.r, "/home/u/j.h5", 20, root);
    CHECK_INT(staging_open(s.t, "/home/u/j.h5", root, 0, &a), 0);
    staging_close(s.t, a); /* its last close; its release is still to come */
    CHECK_INT(staging_open(s.t, "/home/u/j.h5", root, 0, &w), 0);
    CHECK(w != a);
    CHECK_INT(staging_reopen(s.t, a, &now), 0);
    CHECK(now == w);
    CHECK_INT(staging_truncate(s.t, now, 0), 0); /* the child rewrites the file */
    CHECK_INT(write_all(&s, now, bytes, len), 0);
    CHECK(reads_back(&s, w, bytes, len)); /* the writer sees it: one file */
    CHECK_INT(staging_commit(s.t, w), 0); /* the writer's close */
    staging_close(s.t, w);
    CHECK(domain_holds(&s, "/home/u/j.h5", 21));
    struct staged *found = staging_find(s.t, "/home/u/j.h5");
    CHECK(found == w); /* the reopened handle still has it open */
    if (found)
        staging_release(s.t, found);
    CHECK_INT(staging_commit(s.t, now), 0); /* the child's close: nothing new */
    staging_close(s.t, now);
    CHECK(staging_find(s.t, "/home/u/j.h5") == NULL);
    staging_release(s.t, w);
    staging_release(s.t, now);
    staging_release(s.t, a);
    CHECK(domain_holds(&s, "/home/u/j.h5", 21));
    CHECK_INT(counts_of(&s).commits, 1);
    CHECK_INT(counts_of(&s).lost, 0);
    CHECK_INT(counts_of(&s).open, 0);
    CHECK_INT(files_in(&s, "rejected"), 0);
    CHECK_INT(files_in(&s, "journal"), 0);
    free(bytes);
    stack_close(&s);
}

/* With no writer on the path, the handle's own entry goes back onto it, with what it holds
 * (listed, joined by the next open), until its next last close; once removed, a write after
 * the last close finds nothing to open: ESTALE. */
static void test_reopen_puts_the_closed_entry_back(void)
{
    struct stack s;
    struct staged *a = NULL, *b = NULL, *now = NULL;
    char root[SCHEMA_ID_BUF], **names = NULL;
    size_t len, n = 0;
    unsigned char *bytes = rig_h5_bytes(22, &len);
    struct removal yes = { .answer = 0 };
    stack_open(&s, "reopen_back");
    CHECK_INT(staging_open(s.t, "/home/u/n.h5", NULL, 1, &a), 0);
    CHECK_INT(write_all(&s, a, bytes, len), 0);
    CHECK_INT(staging_commit(s.t, a), 0);
    staging_close(s.t, a);
    CHECK(staging_find(s.t, "/home/u/n.h5") == NULL);
    CHECK_INT(staging_reopen(s.t, a, &now), 0);
    CHECK(now == a);
    CHECK_INT(staging_children(s.t, "/home/u", &names, &n), 0);
    CHECK_INT(n, 1);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    rig_named_root(s.r.mem, "/home/u/n.h5", root);
    CHECK_INT(staging_open(s.t, "/home/u/n.h5", root, 0, &b), 0);
    CHECK(b == a);
    staging_close(s.t, b);
    staging_release(s.t, b);
    staging_close(s.t, now);
    staging_release(s.t, now);
    CHECK(staging_find(s.t, "/home/u/n.h5") == NULL); /* off the path again */
    CHECK_INT(counts_of(&s).open, 1);
    CHECK_INT(staging_unlink(s.t, "/home/u/n.h5", remove_in_bucket, &yes), 0);
    CHECK_INT(staging_reopen(s.t, a, &now), -ESTALE);
    staging_release(s.t, a);
    CHECK_INT(counts_of(&s).open, 0);
    CHECK_INT(files_in(&s, "staging"), 0);
    free(bytes);
    stack_close(&s);
}

/* A closed entry whose change lost to another writer's commit (ESTALE) can never be stored:
 * a write after its last close goes to it, as its descriptor's file, but it stays off the
 * path, so that the next open stages the stored version instead of joining it. */
static void test_reopen_leaves_a_lost_entry_off_the_path(void)
{
    struct stack s;
    struct staged *a = NULL, *w = NULL, *now = NULL, *next = NULL;
    char root[SCHEMA_ID_BUF], head[8];
    stack_open(&s, "reopen_lost");
    rig_commit(&s.r, "/home/u/l.h5", 23, root);
    CHECK_INT(staging_open(s.t, "/home/u/l.h5", root, 0, &a), 0);
    CHECK_INT(staging_read(s.t, a, head, sizeof head, 0), 8);
    CHECK_INT(staging_write(s.t, a, head, sizeof head, 0), 8);
    staging_close(s.t, a); /* its commit is still to come (its release) */
    CHECK_INT(staging_open(s.t, "/home/u/l.h5", root, 0, &w), 0);
    CHECK_INT(staging_write(s.t, w, head, sizeof head, 0), 8);
    CHECK_INT(staging_commit(s.t, w), 0);
    staging_close(s.t, w);
    staging_release(s.t, w);
    CHECK_INT(staging_commit(s.t, a), -ESTALE);
    CHECK_INT(staging_reopen(s.t, a, &now), 0);
    CHECK(now == a);
    CHECK(staging_find(s.t, "/home/u/l.h5") == NULL);
    rig_named_root(s.r.mem, "/home/u/l.h5", root);
    CHECK_INT(staging_open(s.t, "/home/u/l.h5", root, 0, &next), 0);
    CHECK(next != a);
    staging_close(s.t, next);
    staging_release(s.t, next);
    staging_close(s.t, now);
    staging_release(s.t, now);
    staging_release(s.t, a);
    CHECK_INT(files_in(&s, "rejected"), 1); /* the lost change, kept whole */
    CHECK_INT(counts_of(&s).open, 0);
    stack_close(&s);
}

int main(void)
{
    rig_setup("staging");
    test_new_file_commits_at_last_close();
    test_failed_commit_keeps_bytes();
    test_truncate_and_rejected();
    test_closed_entry_leaves_its_path();
    test_closed_change_keeps_its_base();
    test_unlink_and_rename_reach_a_closed_entry();
    test_unlink_reaches_every_entry_of_the_path();
    test_rename_onto_reaches_every_entry_of_the_target();
    test_rmdir_reaches_the_entries_below();
    test_reopen_joins_the_writer_of_the_path();
    test_reopen_puts_the_closed_entry_back();
    test_reopen_leaves_a_lost_entry_off_the_path();
    test_empty_drops_uncommitted();
    test_unlink_drops_entry();
    test_rename_commits_under_new_name();
    test_rename_of_its_folder_moves_the_entry();
    test_change_of_a_domain();
    test_change_base_fails();
    test_recovery_keeps_a_write_into_a_small_chunk();
    rig_teardown();
    return check_done("staging");
}
