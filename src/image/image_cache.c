/*
 * image_cache: built images kept in a directory of cache_dir (image_cache.h).
 */
#include "image_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <zlib.h>

#include "h5osfs/util/grow.h"
#include "h5osfs/util/log.h"
#include "h5osfs/util/pfor.h"
#include "image_check.h"
#include "image_file.h"

/* ---- the key: what the image was built from ---- */

static pthread_once_t program_once = PTHREAD_ONCE_INIT;
static unsigned char program_digest[32]; /* written once, then only read */

/* This executable's digest: an image laid out by another build of h5osfs is not read back. */
static void digest_program(void)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    unsigned char buf[65536];
    int ok = ctx && fd >= 0 && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1;
    for (ssize_t n; ok && (n = read(fd, buf, sizeof buf)) != 0;)
        ok = n > 0 ? EVP_DigestUpdate(ctx, buf, (size_t)n) == 1 : errno == EINTR;
    unsigned len = 0;
    if (!ok || EVP_DigestFinal_ex(ctx, program_digest, &len) != 1 || len != 32) {
        log_warn("cannot read /proc/self/exe: built images are kept for this process only");
        for (size_t i = 0; i < sizeof program_digest; i++)
            program_digest[i] = (unsigned char)(getpid() >> (8 * (i % 4)));
    }
    if (fd >= 0)
        close(fd);
    EVP_MD_CTX_free(ctx);
}

struct stamp_entry {
    char *key;
    struct store_stat st;
    int gone;   /* deleted between the listing and its stat */
    int failed; /* its stat failed: no stamp */
};

struct stamp_walk {
    struct store *store;
    struct root_listing *rl;
    struct stamp_entry *v;
    size_t n, cap;
    int stat_later;              /* the listing gave no stats (a local bucket) */
    int shared_listed;           /* saw the image kept in the bucket */
    struct image_cache_key *key; /* its object_keys are collected */
    size_t cap_object_keys;
};

static int is_json(const char *key)
{
    size_t len = strlen(key);
    return len > 5 && strcmp(key + len - 5, ".json") == 0;
}

static int is_named(const char *key, const char *name)
{
    const char *slash = strrchr(key, '/');
    return strcmp(slash ? slash + 1 : key, name) == 0;
}

/* An object's key, for image_check_ids. */
static int keep_object_key(struct stamp_walk *w, const char *key)
{
    struct image_cache_key *k = w->key;
    if (k->n_object_keys == w->cap_object_keys) {
        char **bigger = grow_array(k->object_keys, &w->cap_object_keys, w->cap_object_keys + 1,
                                   sizeof *bigger, 64);
        if (!bigger)
            return -ENOMEM;
        k->object_keys = bigger;
    }
    return (k->object_keys[k->n_object_keys] = strdup(key)) ? (k->n_object_keys++, 0) : -ENOMEM;
}

static int stamp_key(void *ctx, const char *key, const struct store_stat *st)
{
    struct stamp_walk *w = ctx;
    /* HSDS's scanner rewrites .info.json (sizes, counts) whenever it likes, and the kept image
     * is made from the rest: neither shapes the file */
    if (is_named(key, ".info.json"))
        return 0;
    if (is_named(key, IMAGE_SHARED_NAME)) {
        w->shared_listed = 1;
        return 0;
    }
    int rc = is_json(key) ? keep_object_key(w, key) : build_root_listing_add(w->rl, key);
    if (rc != 0)
        return rc; /* 1: too many chunks, stop before any stat is spent */
    if (w->n == w->cap) {
        struct stamp_entry *bigger = grow_array(w->v, &w->cap, w->cap + 1, sizeof *bigger, 256);
        if (!bigger)
            return -ENOMEM;
        w->v = bigger;
    }
    struct stamp_entry *e = &w->v[w->n];
    *e = (struct stamp_entry){ .key = strdup(key) };
    if (st)
        e->st = *st;
    else
        w->stat_later = 1;
    return e->key ? (w->n++, 0) : -ENOMEM;
}

static void stat_entry(void *ctx, size_t i)
{
    struct stamp_walk *w = ctx;
    struct stamp_entry *e = &w->v[i];
    int rc = store_head(w->store, e->key, &e->st);
    e->gone = rc == -ENOENT;
    e->failed = rc != 0 && rc != -ENOENT;
}

static int by_key(const void *a, const void *b)
{
    return strcmp(((const struct stamp_entry *)a)->key, ((const struct stamp_entry *)b)->key);
}

/* SHA-256 of the sorted "key size etag ctime" lines (listings come in any order). */
static int digest_entries(struct stamp_walk *w, unsigned requests, unsigned char out[32])
{
    if (w->stat_later)
        pfor(w->n, requests ? requests : 1, stat_entry, w);
    if (w->n > 1)
        qsort(w->v, w->n, sizeof *w->v, by_key); /* v is NULL when n is 0 */
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1;
    for (size_t i = 0; ok && i < w->n; i++) {
        const struct stamp_entry *e = &w->v[i];
        char line[STORE_KEY_MAX + 128];
        int len =
            snprintf(line, sizeof line, "%s %llu %s %llu", e->key, (unsigned long long)e->st.size,
                     e->st.etag, (unsigned long long)e->st.ctime_ns);
        ok = !e->failed && len > 0 && (size_t)len < sizeof line &&
             (e->gone || EVP_DigestUpdate(ctx, line, (size_t)len + 1) == 1);
    }
    unsigned len = 0;
    ok = ok && EVP_DigestFinal_ex(ctx, out, &len) == 1 && len == 32;
    EVP_MD_CTX_free(ctx);
    return ok ? 0 : -EIO;
}

/* What the image remembers of its chunk objects, to tell an in-place rewrite (image.c). */
static int chunk_states_of(const struct stamp_walk *w, struct image_chunk_states *out)
{
    for (size_t i = 0; i < w->n; i++) {
        const struct stamp_entry *e = &w->v[i];
        int rc = e->gone || is_json(e->key) ? 0 : image_chunk_states_add(out, e->key, &e->st);
        if (rc != 0)
            return rc;
    }
    image_chunk_states_done(out);
    return 0;
}

void image_layout_stamp(const struct image_source *src, char out[IMAGE_STAMP_BUF])
{
    pthread_once(&program_once, digest_program);
    for (size_t i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", program_digest[i]);
    snprintf(out + 32, IMAGE_STAMP_BUF - 32, src->no_repairs ? ":s" : ":r");
}

static int digest_name(const struct image_source *src, const char *domain_path, const char *root_id,
                       char name[65])
{
    pthread_once(&program_once, digest_program);
    const char *parts[] = { src->bucket_id ? src->bucket_id : "", domain_path, root_id,
                            src->no_repairs ? "as stored" : "repaired" };
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
             EVP_DigestUpdate(ctx, program_digest, sizeof program_digest) == 1;
    for (size_t i = 0; ok && i < sizeof parts / sizeof *parts; i++)
        ok = EVP_DigestUpdate(ctx, parts[i], strlen(parts[i]) + 1) == 1;
    unsigned char md[32];
    unsigned len = 0;
    ok = ok && EVP_DigestFinal_ex(ctx, md, &len) == 1 && len == 32;
    EVP_MD_CTX_free(ctx);
    for (int i = 0; ok && i < 32; i++)
        snprintf(name + 2 * i, 3, "%02x", md[i]);
    return ok ? 0 : -ENOMEM;
}

/* The stamp of the bucket's copy: the local one's name and stamp together. */
static int digest_shared(const struct image_source *src, const char *domain_path,
                         const char *root_id, struct image_cache_key *key)
{
    const char *parts[] = { "h5osfs image in the bucket", src->bucket_name ? src->bucket_name : "",
                            domain_path, root_id, src->no_repairs ? "as stored" : "repaired" };
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
             EVP_DigestUpdate(ctx, program_digest, sizeof program_digest) == 1 &&
             EVP_DigestUpdate(ctx, key->stamp, sizeof key->stamp) == 1;
    for (size_t i = 0; ok && i < sizeof parts / sizeof *parts; i++)
        ok = EVP_DigestUpdate(ctx, parts[i], strlen(parts[i]) + 1) == 1;
    unsigned len = 0;
    ok = ok && EVP_DigestFinal_ex(ctx, key->shared_stamp, &len) == 1 && len == 32;
    EVP_MD_CTX_free(ctx);
    return ok ? 0 : -ENOMEM;
}

static int by_text(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void image_cache_key_clear(struct image_cache_key *key)
{
    for (size_t i = 0; i < key->n_object_keys; i++)
        free(key->object_keys[i]);
    free(key->object_keys);
    key->object_keys = NULL;
    key->n_object_keys = 0;
}

int image_cache_key(const struct image_source *src, const char *domain_path, const char *root_id,
                    struct root_listing *rl, struct image_cache_key *key)
{
    memset(key, 0, sizeof *key);
    if (!src->image_dir || schema_id_version(root_id) != 2)
        return -ENOTSUP;
    build_root_listing_init(src->store, root_id, rl);
    snprintf(key->root_prefix, sizeof key->root_prefix, "%s", rl->prefix);
    struct stamp_walk w = { .store = src->store, .rl = rl, .key = key };
    int rc = store_list_keys(src->store, rl->prefix, stamp_key, &w);
    if (rc == 1)
        rc = -EFBIG;
    memset(&key->chunks, 0, sizeof key->chunks);
    if (rc == 0)
        rc = digest_entries(&w, src->requests, key->stamp);
    if (rc == 0)
        rc = chunk_states_of(&w, &key->chunks);
    if (rc == 0)
        rc = digest_name(src, domain_path, root_id, key->name);
    if (rc == 0)
        rc = digest_shared(src, domain_path, root_id, key);
    if (rc == 0 && snprintf(key->shared_key, sizeof key->shared_key, "%s%s", rl->prefix,
                            IMAGE_SHARED_NAME) >= (int)sizeof key->shared_key)
        rc = -ENAMETOOLONG;
    key->shared_listed = w.shared_listed;
    rl->complete = rc == 0;
    if (rc == 0 && key->n_object_keys > 1)
        qsort(key->object_keys, key->n_object_keys, sizeof *key->object_keys, by_text);
    if (rc != 0) {
        image_chunk_states_free(&key->chunks);
        image_cache_key_clear(key);
    }
    for (size_t i = 0; i < w.n; i++)
        free(w.v[i].key);
    free(w.v);
    return rc;
}

/* ---- load and save ---- */

/* A build of fewer objects makes about as few requests as fetching its image would. */
#define SHARE_MIN_OBJECTS 8
#define SHARED_MAX (256u << 20) /* larger is not an image (500 datasets: ~1 MiB) */

/* A kept image names objects of this root only, as a build does: a copy put into the bucket by
 * anyone who can write it must not make this mount read another domain's objects (whose ACL
 * may deny them). 0, or -EINVAL (logged: what names the image). */
static int check_ids(const struct image *img, const struct image_cache_key *key, const char *what)
{
    char why[256];
    int rc = image_check_ids(img, key->root_prefix, (const char *const *)key->object_keys,
                             key->n_object_keys, why, sizeof why);
    if (rc != 0)
        log_warn("%s: not a usable built file: %s: built again", what, why);
    return rc;
}

/* A trim removes the least recently used files first, by their mtime. The kernel stamps a
 * file's times from a clock that moves once a tick (some 4 ms), so images used within one
 * tick would tie and a trim could remove the one just used instead of an older one. Uses are
 * stamped from the nanosecond clock instead, strictly increasing within this process. */
static pthread_mutex_t use_lock = PTHREAD_MUTEX_INITIALIZER;
static struct timespec last_use; /* under use_lock */

static struct timespec next_use_time(void)
{
    struct timespec now;
    if (clock_gettime(CLOCK_REALTIME, &now) != 0)
        now = (struct timespec){ 0 };
    pthread_mutex_lock(&use_lock);
    if (now.tv_sec < last_use.tv_sec ||
        (now.tv_sec == last_use.tv_sec && now.tv_nsec <= last_use.tv_nsec)) {
        now = last_use;
        if (++now.tv_nsec == 1000000000L) {
            now.tv_sec++;
            now.tv_nsec = 0;
        }
    }
    last_use = now;
    pthread_mutex_unlock(&use_lock);
    return now;
}

static void mark_used(const char *path)
{
    const struct timespec times[2] = { { .tv_nsec = UTIME_OMIT }, next_use_time() };
    if (utimensat(AT_FDCWD, path, times, 0) != 0)
        log_debug("%s: cannot mark it used: %s", path, strerror(errno));
}

struct image *image_cache_load(const struct image_source *src, const char *domain_path,
                               const struct image_cache_key *key)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", src->image_dir, key->name);
    struct image *img = image_alloc(src, domain_path);
    int rc = img ? image_file_load(src->image_dir, key->name, key->stamp, img) : -ENOMEM;
    if (rc == 0)
        rc = check_ids(img, key, path);
    if (rc != 0) {
        image_put(img);
        return NULL;
    }
    mark_used(path);
    return img;
}

/* The bucket's copy is deflated (HDF5 metadata is mostly zeros: 500 datasets, 1.5 MiB of image
 * data, put and fetched as some 0.1 MiB), behind a header: magic and the inflated length. */
#define SHARED_MAGIC "H5OSFSZ1"

static int deflate_shared(const unsigned char *raw, size_t len, unsigned char **out,
                          size_t *out_len)
{
    uLongf room = compressBound((uLong)len);
    unsigned char *z = malloc(16 + room);
    if (!z)
        return -ENOMEM;
    memcpy(z, SHARED_MAGIC, 8);
    for (int i = 0; i < 8; i++)
        z[8 + i] = (unsigned char)((uint64_t)len >> (8 * i));
    if (compress2(z + 16, &room, raw, (uLong)len, 1) != Z_OK) {
        free(z);
        return -ENOMEM;
    }
    *out = z;
    *out_len = 16 + room;
    return 0;
}

static int inflate_shared(const struct store_buf *z, unsigned char **raw, size_t *len)
{
    uint64_t want = 0;
    if (z->len < 16 || memcmp(z->data, SHARED_MAGIC, 8) != 0)
        return -EINVAL;
    for (int i = 0; i < 8; i++)
        want |= (uint64_t)z->data[8 + i] << (8 * i);
    if (want == 0 || want > SHARED_MAX)
        return -EINVAL;
    uLongf got = (uLongf)want;
    *raw = malloc((size_t)want);
    if (!*raw)
        return -ENOMEM;
    if (uncompress(*raw, &got, z->data + 16, (uLong)(z->len - 16)) != Z_OK || got != want) {
        free(*raw);
        *raw = NULL;
        return -EINVAL;
    }
    *len = (size_t)want;
    return 0;
}

static struct image *decode_shared(const struct image_source *src, const char *domain_path,
                                   const struct image_cache_key *key, const struct store_buf *z)
{
    unsigned char *raw = NULL;
    size_t len = 0;
    int rc = inflate_shared(z, &raw, &len);
    struct image *img = rc == 0 ? image_alloc(src, domain_path) : NULL;
    if (rc == 0)
        rc = img ? image_file_decode(raw, len, key->shared_stamp, img, key->shared_key) : -ENOMEM;
    else if (rc == -EINVAL)
        log_warn("%s: not a usable built file: built again", key->shared_key);
    free(raw);
    char why[256];
    if (rc == 0)
        rc = check_ids(img, key, key->shared_key);
    if (rc == 0 && (rc = image_check_no_links(img, why, sizeof why)) != 0)
        log_warn("%s: not a usable built file: %s: built again", key->shared_key, why);
    if (rc != 0) {
        image_put(img);
        return NULL;
    }
    return img;
}

struct image *image_cache_load_shared(const struct image_source *src, const char *domain_path,
                                      const struct image_cache_key *key)
{
    if (!key->shared_listed || src->bucket_images < 1)
        return NULL;
    struct store_buf z = { 0 };
    int rc = store_get(src->store, key->shared_key, SHARED_MAX, &z);
    struct image *img = rc == 0 ? decode_shared(src, domain_path, key, &z) : NULL;
    if (rc != 0 && rc != -ENOENT)
        log_debug("%s: not used: %s", key->shared_key, strerror(-rc));
    store_buf_free(&z);
    if (img)
        image_cache_save(src, key, img);
    return img;
}

void image_cache_share(const struct image_source *src, const struct image_cache_key *key,
                       const struct image *img)
{
    if (src->bucket_images < 2 || img->n_objects < SHARE_MIN_OBJECTS)
        return;
    unsigned char *raw = NULL, *z = NULL;
    size_t len = 0, zlen = 0;
    int rc = image_file_encode(key->shared_stamp, img, &raw, &len);
    if (rc == 0)
        rc = deflate_shared(raw, len, &z, &zlen);
    if (rc == 0)
        rc = store_put(src->store, key->shared_key, z, zlen);
    free(raw);
    free(z);
    if (rc != 0)
        log_debug("%s: the built file is not kept in the bucket: %s", key->shared_key,
                  strerror(-rc));
}

struct cached_file {
    char name[80];
    off_t size;
    struct timespec used;
};

static int by_use(const void *a, const void *b)
{
    const struct cached_file *x = a, *y = b;
    if (x->used.tv_sec != y->used.tv_sec)
        return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
    return x->used.tv_nsec < y->used.tv_nsec ? -1 : x->used.tv_nsec > y->used.tv_nsec;
}

/* The directory's image files (not the temporary ones being written). */
static int list_cached(DIR *d, struct cached_file **out, size_t *n, uint64_t *total)
{
    size_t cap = 0;
    *out = NULL;
    *n = 0;
    *total = 0;
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        struct stat sb;
        if (strlen(de->d_name) != 64 || fstatat(dirfd(d), de->d_name, &sb, 0) != 0)
            continue;
        if (*n == cap) {
            struct cached_file *bigger = grow_array(*out, &cap, *n + 1, sizeof *bigger, 64);
            if (!bigger)
                return -ENOMEM;
            *out = bigger;
        }
        struct cached_file *f = &(*out)[(*n)++];
        snprintf(f->name, sizeof f->name, "%s", de->d_name);
        f->size = sb.st_size;
        f->used = sb.st_mtim;
        *total += (uint64_t)sb.st_size;
    }
    return 0;
}

static void trim(const struct image_source *src)
{
    DIR *d = opendir(src->image_dir);
    if (!d)
        return;
    struct cached_file *files;
    size_t n;
    uint64_t total;
    if (list_cached(d, &files, &n, &total) == 0 && total > src->image_dir_max) {
        qsort(files, n, sizeof *files, by_use);
        for (size_t i = 0; i < n && total > src->image_dir_max; i++)
            if (unlinkat(dirfd(d), files[i].name, 0) == 0)
                total -= (uint64_t)files[i].size;
    }
    free(files);
    closedir(d);
}

/* Bytes saved since the directory was last trimmed: a trim reads the whole directory, so it
 * runs at the first save and then after every sixteenth of the limit. Builds save from many
 * threads at once; the count and the trim are under one lock so that no save's bytes are
 * lost to another's reset, and so that trims never overlap: two at once each remove the
 * oldest files for the whole excess (the second's unlinks of files the first removed fail and
 * do not count), together far more than the excess, down to the newest images. A trim reads
 * one directory of image files, short next to the build that precedes every save. */
static pthread_mutex_t trim_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t saved_since_trim = UINT64_MAX / 2; /* under trim_lock */

void image_cache_save(const struct image_source *src, const struct image_cache_key *key,
                      const struct image *img)
{
    char path[4096];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", src->image_dir, key->name);
    if (image_file_save(src->image_dir, key->name, key->stamp, img) != 0 || stat(path, &sb) != 0)
        return;
    mark_used(path);
    pthread_mutex_lock(&trim_lock);
    saved_since_trim += (uint64_t)sb.st_size;
    if (saved_since_trim > src->image_dir_max / 16) {
        saved_since_trim = 0;
        trim(src);
    }
    pthread_mutex_unlock(&trim_lock);
}
