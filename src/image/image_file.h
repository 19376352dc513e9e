/*
 * image_file: a built image kept on local disk, so that the next mount does not build it again
 * (a domain of 500 datasets costs some 550 requests to build, its file one listing to check).
 * The file is named by what the image was built from (bucket, domain path, root id, this
 * program) and holds a stamp of the root's listing (every key below db/A-B/ with its size and
 * etag): it serves a build only while the stamp is the same, i.e. no object of the domain was
 * added, removed or rewritten. Files are written whole and renamed into place.
 */
#ifndef H5OSFS_IMAGE_FILE_H
#define H5OSFS_IMAGE_FILE_H

#include "image_int.h"

/* Write img as dir/name (dir exists). 0 or -errno (logged at debug level: only a cost). */
int image_file_save(const char *dir, const char *name, const unsigned char stamp[32],
                    const struct image *img);

/* Read dir/name into img (whose map is new and empty, the rest zero) if its stamp is stamp.
 * 0; -ENOENT (none, another stamp, or not usable: logged); -ENOMEM. On failure img holds
 * what was read so far (freed with the image). */
int image_file_load(const char *dir, const char *name, const unsigned char stamp[32],
                    struct image *img);

/* The same as bytes in memory (*out to be freed): 0 or -ENOMEM. */
int image_file_encode(const unsigned char stamp[32], const struct image *img, unsigned char **out,
                      size_t *len);
/* Read buf into img as image_file_load does; what names the bytes in a log line. */
int image_file_decode(const unsigned char *buf, size_t len, const unsigned char stamp[32],
                      struct image *img, const char *what);

#endif
