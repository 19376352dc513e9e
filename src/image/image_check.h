/*
 * image_check: whether a decoded image (image_file.h) may be served.
 *
 * A kept image is a cache of facts, never an authority: the copy in the bucket may have been
 * written by anyone who can write the bucket, with a stamp that is only a hash of public facts,
 * and a file in cache_dir may be damaged. Before any use, every field that indexes memory,
 * sizes a buffer or names a store key is checked against the others and against what a build
 * makes, and every id it carries against the root's own listing, so that the worst a forged
 * image can do is be rejected (and the domain built again).
 */
#ifndef H5OSFS_IMAGE_CHECK_H
#define H5OSFS_IMAGE_CHECK_H

#include "image_int.h"

/* The image's own consistency: ranks, shapes, chunk sizes, grids, sub-chunks, pieces, linked
 * file keys, chunk extents and object addresses. 0, -EINVAL (why says what is wrong), or
 * -ENOMEM. */
int image_check(const struct image *img, char *why, size_t why_len);

/* Every id img carries is of the root whose keys start with root_prefix ("db/A-B/"): its
 * datasets and objects are among object_keys (the root listing's object JSON keys, sorted by
 * strcmp), what it left out is at least of that root. 0 or -EINVAL (why). */
int image_check_ids(const struct image *img, const char *root_prefix,
                    const char *const *object_keys, size_t n_keys, char *why, size_t why_len);

/* No dataset whose bytes come from linked files (*_REF layouts): their keys are vouched for by
 * the dataset's JSON only, which a copy from the bucket does not carry. 0 or -EINVAL (why). */
int image_check_no_links(const struct image *img, char *why, size_t why_len);

#endif
