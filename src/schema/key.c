/* schema keys: see include/h5osfs/schema/schema.h and spec/hsds-format.md §2, §11. */
#include "h5osfs/schema/schema.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>

#define NAME_MAX_BYTES 255
#define V1_HASH_CHARS 5
#define V1_KEY_PREFIX_LEN (V1_HASH_CHARS + 1) /* "hhhhh-" */
#define MAX_RANK 32                           /* H5S_MAX_RANK */
#define PARTITION_MAX 999999999               /* the 9 digits id.c accepts in "c<N>-" */

/* ---- bounded key writer ---- */

/* Appends into the caller's buffer and remembers the first failure, so key builders can
 * write piece by piece and check once at the end. */
struct key_writer {
    char *buf;
    size_t len;
    size_t used;
    int err;
};

static void writer_init(struct key_writer *w, char *buf, size_t len)
{
    w->buf = buf;
    w->len = len;
    w->used = 0;
    w->err = (buf && len > 0) ? 0 : -ENAMETOOLONG;
    if (w->err == 0)
        buf[0] = '\0';
}

__attribute__((format(printf, 2, 3))) static void writer_printf(struct key_writer *w,
                                                                const char *fmt, ...)
{
    if (w->err)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(w->buf + w->used, w->len - w->used, fmt, ap);
    va_end(ap);
    if (n < 0)
        w->err = -EINVAL;
    else if ((size_t)n >= w->len - w->used)
        w->err = -ENAMETOOLONG;
    else
        w->used += (size_t)n;
}

static void writer_put(struct key_writer *w, const char *s, size_t n)
{
    if (w->err)
        return;
    if (n >= w->len - w->used) {
        w->err = -ENAMETOOLONG;
        return;
    }
    memcpy(w->buf + w->used, s, n);
    w->used += n;
    w->buf[w->used] = '\0';
}

/* A half-written key must never be mistaken for a real one, so failures leave "". */
static int writer_finish(struct key_writer *w)
{
    if (w->err && w->buf && w->len > 0)
        w->buf[0] = '\0';
    return w->err;
}

static int fail_with_empty(char *buf, size_t len, int err)
{
    if (buf && len > 0)
        buf[0] = '\0';
    return err;
}

/* ---- id pieces (the id has already been validated) ---- */

/* The 8-8-4-6-6 hex after "<class>-" or "c<N>-". */
static const char *id_hex(const char *id)
{
    return strchr(id, '-') + 1;
}

/* Chunk ids carry their partition as "c<N>-"; -1 when there is none. */
static int chunk_id_partition(const char *id)
{
    int partition = -1;
    if (id[1] != '-' && sscanf(id + 1, "%d", &partition) != 1)
        return -1;
    return partition;
}

/* ---- schema v1 (§11) ---- */

/* HSDS files every v1 object under the first 5 hex digits of MD5(id) to spread S3 prefixes;
 * the id written after "hhhhh-" is what gets hashed, and the digits replace the blanks. */
static void v1_stamp_hash(struct key_writer *w)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    if (w->err)
        return;
    const char *id = w->buf + V1_KEY_PREFIX_LEN;
    if (EVP_Digest(id, strlen(id), md, &md_len, EVP_md5(), NULL) != 1 || md_len < 3) {
        w->err = -EIO;
        return;
    }
    for (int i = 0; i < V1_HASH_CHARS; i++)
        w->buf[i] = hex[(md[i / 2] >> (i % 2 ? 0 : 4)) & 0xf];
    w->buf[V1_HASH_CHARS] = '-';
}

static int v1_obj_key(const char *id, char *buf, size_t len)
{
    struct key_writer w;
    writer_init(&w, buf, len);
    writer_printf(&w, "%*s%s", V1_KEY_PREFIX_LEN, "", id);
    v1_stamp_hash(&w);
    return writer_finish(&w);
}

/* ---- schema v2 (§2.1) ---- */

/* "db/A-B/" shared by every object of one domain. */
static void v2_write_domain_dir(struct key_writer *w, const char *id)
{
    writer_printf(w, "db/%.17s/", id_hex(id));
}

/* "<c>/C-D-E/": the object's own directory under the domain's. */
static void v2_write_object_dir(struct key_writer *w, char collection, const char *id)
{
    writer_printf(w, "%c/%.18s/", collection, id_hex(id) + 18);
}

static void v2_write_partition_dir(struct key_writer *w, int partition)
{
    if (partition >= 0)
        writer_printf(w, "p%d/", partition);
}

static const char *v2_json_name(int cls)
{
    switch (cls) {
    case 'g':
        return ".group.json";
    case 'd':
        return ".dataset.json";
    default:
        return ".datatype.json";
    }
}

static int v2_obj_key(const char *id, int cls, char *buf, size_t len)
{
    struct key_writer w;
    writer_init(&w, buf, len);
    v2_write_domain_dir(&w, id);
    if (schema_id_is_root(id) == 1) {
        writer_printf(&w, "%s", v2_json_name(cls));
        return writer_finish(&w);
    }
    /* Chunks live beside their dataset's JSON, so they use the 'd' directory. */
    v2_write_object_dir(&w, cls == 'c' ? 'd' : (char)cls, id);
    if (cls == 'c') {
        v2_write_partition_dir(&w, chunk_id_partition(id));
        writer_printf(&w, "%s", strchr(id, '_') + 1);
    } else {
        writer_printf(&w, "%s", v2_json_name(cls));
    }
    return writer_finish(&w);
}

int schema_obj_key(const char *id, char *buf, size_t len)
{
    int version = schema_id_version(id);
    if (version < 0)
        return fail_with_empty(buf, len, version);
    if (version == 1)
        return v1_obj_key(id, buf, len);
    return v2_obj_key(id, id[0], buf, len);
}

/* ---- chunks (§2.4, §5.6) ---- */

static void write_index_string(struct key_writer *w, const uint64_t *index, int rank)
{
    for (int k = 0; k < rank; k++)
        writer_printf(w, k ? "_%" PRIu64 : "%" PRIu64, index[k]);
}

/* A v1 chunk key hashes the chunk id, which must be spelled the way HSDS spells it:
 * "c" + optional partition + the dataset id without its "d" + "_" + index string. */
static int v1_chunk_key(const char *dset_id, const uint64_t *index, int rank, int partition,
                        char *buf, size_t len)
{
    struct key_writer w;
    writer_init(&w, buf, len);
    writer_printf(&w, "%*sc", V1_KEY_PREFIX_LEN, "");
    if (partition >= 0)
        writer_printf(&w, "%d", partition);
    writer_printf(&w, "%s_", dset_id + 1);
    write_index_string(&w, index, rank);
    v1_stamp_hash(&w);
    return writer_finish(&w);
}

static int v2_chunk_key(const char *dset_id, const uint64_t *index, int rank, int partition,
                        char *buf, size_t len)
{
    struct key_writer w;
    writer_init(&w, buf, len);
    v2_write_domain_dir(&w, dset_id);
    v2_write_object_dir(&w, 'd', dset_id);
    v2_write_partition_dir(&w, partition);
    write_index_string(&w, index, rank);
    return writer_finish(&w);
}

int schema_chunk_key(const char *dset_id, const uint64_t *index, int rank, int partition, char *buf,
                     size_t len)
{
    int version = schema_id_version(dset_id);
    if (version < 0 || dset_id[0] != 'd' || !index || rank < 1 || rank > MAX_RANK ||
        partition > PARTITION_MAX)
        return fail_with_empty(buf, len, -EINVAL);
    if (version == 1)
        return v1_chunk_key(dset_id, index, rank, partition, buf, len);
    return v2_chunk_key(dset_id, index, rank, partition, buf, len);
}

/* "db/<A-B of root_id>/<name>": a key of the root itself, not of an object. */
static int root_file_key(const char *root_id, const char *name, char *buf, size_t len)
{
    struct key_writer w;
    if (schema_id_is_root(root_id) != 1)
        return fail_with_empty(buf, len, -EINVAL);
    writer_init(&w, buf, len);
    v2_write_domain_dir(&w, root_id);
    writer_printf(&w, "%s", name);
    return writer_finish(&w);
}

int schema_info_key(const char *root_id, char *buf, size_t len)
{
    return root_file_key(root_id, ".info.json", buf, len);
}

/* ---- names and domains (§2.3) ---- */

/* Length of the UTF-8 sequence at s (at most avail bytes), or 0 if it is not a valid
 * encoding: overlong forms, UTF-16 surrogates and code points past U+10FFFF are refused,
 * so two spellings can never name the same domain. */
static size_t utf8_sequence_len(const unsigned char *s, size_t avail)
{
    unsigned char lo = 0x80, hi = 0xbf; /* allowed range of the second byte */
    size_t n;
    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        n = 2;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        n = 3;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        n = 4;
    else
        return 0;
    if (s[0] == 0xe0)
        lo = 0xa0;
    else if (s[0] == 0xed)
        hi = 0x9f;
    else if (s[0] == 0xf0)
        lo = 0x90;
    else if (s[0] == 0xf4)
        hi = 0x8f;
    if (n > avail || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    }
    return n;
}

static int is_dot_or_dotdot(const char *name, size_t len)
{
    return (len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.');
}

int schema_name_valid(const char *name, size_t len)
{
    if (!name || len == 0 || len > NAME_MAX_BYTES || is_dot_or_dotdot(name, len))
        return 0;
    const unsigned char *s = (const unsigned char *)name;
    for (size_t i = 0; i < len;) {
        if (s[i] == '/' || s[i] < 0x20 || s[i] == 0x7f)
            return 0;
        size_t n = utf8_sequence_len(s + i, len - i);
        if (n == 0)
            return 0;
        i += n;
    }
    return 1;
}

/* 1 if every '/'-separated part of rel[0..len) passes ok (empty parts included). */
static int path_names_all(const char *rel, size_t len, int (*ok)(const char *, size_t))
{
    const char *end = rel + len;
    for (const char *part = rel;;) {
        const char *slash = memchr(part, '/', (size_t)(end - part));
        const char *part_end = slash ? slash : end;
        if (!ok(part, (size_t)(part_end - part)))
            return 0;
        if (!slash)
            return 1;
        part = slash + 1;
    }
}

/* 1 if rel is "<name>(/<name>)*" with every name valid: no empty, "." or ".." part, no
 * leading or trailing '/'. */
static int path_names_valid(const char *rel, size_t len)
{
    return path_names_all(rel, len, schema_name_valid);
}

int schema_domain_key(const char *path, char *buf, size_t len)
{
    struct key_writer w;
    if (!path || path[0] != '/' || !path_names_valid(path + 1, strlen(path + 1)))
        return fail_with_empty(buf, len, -EINVAL);
    writer_init(&w, buf, len);
    writer_printf(&w, "%s%s", path + 1, SCHEMA_DOMAIN_KEY_SUFFIX);
    return writer_finish(&w);
}

int schema_domain_path(const char *key, char *buf, size_t len)
{
    static const size_t suffix_len = sizeof(SCHEMA_DOMAIN_KEY_SUFFIX) - 1;
    struct key_writer w;
    size_t key_len = key ? strlen(key) : 0;
    if (key_len <= suffix_len ||
        strcmp(key + key_len - suffix_len, SCHEMA_DOMAIN_KEY_SUFFIX) != 0 ||
        !path_names_valid(key, key_len - suffix_len))
        return fail_with_empty(buf, len, -EINVAL);
    writer_init(&w, buf, len);
    writer_put(&w, "/", 1);
    writer_put(&w, key, key_len - suffix_len);
    return writer_finish(&w);
}

/* ---- names the bucket reserves ---- */

static int name_is(const char *name, size_t len, const char *reserved)
{
    return len == strlen(reserved) && memcmp(name, reserved, len) == 0;
}

/* 1 unless name is one the bucket keeps for itself at any depth. */
static int name_not_reserved(const char *name, size_t len)
{
    static const size_t tmp_len = sizeof(SCHEMA_TMP_NAME_PREFIX) - 1;
    if (name_is(name, len, &SCHEMA_DOMAIN_KEY_SUFFIX[1]))
        return 0; /* P/.domain.json/.domain.json: below the parent's own object */
    return !(len >= tmp_len && memcmp(name, SCHEMA_TMP_NAME_PREFIX, tmp_len) == 0);
}

static int refused(const char **why, const char *reason, int err)
{
    if (why)
        *why = reason;
    return err;
}

static const char not_valid[] = "not a valid name (empty, \".\", \"..\", not UTF-8, a control "
                                "character, or longer than 255 bytes)";
static const char reserved[] = "the bucket reserves the name (\".domain.json\" names a folder's "
                               "own object, \"" SCHEMA_TMP_NAME_PREFIX "*\" the store's temporary "
                               "files)";

int schema_name_allowed(const char *name, const char **why)
{
    size_t len = name ? strlen(name) : 0;
    if (!schema_name_valid(name, len))
        return refused(why, not_valid, -EINVAL);
    if (!name_not_reserved(name, len))
        return refused(why, reserved, -EINVAL);
    return refused(why, NULL, 0);
}

int schema_domain_path_allowed(const char *path, const char **why)
{
    if (!path || path[0] != '/' || !path_names_valid(path + 1, strlen(path + 1)))
        return refused(why, not_valid, -EINVAL);
    if (!path_names_all(path + 1, strlen(path + 1), name_not_reserved))
        return refused(why, reserved, -EINVAL);
    if (schema_is_versions_path(path) == 1)
        return refused(why,
                       "\"" SCHEMA_VERSIONS_DIR "\" holds versions, made by h5osfs's version "
                       "operations only",
                       -EPERM);
    const char *first_end = strchr(path + 1, '/');
    size_t first_len = first_end ? (size_t)(first_end - (path + 1)) : strlen(path + 1);
    if (name_is(path + 1, first_len, SCHEMA_OBJECT_TREE))
        return refused(why, "/" SCHEMA_OBJECT_TREE " is HSDS's object tree", -EPERM);
    return refused(why, NULL, 0);
}

int schema_chunk_partition(const uint64_t *index, int rank, int count)
{
    static const unsigned primes[10] = { 29, 31, 37, 41, 43, 47, 53, 59, 61, 67 };
    if (count <= 0)
        return -1;
    uint64_t sum = 0;
    for (int k = 0; k < rank; k++)
        sum += index[k] * primes[k % 10];
    return (int)(sum % (uint64_t)count);
}

/* ---- versions ---- */

static int name_is_versions_dir(const char *name, size_t len)
{
    return !name_is(name, len, SCHEMA_VERSIONS_DIR);
}

int schema_is_versions_path(const char *path)
{
    if (!path)
        return 0;
    return !path_names_all(path, strlen(path), name_is_versions_dir);
}

/* Split "/DIR/NAME" at its last '/': a domain path with a name after it. */
static int split_domain_path(const char *domain_path, size_t *dir_len)
{
    const char *slash = domain_path ? strrchr(domain_path, '/') : NULL;
    if (!slash || domain_path[0] != '/' || slash[1] == '\0')
        return -EINVAL;
    *dir_len = (size_t)(slash - domain_path);
    return 0;
}

int schema_versions_dir(const char *domain_path, char *buf, size_t len)
{
    struct key_writer w;
    size_t dir_len;
    if (split_domain_path(domain_path, &dir_len) != 0)
        return fail_with_empty(buf, len, -EINVAL);
    writer_init(&w, buf, len);
    writer_put(&w, domain_path, dir_len);
    writer_printf(&w, "/" SCHEMA_VERSIONS_DIR "%s", domain_path + dir_len);
    return writer_finish(&w);
}

int schema_version_domain_path(const char *domain_path, const char *name, char *buf, size_t len)
{
    int rc = schema_versions_dir(domain_path, buf, len);
    if (rc != 0)
        return rc;
    if (!name || schema_name_valid(name, strlen(name)) != 1)
        return fail_with_empty(buf, len, -EINVAL);
    struct key_writer w = { buf, len, strlen(buf), 0 };
    writer_printf(&w, "/%s", name);
    return writer_finish(&w);
}

int schema_version_domain_of(const char *path, char *buf, size_t len)
{
    static const char marker[] = "/" SCHEMA_VERSIONS_DIR "/";
    const char *at = path ? strstr(path, marker) : NULL;
    if (!at || path[0] != '/' || !path_names_valid(path + 1, strlen(path + 1)))
        return fail_with_empty(buf, len, -EINVAL);
    const char *name = at + sizeof marker - 1, *slash = strchr(name, '/');
    if (!slash || strchr(slash + 1, '/') || schema_is_versions_path(slash) == 1)
        return fail_with_empty(buf, len, -EINVAL);
    struct key_writer w;
    writer_init(&w, buf, len);
    writer_put(&w, path, (size_t)(at - path));
    writer_put(&w, "/", 1);
    writer_put(&w, name, (size_t)(slash - name));
    if (schema_is_versions_path(w.err ? "" : buf) == 1)
        w.err = -EINVAL;
    return writer_finish(&w);
}

int schema_vlist_key(const char *domain_path, char *buf, size_t len)
{
    int rc = schema_versions_dir(domain_path, buf, len);
    if (rc != 0)
        return rc;
    size_t used = strlen(buf);
    memmove(buf, buf + 1, used); /* keys have no leading '/' */
    struct key_writer w = { buf, len, used - 1, 0 };
    writer_printf(&w, "/.h5osfs-versions");
    return writer_finish(&w);
}

/* n lowercase hex digits at s */
static int hex_digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

static int md5_hex_valid(const char *md5, size_t len)
{
    return len == 32 && hex_digits(md5, len);
}

int schema_is_md5_hex(const char *s)
{
    return s && md5_hex_valid(s, strlen(s));
}

/* db/<pool's A-B>/<dir>/<name>, name 32 lowercase hex digits */
static int pool_object_key(const char *pool, const char *dir, const char *name, char *buf,
                           size_t len)
{
    struct key_writer w;
    if (schema_id_is_root(pool) != 1 || !name || !md5_hex_valid(name, strlen(name)))
        return fail_with_empty(buf, len, -EINVAL);
    writer_init(&w, buf, len);
    v2_write_domain_dir(&w, pool);
    writer_printf(&w, "%s/%s", dir, name);
    return writer_finish(&w);
}

int schema_pool_key(const char *pool, const char *md5, char *buf, size_t len)
{
    return pool_object_key(pool, "c", md5, buf, len);
}

int schema_pool_file_key(const char *pool, const char *name, char *buf, size_t len)
{
    return pool_object_key(pool, "f", name, buf, len);
}

const char *schema_pool_file_name(const char *key)
{
    const size_t top = strlen(SCHEMA_OBJECT_TREE "/"), dir = top + 17; /* db/A-B */
    size_t n = key ? strlen(key) : 0;
    if (n != dir + 3 + 32 || strncmp(key, SCHEMA_OBJECT_TREE "/", top) != 0 ||
        !hex_digits(key + top, 8) || key[top + 8] != '-' || !hex_digits(key + top + 9, 8) ||
        strncmp(key + dir, "/f/", 3) != 0)
        return NULL;
    return hex_digits(key + n - 32, 32) ? key + n - 32 : NULL;
}

int schema_pool_marker_key(const char *pool, char *buf, size_t len)
{
    return root_file_key(pool, ".h5osfs-pool", buf, len);
}

int schema_pool_uri_check(const char *uri, const char *bucket, const char *pool, const char **key)
{
    char prefix[64];
    size_t bucket_len = bucket ? strlen(bucket) : 0;
    if (!uri || bucket_len == 0 || strncmp(uri, bucket, bucket_len) != 0 ||
        uri[bucket_len] != '/' || schema_id_is_root(pool) != 1)
        return -EINVAL;
    const char *k = uri + bucket_len + 1;
    struct key_writer w;
    writer_init(&w, prefix, sizeof prefix);
    v2_write_domain_dir(&w, pool);
    writer_printf(&w, "c/");
    if (writer_finish(&w) != 0 || strncmp(k, prefix, strlen(prefix)) != 0 ||
        !md5_hex_valid(k + strlen(prefix), strlen(k + strlen(prefix))))
        return -EINVAL;
    if (key)
        *key = k;
    return 0;
}

/* ---- linked files (spec §8) ---- */

/* A v1 object's key: "<5 hex digits>-<kind letter>-<uuid>[...]", at the top of the bucket. */
static int is_v1_object_key(const char *key)
{
    for (int i = 0; i < V1_HASH_CHARS; i++)
        if (!isxdigit((unsigned char)key[i]))
            return 0;
    return key[5] == '-' && islower((unsigned char)key[6]) && key[7] == '-' && !strchr(key, '/');
}

/* Every component of key is a name: not empty, not "." or "..", no leading '/'. */
static int key_components_ok(const char *key)
{
    for (const char *p = key;;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        if (n == 0 || (p[0] == '.' && (n == 1 || (n == 2 && p[1] == '.'))))
            return 0;
        if (!slash)
            return 1;
        p = slash + 1;
    }
}

/* Linked bytes are HDF5 files of the bucket. The objects of domains are not: a file_uri
 * naming one (another domain's chunk or linked file, or its .domain.json) would read that
 * domain's bytes with no regard to its ACL. The root's own objects are allowed (linked ingest
 * keeps the file as db/A-B/.h5osfs-file). */
static int linked_key_allowed(const char *key, const char *root_id)
{
    size_t len = strlen(key), suffix = strlen(SCHEMA_DOMAIN_KEY_SUFFIX);
    if (strcmp(key, &SCHEMA_DOMAIN_KEY_SUFFIX[1]) == 0 ||
        (len > suffix && strcmp(key + len - suffix, SCHEMA_DOMAIN_KEY_SUFFIX) == 0))
        return 0;
    if (is_v1_object_key(key))
        return 0;
    if (strncmp(key, SCHEMA_OBJECT_TREE "/", strlen(SCHEMA_OBJECT_TREE) + 1) != 0)
        return 1;
    char own[32];
    if (!root_id || schema_id_version(root_id) != 2)
        return 0;
    snprintf(own, sizeof own, SCHEMA_OBJECT_TREE "/%.8s-%.8s/", root_id + 2, root_id + 11);
    return strncmp(key, own, strlen(own)) == 0;
}

int schema_linked_uri_key(const char *uri, const char *bucket, const char *root_id, int any_object,
                          const char **key)
{
    const char *p = uri;
    if (!uri)
        return -EINVAL;
    if (strncmp(p, "s3://", 5) == 0)
        p += 5;
    else if (strncmp(p, "file://", 7) == 0)
        p += 7;
    const char *slash = strchr(p, '/');
    if (!slash || !bucket || !*bucket || (size_t)(slash - p) != strlen(bucket) ||
        strncmp(p, bucket, (size_t)(slash - p)) != 0 || !key_components_ok(slash + 1))
        return -EINVAL;
    if (!any_object && !linked_key_allowed(slash + 1, root_id))
        return -EPERM;
    *key = slash + 1;
    return 0;
}

const char *schema_pool_file_uri_key(const char *uri, const char *bucket)
{
    const char *key = NULL;
    return schema_linked_uri_key(uri, bucket, NULL, 1, &key) == 0 && schema_pool_file_name(key)
               ? key
               : NULL;
}

int schema_linked_file_key(const char *root, char *key, size_t len)
{
    int n = snprintf(key, len, SCHEMA_OBJECT_TREE "/%.8s-%.8s/.h5osfs-file", root + 2, root + 11);
    return n > 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

int schema_linked_own_file(const char *uri, const char *bucket, const char *root)
{
    char own[64]; /* db/A-B/.h5osfs-file */
    const char *key = NULL;
    return uri && root && schema_linked_file_key(root, own, sizeof own) == 0 &&
           schema_linked_uri_key(uri, bucket, root, 0, &key) == 0 && strcmp(key, own) == 0;
}

int schema_version_linked_ok(const json_t *lay, const char *bucket, const char *root,
                             const char **pool_key)
{
    const json_t *cls = json_object_get(lay, "class"), *table = json_object_get(lay, "chunk_table");
    const json_t *file = json_object_get(lay, "file_uri");
    const char *uri = json_is_string(file) ? json_string_value(file) : NULL, *key = NULL;
    char of[SCHEMA_ID_BUF];
    int ok = !json_is_string(cls) || !uri                            ? 0
             : schema_linked_own_file(uri, bucket, root)             ? 1
             : (key = schema_pool_file_uri_key(uri, bucket)) != NULL ? SCHEMA_LINKED_POOL_FILE
                                                                     : 0;
    if (ok && strcmp(json_string_value(cls), "H5D_CHUNKED_REF_INDIRECT") == 0) {
        const char *t = json_string_value(table); /* a table of root's own */
        if (!t || schema_id_class(t) != 'd' || schema_root_of(t, of) != 0 || strcmp(of, root) != 0)
            ok = 0;
    }
    if (pool_key)
        *pool_key = ok == SCHEMA_LINKED_POOL_FILE ? key : NULL;
    return ok;
}
