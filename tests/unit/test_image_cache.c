/*
 * test_image_cache: the size limit of the directory of kept images (src/image/image_cache.c)
 * when builds save at once from many threads, as FUSE's threads do.
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
#include "h5osfs/image.h"
#include "h5osfs/log.h"
#include "h5osfs/schema.h"
#include "h5osfs/store.h"
#include "image_cache.h"

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

static struct image *build_small_image(struct store **st)
{
    char bucket[512], key[STORE_KEY_MAX + 1], text[256];
    snprintf(bucket, sizeof bucket, "%s/bucket", tmp_dir);
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
    struct image *img = build_small_image(&st);
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
    log_teardown();
    nftw(tmp_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return check_done("image_cache");
}
