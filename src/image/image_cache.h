/*
 * image_cache: the built images of this cache_dir (image_file.h), found before a build and
 * kept after one.
 *
 * A domain's entry is named by the bucket, the domain path, its root id and this program's
 * build (another h5osfs may lay images out differently). It is used only while its stamp
 * equals the stamp of a listing of the root made now: every key below db/A-B/ with its size
 * and etag (chunk objects too: a build writes the values of small and variable-length datasets
 * into the file), .info.json aside (HSDS's scanner rewrites it; it shapes nothing). A domain
 * with more chunk objects than one root listing keeps (build.h) is not kept. The directory is
 * kept under a size limit, least recently used entries first out.
 */
#ifndef H5OSFS_IMAGE_CACHE_H
#define H5OSFS_IMAGE_CACHE_H

#include "build.h"

struct image_cache_key {
    char name[65];              /* file name in src->image_dir */
    unsigned char stamp[32];
};

/* List the root of root_id (v2 ids), compute the entry's key, and keep the chunk keys in rl
 * (complete) for a build that follows. 0; -EFBIG (more chunk keys than a root listing keeps:
 * not cached); -errno of the store; -ENOMEM. */
int image_cache_key(const struct image_source *src, const char *domain_path,
                    const char *root_id, struct root_listing *rl, struct image_cache_key *key);

/* The cached image for key, or NULL (a miss; a bad entry is logged, and the build that
 * follows replaces it). */
struct image *image_cache_load(const struct image_source *src, const char *domain_path,
                               const struct image_cache_key *key);

/* Keep img under key, then now and then trim the directory to
 * src->image_dir_max. Failures only cost a
 * future build (logged at debug level). */
void image_cache_save(const struct image_source *src, const struct image_cache_key *key,
                      const struct image *img);

#endif
