/*
 * fuzz_journal: the journal records a restart reads back (src/commit/journal.c): each input
 * record is written as journal/<name>.json of a cache directory (in /dev/shm when it exists),
 * then journal_list, journal_rec_is_ours, and for every record read, journal_write and
 * journal_list again (what recovery does when it moves a record on).
 *
 * Input: up to 4 records separated by the line "\n@@\n", each the bytes of one file.
 *
 * Checks beyond "no crash, no leak, no UB": journal_list returns exactly the records the
 * format allows (what journal_write can write), checked here against
 * jansson directly: an object with a "domain" string starting with '/', a known "mode" ("new",
 * "replace", "change") and "state", "base_root" and "new_root"
 * strings each empty or a root group id (a v2 root, or a v1 group id), and a "bucket" absent,
 * null or a non-empty string; anything else, a file larger than 64 KiB included, is not a
 * record. Every record read has the fields of its file, its file's name, ids that fit their
 * buffers; journal_rec_is_ours says whether its bucket is this one. A record written back
 * with journal_write is read back the same.
 */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "h5osfs/commit/journal.h"
#include "h5osfs/util/log.h"
#include "h5osfs/schema/schema.h"
#include "fuzz_scratch.h"

#define BUCKET "fuzzb"
#define SEP "\n@@\n"
#define MAX_RECS 4
#define REC_MAX (64u << 10) /* journal.c's JOURNAL_REC_MAX */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char g_dir[256];
static struct journal *g_journal;
static const char *const NAMES[MAX_RECS] = { "0123456789abcdef", "fedcba9876543210",
                                             "00000000000000ff", "a0a0a0a0a0a0a0a0" };

static void fail(const char *what, const char *name)
{
    fprintf(stderr, "fuzz_journal: %s (record %s)\n", what, name ? name : "-");
    abort();
}

static void remove_dir(void)
{
    journal_close(g_journal);
    fuzz_rm_tree(g_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_log_setup();
    const char *base = fuzz_scratch_base();
    snprintf(g_dir, sizeof g_dir, "%s/h5osfs-fuzz-journal.%ld", base, (long)getpid());
    if (journal_open(g_dir, BUCKET, &g_journal) != 0)
        abort();
    atexit(remove_dir);
    return 0;
}

/* ---- the reference ---- */

static int root_or_empty(json_t *v)
{
    if (!json_is_string(v))
        return 0;
    const char *id = json_string_value(v);
    int version = schema_id_version(id);
    return !*id || (version == 1 && id[0] == 'g') || (version == 2 && schema_id_is_root(id) == 1);
}

static int index_in(const char *s, const char *const *names, int n)
{
    for (int i = 0; s && i < n; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

static const char *const MODES[3] = { "new", "replace", "change" };
static const char *const STATES[3] = { "clean", "dirty", "committing" };

/* The record the file holds, or NULL when it holds none. */
static json_t *ref_record(const char *text, size_t len)
{
    if (len > REC_MAX)
        return NULL;
    json_t *o = json_loadb(text, len, 0, NULL);
    json_t *domain = json_object_get(o, "domain"), *bucket = json_object_get(o, "bucket");
    int ok =
        json_is_string(domain) && json_string_value(domain)[0] == '/' &&
        index_in(json_string_value(json_object_get(o, "mode")), MODES, 3) >= 0 &&
        index_in(json_string_value(json_object_get(o, "state")), STATES, 3) >= 0 &&
        root_or_empty(json_object_get(o, "base_root")) &&
        root_or_empty(json_object_get(o, "new_root")) &&
        (!bucket || json_is_null(bucket) || (json_is_string(bucket) && *json_string_value(bucket)));
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* ---- checks ---- */

static void check_rec(const struct journal_rec *rec, json_t *want)
{
    const char *name = rec->name;
    if (!want)
        fail("journal_list returned a record the format does not allow", name);
    int mode = index_in(json_string_value(json_object_get(want, "mode")), MODES, 3);
    const char *bucket = json_string_value(json_object_get(want, "bucket"));
    if (!rec->domain || strcmp(rec->domain, json_string_value(json_object_get(want, "domain"))))
        fail("the domain is not the record's", name);
    if ((int)rec->mode != mode)
        fail("the mode is not the record's", name);
    if ((int)rec->state != index_in(json_string_value(json_object_get(want, "state")), STATES, 3))
        fail("the state is not the record's", name);
    if (strnlen(rec->base_root, SCHEMA_ID_BUF) == SCHEMA_ID_BUF ||
        strnlen(rec->new_root, SCHEMA_ID_BUF) == SCHEMA_ID_BUF)
        fail("a root id without its NUL", name);
    if (strcmp(rec->base_root, json_string_value(json_object_get(want, "base_root"))) != 0 ||
        strcmp(rec->new_root, json_string_value(json_object_get(want, "new_root"))) != 0)
        fail("a root id is not the record's", name);
    if ((bucket == NULL) != (rec->bucket == NULL) || (bucket && strcmp(bucket, rec->bucket)))
        fail("the bucket is not the record's", name);
    if (journal_rec_is_ours(g_journal, rec) != (bucket && strcmp(bucket, BUCKET) == 0))
        fail("journal_rec_is_ours is wrong", name);
}

static int name_index(const char *name)
{
    for (int i = 0; i < MAX_RECS; i++)
        if (strcmp(name, NAMES[i]) == 0)
            return i;
    return -1;
}

static void same_rec(const struct journal_rec *a, const struct journal_rec *b)
{
    if (strcmp(a->domain, b->domain) != 0 || a->mode != b->mode || a->state != b->state ||
        strcmp(a->base_root, b->base_root) != 0 || strcmp(a->new_root, b->new_root) != 0 ||
        (a->bucket == NULL) != (b->bucket == NULL) ||
        (a->bucket && strcmp(a->bucket, b->bucket) != 0))
        fail("a record written back by journal_write reads back differently", a->name);
}

/* Write back what was read: the same records must come back. */
static void check_rewrite(struct journal_rec *recs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (journal_write(g_journal, &recs[i]) != 0)
            fail("journal_write failed", recs[i].name);
    struct journal_rec *again;
    size_t m;
    if (journal_list(g_journal, &again, &m) != 0 || m != n)
        fail("journal_list after journal_write: not the same records", NULL);
    for (size_t i = 0; i < m; i++) {
        size_t j = 0;
        while (j < n && strcmp(recs[j].name, again[i].name) != 0)
            j++;
        if (j == n)
            fail("journal_list after journal_write: a record of another name", again[i].name);
        same_rec(&recs[j], &again[i]);
    }
    journal_recs_free(again, m);
}

static void write_file(const char *name, const uint8_t *data, size_t size)
{
    char path[512];
    snprintf(path, sizeof path, "%s/journal/%s.json", g_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        perror(path);
        abort();
    }
}

static void clear_records(void)
{
    char path[512];
    for (int i = 0; i < MAX_RECS; i++) {
        snprintf(path, sizeof path, "%s/journal/%s.json", g_dir, NAMES[i]);
        if (unlink(path) != 0 && errno != ENOENT)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *want[MAX_RECS] = { NULL };
    size_t n_files = 0, n_want = 0;
    clear_records();
    for (size_t at = 0; n_files < MAX_RECS && at <= size; n_files++) {
        const uint8_t *end = memmem(data + at, size - at, SEP, strlen(SEP));
        size_t len = end ? (size_t)(end - (data + at)) : size - at;
        write_file(NAMES[n_files], data + at, len);
        want[n_files] = ref_record((const char *)data + at, len);
        n_want += want[n_files] != NULL;
        at += len + strlen(SEP);
    }
    struct journal_rec *recs;
    size_t n;
    if (journal_list(g_journal, &recs, &n) != 0)
        fail("journal_list failed", NULL);
    if (n != n_want)
        fail(n > n_want ? "journal_list returned a record the format does not allow"
                        : "journal_list left out a valid record",
             NULL);
    for (size_t i = 0; i < n; i++) {
        int k = name_index(recs[i].name);
        if (k < 0)
            fail("a record of a name no file has", recs[i].name);
        check_rec(&recs[i], want[k]);
    }
    check_rewrite(recs, n);
    journal_recs_free(recs, n);
    for (size_t i = 0; i < n_files; i++)
        json_decref(want[i]);
    return 0;
}
