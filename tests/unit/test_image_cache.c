/*
 * test_image_cache: the size limit of the directory of kept images (src/image/image_cache.c)
 * when builds save at once from many threads, as FUSE's threads do; and the checks every kept
 * image passes before use (src/image/image_check.c), on a genuine image with one field changed.
 *
 * Every save here is larger than a sixteenth of the limit, so every save is followed by a
 * trim. A trim removes the least recently used files until the directory fits the limit, and
 * no more: however the saves interleave, the directory ends with exactly as many files as fit.
 * (Two trims at once would each remove the oldest files for the whole excess; the second's
 * unlink of a file the first removed fails, is not counted, and it removes newer files
 * instead: together too many, down to none.)
 */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "h5osfs/image/image.h"
#include "h5osfs/util/log.h"
#include "h5osfs/schema/schema.h"
#include "h5osfs/store/store.h"
#include "image_cache.h"
#include "image_check.h"
#include "image_file.h"

#define ROOT "g-01234567-89abcdef-89ab-cdef01-234567"
#define THREADS 8
#define ROUNDS 50
#define OLD 100 /* images there before each round */
#define KEPT 4  /* images that fit the limit */

static char tmp_dir[256];

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

struct saver {
    const struct image_source *src;
    const struct image *img;
    pthread_barrier_t *start;
    int round, id;
};

static void *save_one(void *arg)
{
    const struct saver *s = arg;
    struct image_cache_key key = { 0 };
    snprintf(key.name, sizeof key.name, "%032x%032x", s->round, s->id);
    pthread_barrier_wait(s->start); /* all saves at once */
    image_cache_save(s->src, &key, s->img);
    return NULL;
}

/* The kept images (64-character names) in dir: how many, and their total size. */
static void count_images(const char *dir, int *n, uint64_t *bytes)
{
    DIR *d = opendir(dir);
    *n = 0;
    *bytes = 0;
    CHECK(d != NULL);
    if (!d)
        return;
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        struct stat sb;
        if (strlen(de->d_name) == 64 && fstatat(dirfd(d), de->d_name, &sb, 0) == 0) {
            (*n)++;
            *bytes += (uint64_t)sb.st_size;
        }
    }
    closedir(d);
}

static struct image *build_small_image(const char *name, struct store **st)
{
    char bucket[512], key[STORE_KEY_MAX + 1], text[256];
    snprintf(bucket, sizeof bucket, "%s/%s", tmp_dir, name);
    CHECK_INT(mkdir(bucket, 0755), 0);
    CHECK_INT(store_posix_open(bucket, st), 0);
    CHECK_INT(schema_obj_key(ROOT, key, sizeof key), 0);
    snprintf(text, sizeof text,
             "{\"id\": \"%s\", \"root\": \"%s\", \"links\": {}, "
             "\"attributes\": {}}",
             ROOT, ROOT);
    CHECK_INT(store_put(*st, key, text, strlen(text)), 0);
    struct image_source src = { .store = *st, .bucket_name = "bucket" };
    struct image *img = NULL;
    CHECK_INT(image_build(&src, "/x.h5", ROOT, &img), 0);
    return img;
}

/* OLD more images (links to the file named first), older than any saved next. */
static void add_old_images(const char *dir, const char *first, int round)
{
    char from[600], to[600];
    snprintf(from, sizeof from, "%s/%s", dir, first);
    int linked = 0;
    for (int i = 0; i < OLD; i++) {
        snprintf(to, sizeof to, "%s/%032x%032x", dir, 0xffff - round, i);
        linked += link(from, to) == 0;
    }
    CHECK_INT(linked, OLD);
}

static void test_parallel_saves_keep_what_fits(void)
{
    struct store *st = NULL;
    struct image *img = build_small_image("bucket", &st);
    if (!img)
        return;
    char images[512];
    snprintf(images, sizeof images, "%s/images", tmp_dir);
    CHECK_INT(mkdir(images, 0755), 0);

    /* one save alone gives the size of an image file */
    struct image_source src = { .store = st, .image_dir = images, .image_dir_max = 1u << 30 };
    struct image_cache_key first = { 0 };
    memset(first.name, 'f', 64);
    image_cache_save(&src, &first, img);
    int n;
    uint64_t size;
    count_images(images, &n, &size);
    CHECK_INT(n, 1);
    if (n != 1)
        return;

    src.image_dir_max = KEPT * size + size / 2;
    pthread_barrier_t start;
    CHECK_INT(pthread_barrier_init(&start, NULL, THREADS), 0);
    for (int round = 0; round < ROUNDS; round++) {
        /* the image named first is kept for links only: its name is not 64 characters */
        char keep[600], from[600];
        snprintf(from, sizeof from, "%s/%s", images, first.name);
        snprintf(keep, sizeof keep, "%s/first", tmp_dir);
        if (round == 0)
            CHECK_INT(rename(from, keep), 0);
        CHECK_INT(link(keep, from), 0);
        add_old_images(images, first.name, round);
        pthread_t t[THREADS];
        struct saver s[THREADS];
        for (int i = 0; i < THREADS; i++) {
            s[i] = (struct saver){ &src, img, &start, round, i };
            CHECK_INT(pthread_create(&t[i], NULL, save_one, &s[i]), 0);
        }
        for (int i = 0; i < THREADS; i++)
            CHECK_INT(pthread_join(t[i], NULL), 0);
        uint64_t total;
        count_images(images, &n, &total);
        CHECK_INT(n, KEPT);
        CHECK_INT(total, KEPT * size);
        if (n != KEPT)
            fprintf(stderr, "round %d: %d images kept, %d fit\n", round, n, KEPT);
    }
    pthread_barrier_destroy(&start);
    image_put(img);
    store_close(st);
}

/* ---- the least recently used image goes first, however close together the uses ---- */

#define LRU_ROUNDS 40

static void lru_key(struct image_cache_key *key, char **object_key, int round, char which)
{
    *key = (struct image_cache_key){ 0 };
    snprintf(key->name, sizeof key->name, "%063x%c", round, which);
    snprintf(key->root_prefix, sizeof key->root_prefix, "db/01234567-89abcdef/");
    key->object_keys = object_key;
    key->n_object_keys = 1;
}

static int image_kept(const char *dir, const struct image_cache_key *key)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, key->name);
    return access(path, F_OK) == 0;
}

/* a saved, b saved, a used, c saved into room for two: b goes, each round. The uses of a round
 * fall within one tick of the kernel's clock, so file times the kernel stamps would tie. */
static void test_least_recently_used_goes_first(void)
{
    struct store *st = NULL;
    char images[512], root_key[STORE_KEY_MAX + 1];
    snprintf(images, sizeof images, "%s/lru", tmp_dir);
    CHECK_INT(mkdir(images, 0755), 0);
    CHECK_INT(schema_obj_key(ROOT, root_key, sizeof root_key), 0);
    char *object_key = root_key;
    struct image_source src = { .image_dir = images, .image_dir_max = 1u << 30 };
    struct image_cache_key a, b, c;
    int b_kept = 0, a_lost = 0, c_lost = 0;
    struct image *img = build_small_image("lru-bucket", &st);
    if (!img)
        return;
    src.store = st;
    for (int round = 0; round < LRU_ROUNDS; round++) {
        lru_key(&a, &object_key, round, 'a');
        lru_key(&b, &object_key, round, 'b');
        lru_key(&c, &object_key, round, 'c');
        image_cache_save(&src, &a, img);
        if (round == 0) {
            struct stat sb;
            char path[600];
            snprintf(path, sizeof path, "%s/%s", images, a.name);
            CHECK_INT(stat(path, &sb), 0);
            src.image_dir_max = 2 * (uint64_t)sb.st_size + (uint64_t)sb.st_size / 2;
        }
        image_cache_save(&src, &b, img);
        struct image *used = image_cache_load(&src, "/x.h5", &a);
        CHECK(used != NULL);
        image_put(used);
        image_cache_save(&src, &c, img);
        b_kept += image_kept(images, &b);
        a_lost += !image_kept(images, &a);
        c_lost += !image_kept(images, &c);
        const struct image_cache_key *round_keys[3] = { &a, &b, &c };
        for (int i = 0; i < 3; i++) { /* empty for the next round */
            char path[600];
            snprintf(path, sizeof path, "%s/%s", images, round_keys[i]->name);
            unlink(path);
        }
    }
    image_put(img);
    store_close(st);
    if (b_kept || a_lost || c_lost)
        fprintf(stderr,
                "of %d rounds: b (least recently used) kept in %d, a lost in %d, "
                "c lost in %d\n",
                LRU_ROUNDS, b_kept, a_lost, c_lost);
    CHECK_INT(b_kept, 0);
    CHECK_INT(a_lost, 0);
    CHECK_INT(c_lost, 0);
}

/* ---- image_check: a genuine image with one field changed is refused, and says why ---- */

#define DSET "d-01234567-89abcdef-0123-456789-abcdef"

static struct store *check_store;
static unsigned char *genuine;
static size_t genuine_len;
static const unsigned char no_stamp[32];

/* The root and one dataset (int32 [10], chunks [4], chunk objects 0 and 2), built and encoded. */
static void build_genuine(void)
{
    char bucket[512], key[STORE_KEY_MAX + 1], text[512];
    snprintf(bucket, sizeof bucket, "%s/check", tmp_dir);
    CHECK_INT(mkdir(bucket, 0755), 0);
    CHECK_INT(store_posix_open(bucket, &check_store), 0);
    CHECK_INT(schema_obj_key(ROOT, key, sizeof key), 0);
    snprintf(text, sizeof text,
             "{\"id\": \"%s\", \"root\": \"%s\", \"attributes\": {}, \"links\": {\"d\": "
             "{\"class\": \"H5L_TYPE_HARD\", \"id\": \"%s\"}}}",
             ROOT, ROOT, DSET);
    CHECK_INT(store_put(check_store, key, text, strlen(text)), 0);
    CHECK_INT(schema_obj_key(DSET, key, sizeof key), 0);
    snprintf(text, sizeof text,
             "{\"id\": \"%s\", \"root\": \"%s\", \"attributes\": {}, \"type\": {\"class\": "
             "\"H5T_INTEGER\", \"base\": \"H5T_STD_I32LE\"}, \"shape\": {\"class\": "
             "\"H5S_SIMPLE\", \"dims\": [10]}, \"layout\": {\"class\": \"H5D_CHUNKED\", "
             "\"dims\": [4]}}",
             DSET, ROOT);
    CHECK_INT(store_put(check_store, key, text, strlen(text)), 0);
    *strrchr(key, '/') = '\0';
    for (int i = 0; i < 3; i += 2) {
        char chunk[STORE_KEY_MAX + 8];
        snprintf(chunk, sizeof chunk, "%s/%d", key, i);
        CHECK_INT(store_put(check_store, chunk, "0123456789abcdef", 16), 0);
    }
    struct image_source src = { .store = check_store, .bucket_name = "check" };
    struct image *img = NULL;
    CHECK_INT(image_build(&src, "/c.h5", ROOT, &img), 0);
    if (img)
        CHECK_INT(image_file_encode(no_stamp, img, &genuine, &genuine_len), 0);
    image_put(img);
}

/* The genuine image decoded: its checks pass. */
static struct image *decoded(void)
{
    struct image_source src = { .store = check_store, .bucket_name = "check" };
    struct image *img = image_alloc(&src, "/c.h5");
    CHECK(img != NULL);
    if (img)
        CHECK_INT(image_file_decode(genuine, genuine_len, no_stamp, img, "genuine"), 0);
    return img;
}

static void expect_refused(const char *what, struct image *img, const char *reason)
{
    char why[256] = "";
    CHECK_INT(image_check(img, why, sizeof why), -EINVAL);
    if (!strstr(why, reason)) {
        fprintf(stderr, "%s: refused for \"%s\", expected \"%s\"\n", what, why, reason);
        CHECK(strstr(why, reason) != NULL);
    }
    image_put(img);
}

static char **one_key(const char *key)
{
    char **v = malloc(sizeof *v);
    CHECK(v != NULL);
    if (v)
        *v = strdup(key);
    return v;
}

/* Dataset 0 made a linked one of `origin` over one file, pieces on chunk 0 (sub 0 and 1). */
static struct image_dataset *linked(struct image *img, enum chunk_origin origin, uint32_t n_sub)
{
    struct image_dataset *d = &img->datasets[0];
    d->origin = origin;
    d->uris = one_key("linked/f.h5");
    d->n_uris = 1;
    d->n_sub = n_sub;
    if (origin == ORIGIN_REF_PIECES) {
        d->pieces = calloc(2, sizeof *d->pieces);
        CHECK(d->pieces != NULL);
        d->n_pieces = d->pieces ? 2 : 0;
        if (d->pieces)
            d->pieces[1] = (struct ref_piece){ .chunk = 0, .sub = 1, .size = 8, .off = 8 };
        d->sub_dims[0] = 2;
    } else {
        d->contig_size = 40;
    }
    return d;
}

static void test_genuine_image_passes(void)
{
    struct image *img = decoded();
    if (!img)
        return;
    char why[256] = "", key[STORE_KEY_MAX + 1], root_key[STORE_KEY_MAX + 1];
    CHECK_INT(image_check(img, why, sizeof why), 0);
    CHECK_INT(schema_obj_key(DSET, key, sizeof key), 0);
    CHECK_INT(schema_obj_key(ROOT, root_key, sizeof root_key), 0);
    const char *keys[2] = { root_key, key }; /* sorted: "db/A-B/.group.json" < "db/A-B/d/..." */
    CHECK_INT(image_check_ids(img, "db/01234567-89abcdef/", keys, 2, why, sizeof why), 0);
    CHECK_INT(image_check_no_links(img, why, sizeof why), 0);
    /* the same without the dataset's key, or naming a dataset of another root */
    CHECK_INT(image_check_ids(img, "db/01234567-89abcdef/", keys + 1, 1, why, sizeof why), -EINVAL);
    CHECK(strstr(why, "is not an object of") != NULL);
    free(img->datasets[0].id);
    img->datasets[0].id = strdup("d-11111111-99999999-0123-456789-abcdef");
    CHECK_INT(image_check_ids(img, "db/01234567-89abcdef/", keys, 2, why, sizeof why), -EINVAL);
    image_put(img);

    img = decoded(); /* a well-formed linked dataset passes the checks, not a bucket copy's */
    if (!img)
        return;
    linked(img, ORIGIN_REF_PIECES, 2);
    CHECK_INT(image_check(img, why, sizeof why), 0);
    CHECK_INT(image_check_no_links(img, why, sizeof why), -EINVAL);
    image_put(img);
}

/* A version's dataset whose pieces are whole pool objects says so in the kept file too: an
 * r+ whose base came from cache_dir names its unchanged chunks as the head version does
 * (image_chunk_pooled), instead of storing each one again. */
static void test_pooled_survives_the_file(void)
{
    struct image *img = decoded();
    if (!img)
        return;
    struct image_dataset *d = linked(img, ORIGIN_REF_PIECES, 2);
    d->pooled = 1; /* the flag alone: linked() makes two pieces of one chunk */
    unsigned char *buf = NULL;
    size_t len = 0;
    CHECK_INT(image_file_encode(no_stamp, img, &buf, &len), 0);
    image_put(img);
    struct image_source src = { .store = check_store, .bucket_name = "check" };
    struct image *back = image_alloc(&src, "/c.h5");
    CHECK(back != NULL);
    if (back && buf) {
        CHECK_INT(image_file_decode(buf, len, no_stamp, back, "pooled"), 0);
        CHECK_INT(back->datasets[0].pooled, 1);
        CHECK_INT(back->datasets[0].n_sub, 2);
    }
    image_put(back);
    free(buf);
    img = decoded(); /* and a plain one is not */
    if (img)
        CHECK_INT(img->datasets[0].pooled, 0);
    image_put(img);
}

static void test_fields_are_checked(void)
{
    struct image *img;
    struct image_dataset *d;
#define CASE(reason, change)                  \
    if ((img = decoded()) != NULL) {          \
        d = &img->datasets[0];                \
        change;                               \
        expect_refused(#change, img, reason); \
    }
    CASE("rank 0", d->rank = 0);
    CASE("rank 33", d->rank = 33);
    CASE("element size 0", (d->itemsize = 0, d->codec.itemsize = 0));
    CASE("chunk dimension 0 is 0", d->chunk_dims[0] = 0);
    CASE("grid 2 for 10 / 4", d->grid[0] = 2);
    CASE("chunk of 8 bytes", d->chunk_bytes = 8);
    CASE("chunk of 16 bytes, 160001-byte elements",
         (d->itemsize = 160001, d->codec.itemsize = 160001));
    CASE("overflow", (d->itemsize = d->codec.itemsize = 1ull << 40, d->chunk_dims[0] = 1ull << 30,
                      d->grid[0] = 1));
    CASE("codec itemsize", d->codec.itemsize = 8);
    CASE("unknown shuffle", d->codec.shuffle = (enum codec_shuffle)7);
    CASE("are not those of its id", d->key_prefix[3] ^= 1);
    if ((img = decoded()) != NULL) { /* its datasets are freed with it: only hidden awhile */
        char why[256] = "";
        size_t n = img->n_datasets;
        img->n_datasets = 0;
        CHECK_INT(image_check(img, why, sizeof why), -EINVAL);
        CHECK(strstr(why, "a chunk extent of no dataset") != NULL);
        img->n_datasets = n;
        image_put(img);
    }
    CASE("object 1 is not in the file", img->objects[1].addr = extent_size(img->map));
    CASE("sub-chunk dimension 0 (0)", linked(img, ORIGIN_REF_PIECES, 2)->sub_dims[0] = 0);
    CASE("2 pieces per chunk, 4", linked(img, ORIGIN_REF_PIECES, 2)->sub_dims[0] = 1);
    CASE("0 pieces per chunk", linked(img, ORIGIN_REF_PIECES, 0));
    CASE("outside its dataset", linked(img, ORIGIN_REF_PIECES, 2)->pieces[1].chunk = 3);
    CASE("outside its dataset", linked(img, ORIGIN_REF_PIECES, 2)->pieces[1].uri = 1);
    CASE("outside its dataset", linked(img, ORIGIN_REF_PIECES, 2)->pieces[1].sub = 2);
    CASE("not sorted", linked(img, ORIGIN_REF_PIECES, 2)->pieces[1].sub = 0);
    CASE("not a key", (linked(img, ORIGIN_REF_CONTIG, 1), d->uris[0][0] = '/'));
    CASE("not one linked byte range", linked(img, ORIGIN_REF_CONTIG, 1)->contig_off = UINT64_MAX);
    CASE("linked files of no layout", (linked(img, ORIGIN_REF_CONTIG, 1), d->origin = ORIGIN_HSDS));
#undef CASE
}

int main(void)
{
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/test_image_cache.XXXXXX");
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return 1;
    }
    if (log_setup(LOG_LVL_WARN, LOG_SINK_FILE, "/dev/null") != 0)
        return 1;
    test_parallel_saves_keep_what_fits();
    test_least_recently_used_goes_first();
    build_genuine();
    if (genuine) {
        test_genuine_image_passes();
        test_pooled_survives_the_file();
        test_fields_are_checked();
    }
    free(genuine);
    if (check_store)
        store_close(check_store);
    log_teardown();
    nftw(tmp_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return check_done("image_cache");
}
