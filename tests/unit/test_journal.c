/*
 * test_journal: the staging area's records on a real temporary cache directory: what is
 * created, what survives a "crash" (a new journal object over the same directory), rejects,
 * removal, what the sweep at mount removes, records that are not ours, the bucket each
 * record names (another bucket's mount on the same directory must not take it for its own),
 * the collector's records, and the directory's lock across a fork (a daemonised mount's).
 */
#include "h5osfs/commit/journal.h"

#include "check.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static int exists(const char *dir, const char *sub, const char *name, const char *suffix)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/%s%s", dir, sub, name, suffix);
    return access(path, F_OK) == 0;
}

#define BUCKET_A "/srv/buckets/a"
#define BUCKET_B "s3:http://127.0.0.1:9000/b/prefix"

static size_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (size_t)st.st_size : (size_t)-1;
}

static void test_records_survive_a_restart(const char *dir)
{
    struct journal *j = NULL;
    struct journal_rec rec, other;
    int fd = -1, fd2 = -1;
    CHECK_INT(journal_open(dir, BUCKET_A, &j), 0);
    CHECK_INT(journal_stage(j, "/home/u/a.h5", JOURNAL_NEW, NULL, &rec, &fd), 0);
    CHECK_STR(rec.bucket, BUCKET_A);
    CHECK_INT(journal_rec_is_ours(j, &rec), 1);
    CHECK(fd >= 0);
    CHECK_INT(strlen(rec.name), JOURNAL_NAME_LEN);
    CHECK_INT(write(fd, "abc", 3), 3);
    close(fd);
    rec.state = JOURNAL_COMMITTING;
    snprintf(rec.new_root, sizeof rec.new_root, "g-b03b24ef-69f244b6-38b3-ac67e1-7acc3e");
    /* a versioned commit's version root, recorded before its first object */
    snprintf(rec.vroot, sizeof rec.vroot, "g-12345678-90abcdef-9abc-def018-234567");
    CHECK_INT(journal_write(j, &rec), 0);
    CHECK_INT(journal_stage(j, "/home/u/b \"q\".h5", JOURNAL_CHANGE,
                            "g-b03b24ef-69f244b6-38b3-ac67e1-7acc3e", &other, &fd2),
              0);
    close(fd2);
    CHECK(strcmp(rec.name, other.name) != 0);
    CHECK_INT(journal_write(j, &other), 0);
    char *staged = journal_staged_path(j, &rec);
    CHECK_INT(file_size(staged), 3);
    free(staged);
    journal_close(j);

    /* a new journal over the same directory: what a restart sees */
    struct journal_rec *recs = NULL;
    size_t n = 0;
    CHECK_INT(journal_open(dir, BUCKET_A, &j), 0);
    CHECK_INT(journal_list(j, &recs, &n), 0);
    CHECK_INT(n, 2);
    for (size_t i = 0; i < n; i++) {
        const struct journal_rec *r = &recs[i];
        const struct journal_rec *want = strcmp(r->name, rec.name) == 0 ? &rec : &other;
        CHECK_STR(r->bucket, BUCKET_A);
        CHECK_INT(journal_rec_is_ours(j, r), 1);
        CHECK_STR(r->domain, want->domain);
        CHECK_INT(r->mode, want->mode);
        CHECK_INT(r->state, want->state);
        CHECK_STR(r->base_root, want->base_root);
        CHECK_STR(r->new_root, want->new_root);
        CHECK_STR(r->vroot, want->vroot); /* "" for a record without one */
    }
    journal_recs_free(recs, n);

    char *kept = NULL;
    CHECK_INT(journal_reject(j, &rec, &kept), 0);
    CHECK(kept && strstr(kept, "/rejected/") && file_size(kept) == 3);
    CHECK(!exists(dir, "journal", rec.name, ".json"));
    CHECK(!exists(dir, "staging", rec.name, ".h5"));
    free(kept);
    journal_remove(j, &other);
    CHECK(!exists(dir, "journal", other.name, ".json"));
    CHECK(!exists(dir, "staging", other.name, ".h5"));
    CHECK_INT(journal_list(j, &recs, &n), 0);
    CHECK_INT(n, 0);
    journal_recs_free(recs, n);
    journal_rec_free(&rec);
    journal_rec_free(&other);
    journal_close(j);
}

/* Files in journal/ that journal_write did not write are skipped (and left alone). */
static void test_foreign_records_are_skipped(const char *dir)
{
    static const char *const bad[] = {
        "{",
        "[]",
        "{\"domain\": \"relative\", \"mode\": \"new\", \"state\": \"dirty\", "
        "\"base_root\": \"\", \"new_root\": \"\"}",
        "{\"domain\": \"/a\", \"mode\": \"sideways\", \"state\": \"dirty\", "
        "\"base_root\": \"\", \"new_root\": \"\"}",
        "{\"domain\": \"/a\", \"mode\": \"new\", \"state\": \"dirty\", "
        "\"base_root\": \"not-an-id\", \"new_root\": \"\"}",
        "{\"bucket\": 7, \"domain\": \"/a\", \"mode\": \"new\", \"state\": \"dirty\", "
        "\"base_root\": \"\", \"new_root\": \"\"}",
        "{\"bucket\": \"\", \"domain\": \"/a\", \"mode\": \"new\", \"state\": \"dirty\", "
        "\"base_root\": \"\", \"new_root\": \"\"}",
        /* roots that are ids, but no root group's (fuzz_journal): recovery would have gc
         * delete db/A-B/, the live domain's whole tree, for them */
        "{\"domain\": \"/a\", \"mode\": \"new\", \"state\": \"committing\", "
        "\"base_root\": \"\", \"new_root\": \"g-72dd170e-0f0e83c7-dd55-9f8687-860b4f\"}",
        "{\"domain\": \"/a\", \"mode\": \"change\", \"state\": \"committing\", "
        "\"base_root\": \"d-55dd170e-0f0e83c7-dd55-9f8687-860b4f\", \"new_root\": \"\"}",
        "{\"domain\": \"/a\", \"mode\": \"change\", \"state\": \"dirty\", \"base_root\": "
        "\"c-55dd170e-0f0e83c7-dd55-9f8687-860b4f_0_1\", \"new_root\": \"\"}",
        "{\"domain\": \"/a\", \"mode\": \"change\", \"state\": \"dirty\", \"base_root\": "
        "\"d-1e6d4e44-3e6e-11e4-8f3c-3c15c2da029e\", \"new_root\": \"\"}",
    };
    struct journal *j = NULL;
    CHECK_INT(journal_open(dir, BUCKET_A, &j), 0);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char path[8192];
        snprintf(path, sizeof path, "%s/journal/%016zx.json", dir, i);
        FILE *f = fopen(path, "w");
        CHECK(f != NULL);
        if (f) {
            fputs(bad[i], f);
            fclose(f);
        }
    }
    /* a record followed by a NUL byte and more is not one (fuzz_journal) */
    static const char nul[] = "{\"bucket\": \"" BUCKET_A "\", \"domain\": \"/a\", \"mode\": "
                              "\"new\", \"state\": \"dirty\", \"base_root\": \"\", "
                              "\"new_root\": \"\"}\0{";
    char path[8192];
    snprintf(path, sizeof path, "%s/journal/00000000000000b0.json", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        CHECK(fwrite(nul, 1, sizeof nul, f) == sizeof nul);
        fclose(f);
    }
    /* nor is a file longer than a record may be, even when its first 64 KiB are one */
    snprintf(path, sizeof path, "%s/journal/00000000000000b1.json", dir);
    f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        CHECK(fwrite(nul, 1, strlen(nul), f) == strlen(nul));
        for (size_t i = 0; i < (64u << 10); i++)
            fputc(' ', f);
        fclose(f);
    }
    snprintf(path, sizeof path, "%s/journal/README.json", dir); /* not a record name */
    f = fopen(path, "w");
    if (f)
        fclose(f);
    struct journal_rec *recs = NULL;
    size_t n = 99;
    CHECK_INT(journal_list(j, &recs, &n), 0);
    CHECK_INT(n, 0);
    journal_recs_free(recs, n);
    journal_close(j);
}

/* The roots journal_write writes come back: a v2 root group id, a v1 group id, none. */
static void test_root_ids_read_back(const char *dir)
{
    struct journal *j = NULL;
    CHECK_INT(journal_open(dir, BUCKET_A, &j), 0);
    char path[8192];
    snprintf(path, sizeof path, "%s/journal/00000000000000a1.json", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("{\"bucket\":\"" BUCKET_A "\",\"domain\":\"/a\",\"mode\":\"change\","
              "\"state\":\"committing\",\"base_root\":\"g-1e6d4e44-3e6e-11e4-8f3c-3c15c2da029e\","
              "\"new_root\":\"g-55dd170e-0f0e83c7-dd55-9f8687-860b4f\"}",
              f);
        fclose(f);
    }
    struct journal_rec *recs = NULL;
    size_t n = 0;
    CHECK_INT(journal_list(j, &recs, &n), 0);
    CHECK_INT(n, 1);
    if (n == 1) {
        CHECK_STR(recs[0].base_root, "g-1e6d4e44-3e6e-11e4-8f3c-3c15c2da029e");
        CHECK_STR(recs[0].new_root, "g-55dd170e-0f0e83c7-dd55-9f8687-860b4f");
    }
    journal_recs_free(recs, n);
    journal_close(j);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        CHECK(fputs(text, f) >= 0);
        CHECK_INT(fclose(f), 0);
    }
}

/* One cache directory, mounts of two buckets in turn: each record names the bucket it was
 * staged for, on disk, and a journal of the other bucket lists it (nothing is hidden or
 * removed) but does not call it its own. A record written before records named a bucket is
 * nobody's. */
static void test_records_name_their_bucket(const char *dir)
{
    struct journal *a = NULL, *b = NULL;
    struct journal_rec rec;
    int fd = -1;
    CHECK_INT(journal_open(dir, NULL, &a), -EINVAL);
    CHECK_INT(journal_open(dir, BUCKET_A, &a), 0);
    CHECK_INT(journal_stage(a, "/home/u/a.h5", JOURNAL_NEW, NULL, &rec, &fd), 0);
    close(fd);
    rec.state = JOURNAL_DIRTY;
    CHECK_INT(journal_write(a, &rec), 0);
    journal_close(a);

    char path[8192], text[4096] = "";
    snprintf(path, sizeof path, "%s/journal/%s.json", dir, rec.name);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    if (f) {
        CHECK(fgets(text, sizeof text, f) != NULL);
        fclose(f);
    }
    CHECK(strstr(text, "\"bucket\":\"" BUCKET_A "\"") != NULL);

    snprintf(path, sizeof path, "%s/journal/00000000000000aa.json", dir);
    write_text(path, "{\"domain\": \"/home/u/old.h5\", \"mode\": \"new\", \"state\": \"dirty\", "
                     "\"base_root\": \"\", \"new_root\": \"\"}");
    struct journal_rec *recs = NULL;
    size_t n = 0;
    CHECK_INT(journal_open(dir, BUCKET_B, &b), 0);
    CHECK_INT(journal_list(b, &recs, &n), 0);
    CHECK_INT(n, 2);
    for (size_t i = 0; i < n; i++) {
        const struct journal_rec *r = &recs[i];
        int old = strcmp(r->name, "00000000000000aa") == 0;
        CHECK_STR(r->domain, old ? "/home/u/old.h5" : "/home/u/a.h5");
        if (old)
            CHECK(r->bucket == NULL);
        else
            CHECK_STR(r->bucket, BUCKET_A);
        CHECK_INT(journal_rec_is_ours(b, r), 0);
    }
    journal_recs_free(recs, n);
    journal_close(b);

    CHECK_INT(journal_open(dir, BUCKET_A, &a), 0); /* bucket A's next mount */
    CHECK_INT(journal_list(a, &recs, &n), 0);
    CHECK_INT(n, 2);
    for (size_t i = 0; i < n; i++)
        CHECK_INT(journal_rec_is_ours(a, &recs[i]), strcmp(recs[i].name, rec.name) == 0);
    journal_recs_free(recs, n);
    journal_rec_free(&rec);
    journal_close(a);
}

static void touch(const char *dir, const char *sub, const char *name, const char *suffix)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/%s%s", dir, sub, name, suffix);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("bytes", f);
        fclose(f);
    }
}

/* A record forgotten leaves its staged file to its handles; at the next mount the sweep
 * deletes what no record names (and records' temporaries), and nothing that a record, or a
 * file that is not ours, names. */
static void test_sweep_removes_what_no_record_names(const char *dir)
{
    struct journal *j = NULL;
    struct journal_rec kept, torn;
    int fd = -1, fd2 = -1;
    CHECK_INT(journal_open(dir, BUCKET_A, &j), 0);
    CHECK_INT(journal_stage(j, "/home/u/kept.h5", JOURNAL_NEW, NULL, &kept, &fd), 0);
    CHECK_INT(journal_write(j, &kept), 0);
    CHECK_INT(journal_stage(j, "/home/u/torn.h5", JOURNAL_NEW, NULL, &torn, &fd2), 0);
    CHECK_INT(journal_write(j, &torn), 0);
    touch(dir, "staging", torn.name, ".h5.base");
    journal_forget(j, &torn);
    CHECK(!exists(dir, "journal", torn.name, ".json"));
    CHECK(exists(dir, "staging", torn.name, ".h5"));  /* still the handles' file */
    touch(dir, "staging", "0123456789abcdef", ".h5"); /* a crash before its record */
    touch(dir, "journal", kept.name, ".json.tmp");    /* a crash in a replace */
    touch(dir, "staging", "notes", ".txt");           /* not ours: left alone */
    journal_close(j);
    CHECK_INT(journal_open(dir, BUCKET_A, &j), 0); /* the next mount */
    CHECK_INT(journal_sweep(j), 4);
    CHECK(!exists(dir, "staging", torn.name, ".h5"));
    CHECK(!exists(dir, "staging", torn.name, ".h5.base"));
    CHECK(!exists(dir, "staging", "0123456789abcdef", ".h5"));
    CHECK(!exists(dir, "journal", kept.name, ".json.tmp"));
    CHECK(exists(dir, "staging", kept.name, ".h5"));
    CHECK(exists(dir, "journal", kept.name, ".json"));
    CHECK(exists(dir, "staging", "notes", ".txt"));
    CHECK_INT(journal_sweep(j), 0);
    journal_rec_free(&kept);
    journal_rec_free(&torn);
    close(fd);
    close(fd2);
    journal_close(j);
}

#define ROOT_X "g-1e526a9c-e25565c6-96da-e2146a-dded4e"
#define ROOT_Y "g-2dd05233-5ca263d5-a558-dabbd4-2aeb5d"

/* The collector's records: written durably, listed again by a later journal of the same
 * bucket (a crash: a new journal object over the same directory), never by another bucket's,
 * gone once removed; invalid roots are refused; their temporaries are swept; journal_list
 * (the commit records) never takes one for a staged file's record. */
static void test_collector_records_survive_a_restart(const char *dir)
{
    struct journal *j = NULL, *other = NULL;
    struct journal_gc_rec *recs = NULL;
    struct journal_rec *srecs = NULL;
    size_t n = 99;
    CHECK_INT(journal_open(dir, BUCKET_A, &j), 0);
    CHECK_INT(journal_gc_write(j, ROOT_X, "/home/u/a.h5", ROOT_Y), 0);
    CHECK_INT(journal_gc_write(j, ROOT_X, "/home/u/a.h5", ROOT_Y), 0); /* again: one record */
    CHECK_INT(journal_gc_write(j, ROOT_Y, "/home/u/b \"q\".h5", ""), 0);
    CHECK_INT(journal_gc_write(j, "", "/home/u/c.h5", ""), -EINVAL);
    CHECK_INT(journal_gc_write(j, "../../etc", "/home/u/c.h5", ""), -EINVAL);
    CHECK_INT(journal_gc_write(j, "g-b03b24ef-69f244b6-38b3-ac67e1-7acc3f", "/x", ""), -EINVAL);
    CHECK_INT(journal_open(dir, BUCKET_B, &other), 0);
    CHECK_INT(journal_gc_write(other, ROOT_X, "/home/u/z.h5", ""), 0); /* the same id there */
    journal_close(j);

    CHECK_INT(journal_open(dir, BUCKET_A, &j), 0); /* the next mount */
    CHECK_INT(journal_list(j, &srecs, &n), 0);     /* no staged file's record among them */
    CHECK_INT(n, 0);
    journal_recs_free(srecs, n);
    CHECK_INT(journal_gc_list(j, &recs, &n), 0);
    CHECK_INT(n, 2);
    for (size_t i = 0; i < n; i++) {
        int x = strcmp(recs[i].root, ROOT_X) == 0;
        CHECK_STR(recs[i].domain, x ? "/home/u/a.h5" : "/home/u/b \"q\".h5");
        CHECK_STR(recs[i].replaced_by, x ? ROOT_Y : "");
        CHECK_STR(recs[i].root, x ? ROOT_X : ROOT_Y);
    }
    journal_gc_recs_free(recs, n);

    journal_gc_remove(j, ROOT_X);
    journal_gc_remove(j, ROOT_X); /* gone already: nothing to do */
    CHECK_INT(journal_gc_list(j, &recs, &n), 0);
    CHECK_INT(n, 1);
    CHECK_STR(recs[0].root, ROOT_Y);
    journal_gc_recs_free(recs, n);
    CHECK_INT(journal_gc_list(other, &recs, &n), 0); /* bucket B's record of the same id stays */
    CHECK_INT(n, 1);
    CHECK_STR(recs[0].domain, "/home/u/z.h5");
    journal_gc_recs_free(recs, n);

    touch(dir, "journal", "gc.0000000000000000." ROOT_X, ".json.tmp"); /* a crash in a write */
    CHECK_INT(journal_sweep(j), 1);
    CHECK(!exists(dir, "journal", "gc.0000000000000000." ROOT_X, ".json.tmp"));
    journal_close(other);
    journal_close(j);
}

static long lock_file_pid(const char *dir)
{
    char path[4096];
    long pid = -1;
    snprintf(path, sizeof path, "%s/lock", dir);
    FILE *f = fopen(path, "r");
    if (f && fscanf(f, "%ld", &pid) != 1)
        pid = -1;
    if (f)
        fclose(f);
    return pid;
}

/* What fuse_daemonize does to a mount: the lock is taken, the process forks, the child
 * names itself the owner and the parent closes its descriptor (exits). The child still holds
 * the lock; it ends when the child does. */
static void test_lock_is_exclusive_and_follows_a_fork(const char *dir)
{
    int fd = -1, fd2 = -1, ready[2], done[2];
    long holder = -1;
    CHECK_INT(journal_lock(dir, &fd, &holder), 0);
    CHECK(fd >= 0);
    CHECK_INT(lock_file_pid(dir), getpid());
    CHECK_INT(journal_lock(dir, &fd2, &holder), -EBUSY); /* another descriptor: refused */
    CHECK_INT(holder, getpid());
    if (pipe(ready) != 0 || pipe(done) != 0)
        return;
    pid_t child = fork();
    if (child == 0) {
        char c = 0;
        close(done[1]); /* EOF when the parent closes it */
        int ok = journal_lock_set_owner(fd) == 0 && write(ready[1], &c, 1) == 1;
        ok = ok && read(done[0], &c, 1) >= 0;
        _exit(ok ? 0 : 1);
    }
    CHECK(child > 0);
    char c;
    CHECK_INT(read(ready[0], &c, 1), 1);
    close(fd); /* the parent's exit */
    CHECK_INT(journal_lock(dir, &fd2, &holder), -EBUSY);
    CHECK_INT(holder, child);
    close(done[1]); /* the child may exit now */
    int status = -1;
    CHECK_INT(waitpid(child, &status, 0), child);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_INT(journal_lock(dir, &fd2, &holder), 0); /* free again: taken at once */
    CHECK_INT(lock_file_pid(dir), getpid());
    close(fd2);
    close(ready[0]);
    close(ready[1]);
    close(done[0]);
}

int main(void)
{
    char tmpl[] = "/tmp/h5osfs-journal-XXXXXX";
    char *base = mkdtemp(tmpl);
    if (!base)
        return 2;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/deep/cache", base); /* created on open, 0700 */
    test_records_survive_a_restart(dir);
    struct stat st;
    CHECK(stat(dir, &st) == 0 && (st.st_mode & 0777) == 0700);
    snprintf(dir, sizeof dir, "%s/other", base);
    test_foreign_records_are_skipped(dir);
    snprintf(dir, sizeof dir, "%s/roots", base);
    test_root_ids_read_back(dir);
    snprintf(dir, sizeof dir, "%s/shared", base);
    test_records_name_their_bucket(dir);

    snprintf(dir, sizeof dir, "%s/swept", base);
    test_sweep_removes_what_no_record_names(dir);
    snprintf(dir, sizeof dir, "%s/collector", base);
    test_collector_records_survive_a_restart(dir);
    snprintf(dir, sizeof dir, "%s/locked/cache", base); /* created by the lock, 0700 */
    test_lock_is_exclusive_and_follows_a_fork(dir);
    CHECK(stat(dir, &st) == 0 && (st.st_mode & 0777) == 0700);
    nftw(base, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return check_done("journal");
}
