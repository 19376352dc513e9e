/*
 * fuzz_image: objects of a domain in a POSIX bucket -> image_build -> image_read of the whole
 * synthesised file through a chunk cache -> image_put (src/image, with src/schema,
 * src/codec, src/store/posix.c and src/cache underneath).
 *
 * Input: parts separated by the line "\n@@\n":
 *   0  the root group's .group.json
 *   1  dataset D1's .dataset.json      (empty: no such object)
 *   2  dataset D2's .dataset.json      (empty: none)
 *   3  datatype T1's .datatype.json    (empty: none)
 *   4… objects: a first line "<target> <suffix>", then the object's bytes. target 1 or 2: a
 *      chunk of D1 or D2 at key <dataset prefix><suffix> (suffix of digits, '_', 'p' and '/',
 *      e.g. "0_1" or "p3/0_1"); target L: the linked HDF5 file "linked/f.h5" (suffix ignored)
 *      A kept version (issue 26): target V: the domain's version list, and the domain is built
 *      as its version 1 (VERSION_PATH) instead; M: the marker of the version pool; P: a pool
 *      object, at the key its body's MD5 names; Q <32 hex digits>: a pool object at that MD5's
 *      key, whatever its body (a forgery); D: the domain's .domain.json (with V: the current
 *      domain is built, which in ref mode names its head version's root and reads the pool).
 * In the JSON parts, @R, @D1, @D2 and @T1 are replaced by the objects' fixed ids (all of one
 * v2 domain), so a mutation does not have to keep 38-character ids intact; in every part, @P
 * by the pool's root id, @KP by its key prefix ("db/A-B"), @KO by another pool's, @S by the
 * MD5 of SECRET. The bucket is called "fuzzb" (file_uri "fuzzb/linked/f.h5" names the linked
 * file). The other pool holds SECRET, an object no table of this domain may name: a version's
 * file must never hold its bytes.
 *
 * The bucket directory (in /dev/shm when it exists) is made once; every run rewrites the
 * domain's objects. Chunk segments larger than READ_CHUNK_MAX are not read (a real reader
 * could, but allocating 2 GiB per input would only measure the machine); everything else of
 * the file is read, in odd-sized pieces that cross segment boundaries; an input of odd length
 * is read as a reader past the page cache is (image_reader.exact, chosen over S3 only).
 *
 * Checks: image_build returns 0, -EIO or -ENOMEM and leaves no HDF5 id open; image_read returns
 * the whole length or -EIO. When the file was read whole without EIO and is at most 64 MiB, it
 * must be valid HDF5: opened from memory, every object visited, every dataset and attribute read
 * (FUZZ_IMAGE_NO_VERIFY=1: not checked). FUZZ_IMAGE_TWICE=1: each input is built twice and the
 * builds must be image_equal. FUZZ_VERBOSE=1: the log lines on stderr.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>

#include "h5osfs/cache/cache.h"
#include "h5osfs/image/image.h"
#include "h5osfs/util/log.h"
#include "h5osfs/schema/pool.h"
#include "h5osfs/schema/schema.h"
#include "h5osfs/store/store.h"

#include "extent.h"
#include "image_int.h"
#include "fuzz_scratch.h"

#define ROOT_ID "g-5897df5c-0a297b92-d01f-57d482-a1f31a"
#define D1_ID "d-5897df5c-0a297b92-76c1-4d1b3f-0a99df"
#define D2_ID "d-5897df5c-0a297b92-2f32-94e6d8-2b038e"
#define T1_ID "t-5897df5c-0a297b92-4e1f-0c2a3b-9d8e7f"
#define DOMAIN "/home/fuzz/f.h5"
#define VERSION_PATH "/home/fuzz/.versions/f.h5/1.h5"
#define DOMAIN_KEY "home/fuzz/f.h5/.domain.json"
#define DOMAIN_JSON                                                                       \
    "{\"root\": \"" ROOT_ID "\", \"owner\": \"fuzz\", \"acls\": {\"fuzz\": {\"create\": " \
    "true, \"read\": true, \"update\": true, \"delete\": true, \"readACL\": true, "       \
    "\"updateACL\": true}}, \"created\": 1.0, \"lastModified\": 1.0}"
/* What an input's records made of the run (put_record's flags). */
#define RUN_LIST 1   /* a version list (V): the domain has versions */
#define RUN_DOMAIN 2 /* the domain's object (D): build the current domain, maybe in ref mode */
#define RUN_SECRET 4 /* the input holds SECRET's bytes itself */
#define RUN_EXACT 8  /* read as past the page cache (image_reader.exact), as over S3 */
#define SECRET_TEXT "H5OSFS-FUZZ-SECRET:"
#define BUCKET_NAME "fuzzb"
#define LINKED_KEY "linked/f.h5"
#define SEP "\n@@\n"
#define MAX_PARTS 16
#define READ_PIECE 65521
#define READ_CHUNK_MAX (4u << 20)
#define CACHE_BYTES (64u << 20)
#define VERIFY_FILE_MAX (64u << 20) /* files checked with HDF5 are read whole into memory */
#define VERIFY_READ_MAX (16u << 20) /* datasets and attributes read by the check */

static char g_bucket[256];
static char g_domain_dir[512]; /* <bucket>/db/5897df5c-0a297b92 */
static struct store *g_store;
/* set once at start: the version pool and another domain's pool (root ids and key prefixes),
 * and the MD5 of SECRET, which the other pool holds */
static char g_pool[SCHEMA_ID_BUF], g_pool_key[64], g_other_key[64], g_secret_md5[33];
static unsigned char g_secret[1024]; /* one chunk of the seeds' uint8 dataset */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void mkdirs(const char *path)
{
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            (void)mkdir(tmp, 0755);
            *p = '/';
        }
    }
    (void)mkdir(tmp, 0755);
}

/* Write bytes as the object at key (parents made as needed). */
static void put_object(const char *key, const void *bytes, size_t len)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", g_bucket, key);
    char *slash = strrchr(path, '/');
    *slash = '\0';
    mkdirs(path);
    *slash = '/';
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return; /* e.g. a directory is in the way: the object just is not there */
    const char *p = bytes;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n <= 0)
            break;
        p += n;
        len -= (size_t)n;
    }
    close(fd);
}

/* "db/A-B" of a pool's keys. */
static void pool_prefix(const char *pool, char *out, size_t len)
{
    char key[STORE_KEY_MAX + 1];
    if (schema_pool_marker_key(pool, key, sizeof key) != 0)
        abort();
    *strrchr(key, '/') = '\0';
    snprintf(out, len, "%s", key);
}

static void init_pools(void)
{
    char other[SCHEMA_ID_BUF], key[STORE_KEY_MAX + 1];
    if (schema_root_of("g-0f0f0f0f-1e1e1e1e-2d2d-3c3c3c-4b4b4b", g_pool) != 0 ||
        schema_root_of("g-a5a5a5a5-b6b6b6b6-c7c7-d8d8d8-e9e9e9", other) != 0)
        abort();
    pool_prefix(g_pool, g_pool_key, sizeof g_pool_key);
    pool_prefix(other, g_other_key, sizeof g_other_key);
    for (size_t i = 0; i < sizeof g_secret; i++)
        g_secret[i] = (unsigned char)SECRET_TEXT[i % (sizeof SECRET_TEXT - 1)];
    if (schema_md5_hex(g_secret, sizeof g_secret, g_secret_md5) != 0 ||
        schema_pool_key(other, g_secret_md5, key, sizeof key) != 0)
        abort();
    put_object(key, g_secret, sizeof g_secret);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_log_setup();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* image_build does the same; failures are ours */
    const char *base = fuzz_scratch_base();
    fuzz_remove_stale(base, "h5osfs-fuzz-image");
    snprintf(g_bucket, sizeof g_bucket, "%s/h5osfs-fuzz-image.%ld", base, (long)getpid());
    if (mkdir(g_bucket, 0755) != 0)
        abort();
    snprintf(g_domain_dir, sizeof g_domain_dir, "%s/db/5897df5c-0a297b92", g_bucket);
    put_object(DOMAIN_KEY, DOMAIN_JSON, sizeof DOMAIN_JSON - 1);
    if (store_posix_open(g_bucket, &g_store) != 0)
        abort();
    init_pools();
    return 0;
}

/* The bucket goes when the process does (libFuzzer exits through exit()). */
__attribute__((destructor)) static void cleanup(void)
{
    if (g_bucket[0])
        fuzz_rm_tree(g_bucket);
}

/* text with the placeholders replaced; a new string. */
static char *expand(const uint8_t *text, size_t len, size_t *out_len)
{
    const struct {
        const char *from, *to;
    } subs[] = {
        { "@D1", D1_ID },       { "@D2", D2_ID },  { "@T1", T1_ID }, { "@KP", g_pool_key },
        { "@KO", g_other_key }, { "@R", ROOT_ID }, { "@P", g_pool }, { "@S", g_secret_md5 }
    };
    size_t cap = len * 19 + 1, n = 0; /* a 2-byte "@R" grows to 38 bytes: 19 per byte */
    char *out = malloc(cap);
    if (!out)
        abort();
    for (size_t i = 0; i < len;) {
        size_t k, m = 0;
        for (k = 0; k < sizeof subs / sizeof subs[0]; k++) {
            m = strlen(subs[k].from);
            if (len - i >= m && memcmp(text + i, subs[k].from, m) == 0)
                break;
        }
        if (k < sizeof subs / sizeof subs[0]) {
            size_t t = strlen(subs[k].to);
            memcpy(out + n, subs[k].to, t);
            n += t;
            i += m;
        } else {
            out[n++] = (char)text[i++];
        }
    }
    out[n] = '\0';
    *out_len = n;
    return out;
}

static void put_json(const char *id, const uint8_t *text, size_t len)
{
    char key[STORE_KEY_MAX + 1];
    size_t n;
    if (len == 0 || schema_obj_key(id, key, sizeof key) != 0)
        return;
    char *json = expand(text, len, &n);
    put_object(key, json, n);
    free(json);
}

/* A chunk key suffix the harness accepts: [0-9_p/], no empty or leading/trailing '/'. */
static int suffix_ok(const char *s, size_t n)
{
    if (n == 0 || n > 64 || s[0] == '/' || s[n - 1] == '/')
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || c == '_' || c == 'p' || c == '/'))
            return 0;
        if (c == '/' && s[i + 1] == '/')
            return 0;
    }
    return 1;
}

/* An object of the versions': the list (V), the pool's marker (M), the domain's own object
 * (D), a pool object at the key its MD5 names (P) or at the one the record names (Q). 1 when
 * rec was one. */
static int put_version_record(const uint8_t *rec, size_t head, const uint8_t *body, size_t body_len,
                              int *run)
{
    char key[STORE_KEY_MAX + 1], md5[33];
    size_t n;
    if (rec[0] == 'V' || rec[0] == 'M' || rec[0] == 'D') {
        char *text = expand(body, body_len, &n);
        int rc = rec[0] == 'V'   ? schema_vlist_key(DOMAIN, key, sizeof key)
                 : rec[0] == 'M' ? schema_pool_marker_key(g_pool, key, sizeof key)
                                 : (snprintf(key, sizeof key, "%s", DOMAIN_KEY), 0);
        if (rc == 0)
            put_object(key, text, n);
        free(text);
        *run |= rec[0] == 'V' ? RUN_LIST : rec[0] == 'D' ? RUN_DOMAIN : 0;
        return 1;
    }
    if (rec[0] == 'P' && schema_md5_hex(body, body_len, md5) == 0 &&
        schema_pool_key(g_pool, md5, key, sizeof key) == 0)
        put_object(key, body, body_len);
    if (rec[0] == 'Q' && head == 34 && rec[1] == ' ') {
        memcpy(md5, rec + 2, 32);
        md5[32] = '\0';
        if (schema_pool_key(g_pool, md5, key, sizeof key) == 0)
            put_object(key, body, body_len);
    }
    return rec[0] == 'P' || rec[0] == 'Q';
}

static void put_record(const uint8_t *rec, size_t len, int *run)
{
    const uint8_t *nl = memchr(rec, '\n', len);
    if (!nl || nl - rec < 1)
        return;
    size_t head = (size_t)(nl - rec);
    const uint8_t *body = nl + 1;
    size_t body_len = len - head - 1;
    if (rec[0] == 'L') {
        put_object(LINKED_KEY, body, body_len);
        return;
    }
    if (put_version_record(rec, head, body, body_len, run))
        return;
    if ((rec[0] != '1' && rec[0] != '2') || head < 3 || rec[1] != ' ')
        return;
    const char *suffix = (const char *)rec + 2;
    size_t slen = head - 2;
    if (!suffix_ok(suffix, slen))
        return;
    char key[STORE_KEY_MAX + 1], full[STORE_KEY_MAX + 80];
    if (schema_obj_key(rec[0] == '1' ? D1_ID : D2_ID, key, sizeof key) != 0)
        return;
    char *cut = strrchr(key, '/'); /* ".../d/C-D-E/.dataset.json" -> ".../d/C-D-E/" */
    cut[1] = '\0';
    snprintf(full, sizeof full, "%s%.*s", key, (int)slen, suffix);
    put_object(full, body, body_len);
}

/* Open HDF5 ids of every kind the builder makes: a build must close all it opens. */
static long open_ids(void)
{
    static const H5I_type_t kinds[] = { H5I_FILE,    H5I_GROUP, H5I_DATATYPE,   H5I_DATASPACE,
                                        H5I_DATASET, H5I_ATTR,  H5I_GENPROP_LST };
    long total = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        hsize_t n = 0;
        if (H5Inmembers(kinds[k], &n) >= 0)
            total += (long)n;
    }
    return total;
}

/* ---- the image must be an HDF5 file: open it from memory and read everything ---- */

static void must(int ok, const char *what, const char *name)
{
    if (!ok) {
        fprintf(stderr, "the synthesised file is not valid HDF5: %s %s\n", what, name);
        abort();
    }
}

/* Read a whole dataset or attribute of at most VERIFY_READ_MAX bytes with its own type. */
static void read_all(hid_t obj, int is_attr, const char *name)
{
    hid_t space = is_attr ? H5Aget_space(obj) : H5Dget_space(obj);
    hid_t type = is_attr ? H5Aget_type(obj) : H5Dget_type(obj);
    must(space >= 0 && type >= 0, "cannot get the space or type of", name);
    hssize_t n = H5Sget_simple_extent_npoints(space);
    size_t size = H5Tget_size(type);
    must(n >= 0 && size > 0, "bad extent of", name);
    if (n > 0 && (uint64_t)n <= VERIFY_READ_MAX / size) {
        void *buf = calloc((size_t)n, size);
        if (!buf)
            abort();
        herr_t rc = is_attr ? H5Aread(obj, type, buf)
                            : H5Dread(obj, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
        must(rc >= 0, is_attr ? "cannot read attribute" : "cannot read dataset", name);
        if (H5Tdetect_class(type, H5T_VLEN) > 0 ||
            (H5Tget_class(type) == H5T_STRING && H5Tis_variable_str(type) > 0))
            H5Dvlen_reclaim(type, space, H5P_DEFAULT, buf);
        free(buf);
    }
    H5Tclose(type);
    H5Sclose(space);
}

static herr_t verify_attr(hid_t loc, const char *name, const H5A_info_t *info, void *ctx)
{
    (void)info;
    (void)ctx;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    must(a >= 0, "cannot open attribute", name);
    read_all(a, 1, name);
    H5Aclose(a);
    return 0;
}

static herr_t verify_obj(hid_t file, const char *name, const H5O_info_t *info, void *ctx)
{
    (void)ctx;
    hid_t o = H5Oopen(file, name, H5P_DEFAULT);
    must(o >= 0, "cannot open object", name);
    hsize_t idx = 0;
    must(H5Aiterate2(o, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, verify_attr, NULL) >= 0,
         "cannot list the attributes of", name);
    if (info->type == H5O_TYPE_DATASET)
        read_all(o, 0, name);
    H5Oclose(o);
    return 0;
}

static void verify_file(const unsigned char *bytes, size_t size)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0 || H5Pset_fapl_core(fapl, 1 << 20, 0) < 0 ||
        H5Pset_file_image(fapl, (void *)bytes, size) < 0)
        abort();
    hid_t f = H5Fopen("fuzz_image_verify.h5", H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    must(f >= 0, "cannot open", "the file");
    must(H5Ovisit2(f, H5_INDEX_NAME, H5_ITER_NATIVE, verify_obj, NULL, H5O_INFO_BASIC) >= 0,
         "cannot visit", "its objects");
    must(H5Fclose(f) >= 0, "cannot close", "the file");
}

/* Read [from, to) of the image in odd pieces, into whole (when not NULL) at from. 0 or -EIO. */
static int read_range(struct image *img, struct image_reader *r, uint64_t from, uint64_t to,
                      unsigned char *buf, unsigned char *whole)
{
    int rc = 0;
    while (from < to) {
        size_t n = to - from < READ_PIECE ? (size_t)(to - from) : READ_PIECE;
        ssize_t got = image_read(img, r, from, buf, n);
        if (got != -EIO && (got < 0 || (size_t)got != n)) {
            fprintf(stderr, "image_read(%llu, %zu) returned %zd\n", (unsigned long long)from, n,
                    got);
            abort();
        }
        if (got == -EIO)
            rc = -EIO;
        else if (whole)
            memcpy(whole + from, buf, n);
        from += n;
    }
    return rc;
}

/* Read the whole file except chunk segments larger than READ_CHUNK_MAX; when everything was
 * read (no EIO, nothing skipped) and the file is small enough, check it is valid HDF5. */
static void read_image(struct image *img, int flags)
{
    /* no prefetcher: its worker threads would make runs irreproducible */
    struct image_reader reader = { .cache = chunk_cache_new(CACHE_BYTES),
                                   .prefetch = NULL,
                                   .exact = image_reads_exact(img) || (flags & RUN_EXACT) };
    unsigned char *buf = malloc(READ_PIECE);
    if (!reader.cache || !buf)
        abort();
    size_t n_segs;
    const struct segment *segs = extent_segments(img->map, &n_segs);
    uint64_t size = image_size(img), run = 0;
    unsigned char *whole = size <= VERIFY_FILE_MAX ? calloc(1, size ? size : 1) : NULL;
    int complete = whole != NULL;
    for (size_t i = 0; i < n_segs; i++) {
        if (segs[i].kind == SEGMENT_CHUNK && segs[i].len > READ_CHUNK_MAX) {
            if (read_range(img, &reader, run, segs[i].off, buf, whole) != 0)
                complete = 0;
            run = segs[i].off + segs[i].len;
            complete = 0;
        }
    }
    if (read_range(img, &reader, run, size, buf, whole) != 0)
        complete = 0;
    /* past the end: nothing */
    if (image_read(img, &reader, size, buf, 1) != 0)
        abort();
    if ((flags & (RUN_LIST | RUN_SECRET)) == RUN_LIST && whole &&
        memmem(whole, size, SECRET_TEXT, strlen(SECRET_TEXT))) {
        fprintf(stderr, "a file read through a version pool holds bytes of an object outside it\n");
        abort();
    }
    if (complete && !getenv("FUZZ_IMAGE_NO_VERIFY"))
        verify_file(whole, (size_t)size);
    free(whole);
    free(buf);
    chunk_cache_free(reader.cache);
}

/* What the last input wrote: the domain's objects, the linked file, the version's list,
 * marker and pool (SECRET's pool stays). */
static void clear_objects(void)
{
    char path[2048], key[STORE_KEY_MAX + 1];
    fuzz_rm_tree(g_domain_dir);
    snprintf(path, sizeof path, "%s/%s", g_bucket, LINKED_KEY);
    (void)remove(path);
    if (schema_vlist_key(DOMAIN, key, sizeof key) == 0) {
        snprintf(path, sizeof path, "%s/%s", g_bucket, key);
        (void)remove(path);
    }
    snprintf(path, sizeof path, "%s/%s", g_bucket, g_pool_key);
    fuzz_rm_tree(path);
    put_object(DOMAIN_KEY, DOMAIN_JSON, sizeof DOMAIN_JSON - 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *parts[MAX_PARTS];
    size_t lens[MAX_PARTS], n_parts = 0;
    const size_t seplen = strlen(SEP);
    for (size_t start = 0; n_parts < MAX_PARTS;) {
        const uint8_t *p = start < size ? memmem(data + start, size - start, SEP, seplen) : NULL;
        size_t end = p ? (size_t)(p - data) : size;
        parts[n_parts] = data + start;
        lens[n_parts++] = end - start;
        if (!p)
            break;
        start = end + seplen;
    }

    clear_objects();
    static const char *const ids[4] = { ROOT_ID, D1_ID, D2_ID, T1_ID };
    for (size_t i = 0; i < 4 && i < n_parts; i++)
        put_json(ids[i], parts[i], lens[i]);
    int run = 0;
    for (size_t i = 4; i < n_parts; i++)
        put_record(parts[i], lens[i], &run);
    /* SECRET's bytes may reach the file legitimately when the input holds them itself (a link
     * name, an attribute, the version's own pool objects): then they prove nothing */
    if (memmem(data, size, SECRET_TEXT, strlen(SECRET_TEXT)))
        run |= RUN_SECRET;
    /* the bucket is a local one, which keeps the page cache: an exact reader only by choice */
    if (size & 1)
        run |= RUN_EXACT;

    struct image_source src = { .store = g_store, .bucket_name = BUCKET_NAME };
    struct image *img = NULL;
    /* a list without the domain's object: its version 1; with it: the current domain, which
     * may name its head version (ref mode) */
    const char *path = (run & (RUN_LIST | RUN_DOMAIN)) == RUN_LIST ? VERSION_PATH : DOMAIN;
    long ids_before = open_ids();
    int rc = image_build(&src, path, ROOT_ID, &img);
    if (open_ids() != ids_before) {
        fprintf(stderr, "image_build left %ld HDF5 ids open\n", open_ids() - ids_before);
        abort();
    }
    if (rc != 0 && rc != -EIO && rc != -ENOMEM) {
        fprintf(stderr, "image_build returned %d\n", rc);
        abort();
    }
    if (rc == 0) {
        if (getenv("FUZZ_IMAGE_TWICE")) {
            /* unchanged objects must rebuild to the same file */
            struct image *again = NULL;
            if (image_build(&src, path, ROOT_ID, &again) != 0 || !image_equal(img, again)) {
                fprintf(stderr, "rebuilding gave a different image\n");
                abort();
            }
            image_put(again);
        }
        read_image(img, run);
        image_put(img);
    }
    return 0;
}
