/*
 * fuzz_image_file: bytes of a kept image (cache_dir/images/<name>, or the inflated copy in the
 * bucket, db/A-B/.h5osfs-image) -> image_file_decode, with image_check -> image_check_ids and
 * image_check_no_links as image_cache.c applies them -> every byte of the file read through a
 * chunk cache from a POSIX bucket -> image_put (src/image/image_file.c, image_check.c,
 * image_read.c, refs.c).
 *
 * Input: an image file as image_file_encode writes it (format in image_file.c and
 * tests/integration/imagefile.py). Its own stamp (bytes 16..47) is taken as the expected one:
 * a forger can always match the stamp, so the checks after it are what is fuzzed.
 *
 * The bucket (in /dev/shm when it exists) holds one domain of fixed ids, made once: root group
 * ROOT_ID, dataset D1 (int32 [10], chunks [4]: chunk objects 0, 1, 2), dataset D2 (int8 [4, 6],
 * chunks [2, 3]: 0_0 and 1_1), and a linked file "linked/f.h5" of 64 KiB. Images of it are the
 * seeds: FUZZ_IMAGE_FILE_SEED=<path> writes the image a build makes of it to path and exits
 * (fuzz/make_image_seeds.py derives the linked and forged seeds from that one).
 *
 * Checks: decoding returns 0, -ENOENT or -ENOMEM; an image that passes every check has every
 * extent read (chunk extents up to READ_CHUNK_MAX) with image_read returning the length asked or
 * -EIO, and sanitizers watching every chunk load (the issue-24 crashes were in refs.c's
 * loaders); it encodes again to bytes that decode to an equal image.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
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
#include "h5osfs/schema/schema.h"
#include "h5osfs/store/store.h"

#include "image_check.h"
#include "image_file.h"
#include "image_int.h"
#include "fuzz_scratch.h"

#define ROOT_ID "g-5897df5c-0a297b92-d01f-57d482-a1f31a"
#define D1_ID "d-5897df5c-0a297b92-76c1-4d1b3f-0a99df"
#define D2_ID "d-5897df5c-0a297b92-2f32-94e6d8-2b038e"
#define ROOT_PREFIX "db/5897df5c-0a297b92/"
#define DOMAIN "/home/fuzz/f.h5"
#define BUCKET_NAME "fuzzb"
#define LINKED_KEY "linked/f.h5"
#define LINKED_BYTES 65536
#define READ_PIECE 65521
#define READ_CHUNK_MAX (4u << 20)
#define CACHE_BYTES (64u << 20)

static char g_bucket[256];
static struct store *g_store;
static char g_keys[3][STORE_KEY_MAX + 1]; /* the root's object keys, sorted */
static const char *g_key_list[3];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void put(const char *key, const void *bytes, size_t len)
{
    if (store_put(g_store, key, bytes, len) != 0)
        abort();
}

static void put_json(const char *id, const char *json)
{
    char key[STORE_KEY_MAX + 1];
    if (schema_obj_key(id, key, sizeof key) != 0)
        abort();
    put(key, json, strlen(json));
}

static void put_chunk(const char *dset_id, const char *index, const void *bytes, size_t len)
{
    char key[STORE_KEY_MAX + 1], chunk[STORE_KEY_MAX + 40];
    if (schema_obj_key(dset_id, key, sizeof key) != 0)
        abort();
    *strrchr(key, '/') = '\0'; /* ".../d/C-D-E/.dataset.json" -> ".../d/C-D-E" */
    snprintf(chunk, sizeof chunk, "%s/%s", key, index);
    put(chunk, bytes, len);
}

#define DSET_JSON(id, type, dims, cdims)                                                         \
    "{\"id\": \"" id "\", \"root\": \"" ROOT_ID "\", \"attributes\": {}, \"type\": {\"class\": " \
    "\"H5T_INTEGER\", \"base\": \"" type "\"}, \"shape\": {\"class\": \"H5S_SIMPLE\", "          \
    "\"dims\": " dims "}, \"layout\": {\"class\": \"H5D_CHUNKED\", \"dims\": " cdims "}}"

static void make_domain(void)
{
    static const char domain_json[] =
        "{\"root\": \"" ROOT_ID "\", \"owner\": \"fuzz\", \"acls\": {\"fuzz\": {\"read\": true}}, "
        "\"created\": 1.0, \"lastModified\": 1.0}";
    put("home/fuzz/f.h5/.domain.json", domain_json, sizeof domain_json - 1);
    put_json(ROOT_ID, "{\"id\": \"" ROOT_ID "\", \"root\": \"" ROOT_ID "\", \"attributes\": {}, "
                      "\"links\": {\"d1\": {\"class\": \"H5L_TYPE_HARD\", \"id\": \"" D1_ID "\"}, "
                      "\"d2\": {\"class\": \"H5L_TYPE_HARD\", \"id\": \"" D2_ID "\"}}}");
    put_json(D1_ID, DSET_JSON(D1_ID, "H5T_STD_I32LE", "[10]", "[4]"));
    put_json(D2_ID, DSET_JSON(D2_ID, "H5T_STD_I8LE", "[4, 6]", "[2, 3]"));
    unsigned char bytes[LINKED_BYTES];
    for (size_t i = 0; i < sizeof bytes; i++)
        bytes[i] = (unsigned char)(i * 7 + 1);
    put_chunk(D1_ID, "0", bytes, 16);
    put_chunk(D1_ID, "1", bytes + 16, 16);
    put_chunk(D1_ID, "2", bytes + 32, 16);
    put_chunk(D2_ID, "0_0", bytes, 6);
    put_chunk(D2_ID, "1_1", bytes + 6, 6);
    put(LINKED_KEY, bytes, sizeof bytes);
    const char *ids[3] = { ROOT_ID, D1_ID, D2_ID };
    for (int i = 0; i < 3; i++)
        if (schema_obj_key(ids[i], g_keys[i], sizeof g_keys[i]) != 0)
            abort();
    for (int i = 0; i < 3; i++)
        g_key_list[i] = g_keys[i];
    for (int i = 0; i < 2; i++) /* three keys: sort them */
        for (int j = 0; j < 2 - i; j++)
            if (strcmp(g_key_list[j], g_key_list[j + 1]) > 0) {
                const char *t = g_key_list[j];
                g_key_list[j] = g_key_list[j + 1];
                g_key_list[j + 1] = t;
            }
}

/* FUZZ_IMAGE_FILE_SEED=path: the encoding of the domain's image, as a build makes it. */
static void write_seed(const char *path)
{
    struct image_source src = { .store = g_store, .bucket_name = BUCKET_NAME };
    struct image *img = NULL;
    unsigned char stamp[32] = { 0 }, *bytes = NULL;
    size_t len = 0;
    if (image_build(&src, DOMAIN, ROOT_ID, &img) != 0 ||
        image_file_encode(stamp, img, &bytes, &len) != 0)
        abort();
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(bytes, 1, len, f) != len || fclose(f) != 0)
        abort();
    free(bytes);
    image_put(img);
    exit(0);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_log_setup();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    const char *base = fuzz_scratch_base();
    fuzz_remove_stale(base, "h5osfs-fuzz-image-file");
    snprintf(g_bucket, sizeof g_bucket, "%s/h5osfs-fuzz-image-file.%ld", base, (long)getpid());
    if (mkdir(g_bucket, 0755) != 0 || store_posix_open(g_bucket, &g_store) != 0)
        abort();
    make_domain();
    const char *seed = getenv("FUZZ_IMAGE_FILE_SEED");
    if (seed)
        write_seed(seed);
    return 0;
}

/* The bucket goes when the process does (libFuzzer exits through exit()). */
__attribute__((destructor)) static void cleanup(void)
{
    if (g_store)
        store_close(g_store);
    if (g_bucket[0])
        fuzz_rm_tree(g_bucket);
}

static void read_range(struct image *img, struct image_reader *r, uint64_t from, uint64_t to,
                       unsigned char *buf)
{
    while (from < to) {
        size_t n = to - from < READ_PIECE ? (size_t)(to - from) : READ_PIECE;
        ssize_t got = image_read(img, r, from, buf, n);
        if (got != -EIO && (got < 0 || (size_t)got != n)) {
            fprintf(stderr, "image_read(%llu, %zu) returned %zd\n", (unsigned long long)from, n,
                    got);
            abort();
        }
        from += n;
    }
}

/* Every extent (chunk extents up to READ_CHUNK_MAX) with a few bytes of its neighbours, and
 * the end of the file: not every byte, as a forged size may be 2^60 bytes of holes. */
static void read_image(struct image *img)
{
    struct image_reader reader = { .cache = chunk_cache_new(CACHE_BYTES), .prefetch = NULL };
    unsigned char *buf = malloc(READ_PIECE);
    if (!reader.cache || !buf)
        abort();
    size_t n_segs;
    const struct segment *segs = extent_segments(img->map, &n_segs);
    uint64_t size = image_size(img);
    for (size_t i = 0; i < n_segs; i++) {
        uint64_t from = segs[i].off > 3 ? segs[i].off - 3 : 0;
        uint64_t to =
            segs[i].len > READ_CHUNK_MAX ? segs[i].off + 3 : segs[i].off + segs[i].len + 3;
        read_range(img, &reader, from, to < size ? to : size, buf);
    }
    read_range(img, &reader, size > 100 ? size - 100 : 0, size, buf);
    if (image_read(img, &reader, size, buf, 1) != 0) /* past the end: nothing */
        abort();
    free(buf);
    chunk_cache_free(reader.cache);
}

/* Encoded again, the image decodes to an equal one (the checks are about content only). */
static void round_trip(const struct image *img, const unsigned char *stamp)
{
    unsigned char *bytes = NULL;
    size_t len = 0;
    if (image_file_encode(stamp, img, &bytes, &len) != 0)
        return; /* no memory */
    struct image_source src = { .store = g_store, .bucket_name = BUCKET_NAME };
    struct image *again = image_alloc(&src, DOMAIN);
    if (!again)
        abort();
    if (image_file_decode(bytes, len, stamp, again, "again") != 0 || !image_equal(img, again)) {
        fprintf(stderr, "the image encoded again is not the same image\n");
        abort();
    }
    image_put(again);
    free(bytes);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char stamp[32] = { 0 };
    if (size >= 48)
        memcpy(stamp, data + 16, 32);
    struct image_source src = { .store = g_store, .bucket_name = BUCKET_NAME };
    struct image *img = image_alloc(&src, DOMAIN);
    if (!img)
        abort();
    int rc = image_file_decode(data, size, stamp, img, "fuzz");
    if (rc != 0 && rc != -ENOENT && rc != -ENOMEM) {
        fprintf(stderr, "image_file_decode returned %d\n", rc);
        abort();
    }
    char why[256];
    if (rc == 0 && image_check_ids(img, ROOT_PREFIX, g_key_list, 3, why, sizeof why) == 0) {
        (void)image_check_no_links(img, why, sizeof why); /* a bucket copy's rule; read anyway */
        round_trip(img, stamp);
        read_image(img);
    }
    image_put(img);
    return 0;
}
