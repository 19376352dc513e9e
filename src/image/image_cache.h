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

/* Where a mount that may write puts a domain's built image for other mounts: a key of the
 * root's directory that HSDS ignores (its scanner skips keys that are not objects; removing
 * the domain removes it with every other key below db/A-B/). */
#define IMAGE_SHARED_NAME ".h5osfs-image"

struct image_cache_key {
    char name[65]; /* file name in src->image_dir */
    unsigned char stamp[32];
    /* the copy in the bucket: its own stamp also names what else the bytes depend on (this
     * program, the bucket name, the domain path, the root id), which the file name holds for
     * the local copy */
    char shared_key[48]; /* db/A-B/.h5osfs-image */
    unsigned char shared_stamp[32];
    int shared_listed; /* the listing had one (of whatever version) */
    /* The listed objects but JSON (chunks), for image_take_chunk_states: the caller frees
     * them (image_chunk_states_free) after a 0 return. */
    struct image_chunk_states chunks;
    /* the listing's object JSON keys, sorted: a kept image may name no other object */
    char root_prefix[32]; /* db/A-B/ */
    char **object_keys;
    size_t n_object_keys;
};

/* List the root of root_id (v2 ids), compute the entry's key, and keep the chunk keys in rl
 * (complete) for a build that follows. 0; -EFBIG (more chunk keys than a root listing keeps:
 * not cached); -errno of the store; -ENOMEM. */
int image_cache_key(const struct image_source *src, const char *domain_path, const char *root_id,
                    struct root_listing *rl, struct image_cache_key *key);

/* Free what image_cache_key keeps in key (also after it failed). */
void image_cache_key_clear(struct image_cache_key *key);

/* The cached image for key, or NULL (a miss; a bad entry is logged, and the build that
 * follows replaces it). */
struct image *image_cache_load(const struct image_source *src, const char *domain_path,
                               const struct image_cache_key *key);

/* The image kept in the bucket under key, or NULL (none, another version, or not usable:
 * logged). Usable: as image_check.h says, and without linked datasets (whose files only their
 * JSON may name). A usable one is also kept in cache_dir. */
struct image *image_cache_load_shared(const struct image_source *src, const char *domain_path,
                                      const struct image_cache_key *key);

/* Put img into the bucket under key for other mounts, when src->bucket_images allows and the image
 * saves enough requests to be worth a put. Failures only cost other mounts a build. */
void image_cache_share(const struct image_source *src, const struct image_cache_key *key,
                       const struct image *img);

/* Keep img under key, then now and then trim the directory to
 * src->image_dir_max. Failures only cost a
 * future build (logged at debug level). */
void image_cache_save(const struct image_source *src, const struct image_cache_key *key,
                      const struct image *img);

#endif
