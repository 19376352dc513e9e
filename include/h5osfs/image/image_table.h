/*
 * image_table: the synthesised file of each domain path, built on first open and kept for reuse.
 *
 * An entry is reused while it is younger than the ttl and the domain's root id is unchanged.
 * An older entry is rebuilt on the next open; when the rebuild is identical to it, the old
 * image stays (so the kernel may keep its page cache and the chunk cache stays warm).
 * Concurrent opens of one domain build it once; different domains build at once (their
 * objects are fetched in parallel, the HDF5 part takes turns). Thread-safe.
 */
#ifndef H5OSFS_IMAGE_TABLE_H
#define H5OSFS_IMAGE_TABLE_H

#include <stdint.h>

#include "h5osfs/image/image.h"

struct image_table;

int image_table_new(const struct image_source *src, double ttl, struct image_table **out);
void image_table_free(struct image_table *t);

/* The image of the domain at path with root id root (a new reference). *reused is 1 when it
 * is the image the previous open got. 0, -EIO or -ENOMEM. */
/* image_layout_stamp of the table's source. */
void image_table_stamp(const struct image_table *t, char out[IMAGE_STAMP_BUF]);

int image_table_get(struct image_table *t, const char *path, const char *root, struct image **out,
                    int *reused);

/* Builds since the table was made (a build that loads a kept image counts too). */
struct image_table_counts {
    uint64_t builds, failures;
    double seconds; /* spent in them, summed over the threads */
    uint64_t held;  /* images held now */
};
void image_table_counts(struct image_table *t, struct image_table_counts *out);

/* The next open of path builds a new image (its objects changed in place, same root):
 * nothing cached of the old one (chunks, kernel pages) is used for it. */
void image_table_expire(struct image_table *t, const char *path);

/* Count an open file of root (delta +1) or its release (-1). */
void image_table_hold(struct image_table *t, const char *root, int delta);
/* 1 if an open file reads a version of the domain whose root is root. */
int image_table_root_in_use(struct image_table *t, const char *root);

/*
 * Build, in a thread of its own, the images of the domains paths[i] (root ids roots[i]) of
 * folder that the table does not hold fresh: an `ls -l` stats every domain of the folder just
 * listed, and each stat needs the exact size, i.e. the image. Up to src.requests of them at
 * once; a folder already being warmed is not warmed twice. 0, -EAGAIN (not now), -ENOMEM.
 */
int image_table_warm(struct image_table *t, const char *folder, const char *const *paths,
                     const char *const *roots, size_t n);
/* No more warming: wait for the builds under way to end. */
void image_table_stop_warming(struct image_table *t);

#endif
