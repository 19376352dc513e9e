/*
 * The domain summary (src/commit/info.c) against every .info.json real HSDS 0.9.4 wrote in the
 * fixture buckets (tests/data/hsds-v2/hsdstest, hsdsnc): fed the domain's objects as HSDS's
 * POSIX driver lists them (key, size, MD5 of the bytes), info_text must give the fixture's
 * bytes exactly. The copies' mtimes are not HSDS's, so each object gets the time the fixture
 * says HSDS saw (its dataset's lastModified, else the domain's), and the scan times are the
 * fixture's: the counts, sizes, logical and linked bytes, md5_sum, member order, number
 * formats and dataset order are all ours.
 */
#include "h5osfs/commit/info.h"
#include "h5osfs/schema/hjson.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "check.h"

#define MAX_OBJECTS 512
#define TEXT_MAX (1 << 20)

static char *read_file(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    char *buf = malloc(TEXT_MAX + 1);
    *len = fp && buf ? fread(buf, 1, TEXT_MAX, fp) : 0;
    if (fp)
        fclose(fp);
    if (buf)
        buf[*len] = '\0';
    return buf;
}

struct domain {
    char dir[4096]; /* the bucket directory */
    json_t *want;   /* the fixture's .info.json */
    struct info_object objs[MAX_OBJECTS];
    int rank[MAX_OBJECTS]; /* 0: not a dataset's; else 1 + its place in want's datasets */
    size_t n;
};

/* 1 + the position of the dataset whose directory holds key, in the fixture's order; 0. */
static int dataset_rank(const json_t *want, const char *key)
{
    const char *d = strstr(key, "/d/"), *id;
    json_t *v;
    int i = 0;
    if (!d)
        return 0;
    json_object_foreach(json_object_get(want, "datasets"), id, v)
    {
        i++;
        if (strncmp(d + 3, id + 20, 18) == 0)
            return i;
    }
    return 0;
}

static void md5_hex(const char *data, size_t len, char out[33])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    CHECK(EVP_Digest(data, len, md, &n, EVP_md5(), NULL) == 1 && n == 16);
    for (unsigned i = 0; i < n; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static void add_object(struct domain *dom, const char *key)
{
    char path[8192];
    size_t len;
    CHECK(dom->n < MAX_OBJECTS);
    if (dom->n >= MAX_OBJECTS)
        return;
    snprintf(path, sizeof path, "%s/%s", dom->dir, key);
    char *data = read_file(path, &len);
    struct info_object *o = &dom->objs[dom->n];
    memset(o, 0, sizeof *o);
    o->key = strdup(key);
    o->size = len;
    md5_hex(data, len, o->etag);
    if (strstr(key, "/.dataset.json"))
        o->doc = hjson_loadb(data, len, NULL, 0);
    else if (strstr(key, "/d/"))
        o->bytes = (unsigned char *)data; /* chunk tables are read */
    o->len = len;
    dom->rank[dom->n] = dataset_rank(dom->want, key);
    double mtime = 0;
    json_t *dsets = json_object_get(dom->want, "datasets");
    void *it = json_object_iter(dsets);
    for (int i = 1; it && i < dom->rank[dom->n]; i++)
        it = json_object_iter_next(dsets, it);
    CHECK_INT(
        hjson_number(json_object_get(dom->rank[dom->n] ? json_object_iter_value(it) : dom->want,
                                     "lastModified"),
                     &mtime),
        0);
    o->mtime = mtime;
    if (!o->bytes)
        free(data);
    dom->n++;
}

static void walk(struct domain *dom, const char *key)
{
    char path[8192], sub[4096];
    snprintf(path, sizeof path, "%s/%s", dom->dir, key);
    DIR *d = opendir(path);
    CHECK(d != NULL);
    for (struct dirent *e; d && (e = readdir(d));) {
        struct stat sb;
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(sub, sizeof sub, "%s/%s", key, e->d_name);
        snprintf(path, sizeof path, "%s/%s", dom->dir, sub);
        CHECK(stat(path, &sb) == 0);
        if (S_ISDIR(sb.st_mode))
            walk(dom, sub);
        else
            add_object(dom, sub);
    }
    if (d)
        closedir(d);
}

/* HSDS's listing order, as far as it shows: each dataset's objects in its place. */
static void order_objects(struct domain *dom)
{
    for (size_t i = 1; i < dom->n; i++) {
        for (size_t j = i; j > 0 && (dom->rank[j - 1] > dom->rank[j] ||
                                     (dom->rank[j - 1] == dom->rank[j] &&
                                      strcmp(dom->objs[j - 1].key, dom->objs[j].key) > 0));
             j--) {
            struct info_object o = dom->objs[j];
            int r = dom->rank[j];
            dom->objs[j] = dom->objs[j - 1];
            dom->rank[j] = dom->rank[j - 1];
            dom->objs[j - 1] = o;
            dom->rank[j - 1] = r;
        }
    }
}

static int has_chunk_table(const struct domain *dom)
{
    for (size_t i = 0; i < dom->n; i++) {
        const json_t *doc = dom->objs[i].doc;
        const json_t *cp = json_object_get(doc, "creationProperties");
        const char *cls = hjson_text(json_object_get(json_object_get(cp, "layout"), "class"));
        if (cls && strcmp(cls, "H5D_CHUNKED_REF_INDIRECT") == 0)
            return 1;
    }
    return 0;
}

static void check_domain(const char *bucket_dir, const char *bucket, const char *root, int *tables)
{
    struct domain *dom = calloc(1, sizeof *dom);
    char path[8192], key[512];
    size_t want_len;
    snprintf(dom->dir, sizeof dom->dir, "%s", bucket_dir);
    snprintf(path, sizeof path, "%s/db/%s/.info.json", bucket_dir, root);
    char *want_text = read_file(path, &want_len);
    dom->want = hjson_loadb(want_text, want_len, NULL, 0);
    CHECK(dom->want != NULL);
    snprintf(key, sizeof key, "db/%s", root);
    walk(dom, key);
    order_objects(dom);
    struct info_scan scan = { .bucket = bucket, .objects = dom->objs, .n = dom->n };
    hjson_number(json_object_get(dom->want, "scan_start"), &scan.scan_start);
    hjson_number(json_object_get(dom->want, "scan_complete"), &scan.scan_complete);
    char *got = NULL;
    int rc = info_text(&scan, &got);
    CHECK_INT(rc, 0);
    CHECK_STR(got, want_text);
    *tables += has_chunk_table(dom);
    if (has_chunk_table(dom)) { /* without its chunks' bytes, no guess */
        for (size_t i = 0; i < dom->n; i++) {
            free(dom->objs[i].bytes);
            dom->objs[i].bytes = NULL;
        }
        free(got);
        got = NULL;
        CHECK_INT(info_text(&scan, &got), -ENOENT);
    }
    for (size_t i = 0; i < dom->n; i++) {
        free(dom->objs[i].key);
        json_decref(dom->objs[i].doc);
        free(dom->objs[i].bytes);
    }
    json_decref(dom->want);
    free(want_text);
    free(got);
    free(dom);
}

static void check_bucket(const char *data, const char *bucket, int *domains, int *tables)
{
    char dir[4096], db[4200];
    snprintf(dir, sizeof dir, "%s/hsds-v2/%s", data, bucket);
    snprintf(db, sizeof db, "%s/db", dir);
    DIR *d = opendir(db);
    CHECK(d != NULL);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        check_domain(dir, bucket, e->d_name, tables);
        ++*domains;
    }
    if (d)
        closedir(d);
}

static void test_object_ids(void)
{
    char id[128];
    CHECK_INT(info_object_id("db/5081627e-84cc3427/.group.json", id, sizeof id), 0);
    CHECK_STR(id, "g-5081627e-84cc3427-d809-eaf60c-44bcaf"); /* its .domain.json's root */
    CHECK_INT(info_object_id("db/5081627e-84cc3427/d/2676-fe3c22-f7924f/0_12", id, sizeof id), 0);
    CHECK_STR(id, "c-5081627e-84cc3427-2676-fe3c22-f7924f_0_12");
    CHECK_INT(info_object_id("db/5081627e-84cc3427/d/2676-fe3c22-f7924f/p3/1_7", id, sizeof id), 0);
    CHECK_STR(id, "c3-5081627e-84cc3427-2676-fe3c22-f7924f_1_7");
    CHECK_INT(
        info_object_id("db/5081627e-84cc3427/t/2676-fe3c22-f7924f/.datatype.json", id, sizeof id),
        0);
    CHECK_STR(id, "t-5081627e-84cc3427-2676-fe3c22-f7924f");
    /* what HSDS's scan leaves out */
    CHECK_INT(info_object_id("db/5081627e-84cc3427/.info.json", id, sizeof id), -EINVAL);
    CHECK_INT(info_object_id("db/5081627e-84cc3427/sample.h5", id, sizeof id), -EINVAL);
    CHECK_INT(info_object_id("db/5081627e-84cc3427/g/2676-fe3c22-f7924f/x", id, sizeof id),
              -EINVAL);
    CHECK_INT(info_object_id("home/u/x.h5/.domain.json", id, sizeof id), -EINVAL);
}

/* The scan times as Python's repr(float) writes them; an S3 listing's whole seconds as ints. */
static void test_numbers(void)
{
    static const struct {
        double x;
        const char *text;
    } cases[] = {
        { 1795302901.2782958, "1795302901.2782958" },
        { 1795302901.283941, "1795302901.283941" },
        { 1e16, "1e+16" },
        { 1234567890123456.0, "1234567890123456.0" },
        { 123.0, "123.0" },
        { 0.0001, "0.0001" },
        { 0.00001, "1e-05" },
        { 0.5, "0.5" },
        { 1.5e-7, "1.5e-07" },
        { 0.1, "0.1" },
        { 2.5e300, "2.5e+300" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct info_scan scan = { .bucket = "b", .scan_start = cases[i].x, .scan_complete = 1 };
        char *got = NULL, want[128];
        CHECK_INT(info_text(&scan, &got), 0);
        snprintf(want, sizeof want, "\"scan_start\": %s, ", cases[i].text);
        CHECK(got && strstr(got, want));
        if (!got || !strstr(got, want))
            fprintf(stderr, "%s: want %s\n", got ? got : "(null)", want);
        free(got);
    }
    struct info_object root = { .key = "db/5081627e-84cc3427/.group.json",
                                .size = 10,
                                .mtime = 1795302889.75,
                                .etag = "\"0123456789abcdef0123\"" };
    struct info_scan scan = { .bucket = "b\xc3\xa9\"",
                              .whole_seconds = 1,
                              .objects = &root,
                              .n = 1,
                              .scan_start = 2,
                              .scan_complete = 3 };
    char *got = NULL;
    CHECK_INT(info_text(&scan, &got), 0);
    CHECK(got && strncmp(got, "{\"lastModified\": 1795302889, \"num_groups\": 1,", 45) == 0);
    CHECK(got && strstr(got, "\"bucket\": \"b\\u00e9\\\"\", "));
    free(got);
}

/* The text between "<name>": and the next member, as info_text wrote it. */
static char *member_text(const char *doc, const char *name, const char *next)
{
    char open[64], close[64];
    snprintf(open, sizeof open, "\"%s\": ", name);
    snprintf(close, sizeof close, ", \"%s\"", next);
    const char *from = doc ? strstr(doc, open) : NULL;
    const char *to = from ? strstr(from, close) : NULL;
    if (!to)
        return NULL;
    from += strlen(open);
    return strndup(from, (size_t)(to - from));
}

/* The text of the last member, name, as info_text wrote it. */
static char *last_member(const char *doc, const char *name)
{
    char open[64];
    snprintf(open, sizeof open, "\"%s\": ", name);
    const char *from = doc ? strstr(doc, open) : NULL;
    if (!from || doc[strlen(doc) - 1] != '}')
        return NULL;
    from += strlen(open);
    return strndup(from, strlen(from) - 1);
}

/* info.c writes numbers as hjson_dumps does (one JSON emitter): every power of two a double
 * holds, 2^-1074 to 2^1023, where a shortest-digits search that misses the narrower gap below
 * a power of two writes more digits than Python's repr. */
static void test_floats_agree_with_hjson(void)
{
    int differ = 0;
    for (int e = -1074; e <= 1023; e++) {
        double x = ldexp(1.0, e);
        struct info_scan scan = { .bucket = "b", .scan_start = 1, .scan_complete = x };
        char *got = NULL, *want = NULL;
        json_t *real = json_real(x);
        CHECK_INT(info_text(&scan, &got), 0);
        CHECK_INT(hjson_dumps(real, &want), 0);
        char *member = last_member(got, "scan_complete");
        if (!member || !want || strcmp(member, want) != 0) {
            if (differ++ < 5)
                fprintf(stderr, "2^%d: info %s, hjson %s\n", e, member ? member : "(null)",
                        want ? want : "(null)");
        }
        free(member);
        free(want);
        free(got);
        json_decref(real);
    }
    CHECK_INT(differ, 0);
}

/* Strings as hjson_dumps writes them: escapes, non-ASCII, astral characters, the strings that
 * stand for lone surrogates (HJSON_UNLOADABLE), and text that is not UTF-8 (refused by both). */
static void test_strings_agree_with_hjson(void)
{
    static const char *const names[] = {
        "plain",
        "q\"b\\s/",
        "\x01\x02\x1f\b\f\n\r\t\x7f",
        "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
        HJSON_UNLOADABLE "\\udc80x",
        HJSON_UNLOADABLE "no\"body",
        "\xed\xb2\x80", /* a surrogate encoded as UTF-8: not UTF-8 */
        "\xc0\xaf",     /* an overlong '/' */
        "\xf4\x90\x80\x80" /* above U+10FFFF */,
        "cut \xe2\x82",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        struct info_scan scan = { .bucket = names[i], .scan_start = 1, .scan_complete = 2 };
        char *got = NULL, *want = NULL;
        json_t *s = json_stringn_nocheck(names[i], strlen(names[i]));
        int want_rc = hjson_dumps(s, &want);
        int got_rc = info_text(&scan, &got);
        CHECK_INT(got_rc, want_rc);
        char *member = member_text(got, "bucket", "scan_start");
        if (want_rc == 0)
            CHECK_STR(member, want);
        else
            CHECK(got == NULL);
        if (got_rc != want_rc || (want_rc == 0 && (!member || strcmp(member, want) != 0)))
            fprintf(stderr, "name %zu: info %d %s, hjson %d %s\n", i, got_rc,
                    member ? member : "(null)", want_rc, want ? want : "(null)");
        free(member);
        free(want);
        free(got);
        json_decref(s);
    }
}

int main(int argc, char **argv)
{
    const char *data = argc > 1 ? argv[1] : "tests/data";
    int domains = 0, tables = 0;
    test_object_ids();
    test_numbers();
    test_floats_agree_with_hjson();
    test_strings_agree_with_hjson();
    check_bucket(data, "hsdstest", &domains, &tables);
    check_bucket(data, "hsdsnc", &domains, &tables);
    CHECK_INT(domains, 21);
    CHECK_INT(tables, 2); /* sample_link.h5 and sample_fastlink.h5 */
    return check_done("info");
}
