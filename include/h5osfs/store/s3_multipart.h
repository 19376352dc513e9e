/*
 * s3_multipart.h: objects put and copied in parts, for s3.c (the store operations); see
 * s3_multipart.c.
 */
#ifndef H5OSFS_STORE_S3_MULTIPART_H
#define H5OSFS_STORE_S3_MULTIPART_H

#include <stddef.h>
#include <stdint.h>

#include "h5osfs/store/s3_int.h"

/* The part size for an object of len bytes: wanted, or the smallest whole number of MiB that
 * keeps it within STORE_S3_PARTS_MAX parts. 0, or -EFBIG past STORE_S3_OBJECT_MAX. */
int s3_part_size(uint64_t len, uint64_t wanted, uint64_t *out);
/* len bytes of src put at key as a multipart upload (aborted on failure). 0 or -errno. */
int s3_multipart_put(struct s3_store *s3, const char *key, const struct s3_source *src,
                     uint64_t len);
/* Object copy_source (the x-amz-copy-source value), of len bytes, copied at key by the server
 * as a multipart upload of UploadPartCopy parts (aborted on failure). 0 or -errno. */
int s3_multipart_copy(struct s3_store *s3, const char *key, const char *copy_source, uint64_t len);
/* Abort every multipart upload whose key starts with prefix (below the bucket prefix): the
 * store's abort_uploads. 0 with *aborted, -EOPNOTSUPP (the server lists no uploads), -errno. */
int s3_abort_uploads(struct s3_store *s3, const char *prefix, size_t *aborted);

#endif
