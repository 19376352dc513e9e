/*
 * store_s3: a store (store.h) over a bucket of an S3-compatible object store (src/store/s3*.c):
 * its configuration, S3's size limits, and the check made at mount. Only those who open an S3
 * store need this; everything else sees the backend-neutral struct store.
 *
 * Where an S3 store answers differently from store.h's local stores (by design, and checked by
 * tests/tools/store_conformance_s3 on s3rver and RGW): a listing's next_token is S3's opaque
 * continuation token; store_delete of a missing key is 0 (DeleteObject is idempotent); head's
 * mtime is whole seconds (HTTP's Last-Modified) where a listing's has milliseconds.
 */
#ifndef H5OSFS_STORE_S3_H
#define H5OSFS_STORE_S3_H

#include <stddef.h>
#include <stdint.h>

#include "h5osfs/store/store.h"

struct store_s3_config {
    const char *bucket;
    const char *prefix;   /* where the HSDS tree starts inside the bucket: "" or "a/b/" */
    const char *endpoint; /* "http://127.0.0.1:9000"; NULL: AWS's regional endpoint */
    const char *region;   /* signing region, and the AWS endpoint's */
    int path_style;       /* 1: endpoint/bucket/key; 0: bucket.endpoint/key */
    int no_sign;          /* anonymous requests */
    const char *access_key_id;
    const char *secret_access_key;
    const char *session_token;    /* NULL when none */
    const char *ca_file;          /* NULL: the system CA store */
    unsigned max_requests;        /* requests in flight at once (connections kept alive) */
    double timeout;               /* seconds to connect, or of a stalled transfer (an
                                     attempt's total time grows with its size) */
    unsigned retries;             /* further attempts after a retryable failure */
    double retry_time;            /* seconds all attempts of one request may take */
    uint64_t multipart_threshold; /* objects larger than this go up in parts; 0: default */
    uint64_t multipart_part_size; /* the size of those parts (made larger where an object
                                       would need more than 10,000); 0: default */
};
/*
 * S3's own limits (AWS documents them; Ceph RGW enforces the part minimum): one PutObject
 * takes at most 5 GiB, a multipart upload at most 10,000 parts of 5 MiB to 5 GiB (the last
 * may be smaller) and 5 TiB in all. The defaults: parts of 8 MiB above 64 MiB. Every put
 * (but put_if) larger than multipart_threshold, from a buffer or from a file, is a multipart
 * upload, and so is every one over 5 GiB whatever the threshold; so is every store_copy_sized
 * of such a size (its parts copied by the server: one CopyObject also takes at most 5 GiB).
 */
#define STORE_S3_PUT_MAX (5ull << 30)
#define STORE_S3_PART_MIN (5ull << 20)
#define STORE_S3_PART_MAX (5ull << 30)
#define STORE_S3_PARTS_MAX 10000u
#define STORE_S3_OBJECT_MAX (5ull << 40)
#define STORE_S3_DEFAULT_MULTIPART_THRESHOLD (64ull << 20)
#define STORE_S3_DEFAULT_PART_SIZE (8ull << 20)
int store_s3_open(const struct store_s3_config *cfg, struct store **out);
/*
 * One cheap request at mount (a listing of at most one key under the prefix), so that what
 * would fail every later request fails the mount instead: refused credentials (-EACCES), a
 * missing bucket (-ENOENT), an endpoint that cannot be reached or does not answer as S3
 * (-EIO). why: one line saying what failed, with the bucket's URL and the S3 error code; no
 * secret, nothing logged. With no_sign a refused listing is not an error (a public bucket may
 * serve its objects but no listing): 0, and why says so. st must be an S3 store.
 */
int store_s3_check(struct store *st, char *why, size_t why_len);

#endif
