/*
 * s3_int.h: what the S3 backend's files share: the store, one request and its answer. s3.c
 * (the store operations) calls s3_multipart.c (objects put in parts, s3_multipart.h); both
 * call what is declared here, from s3_request.c (status, query, body hash), s3_http.c (one
 * signed request with retries over a pool of kept-alive curl handles) and s3_xml.c (response
 * bodies), none of which calls back into s3.c or s3_multipart.c.
 */
#ifndef H5OSFS_STORE_S3_INT_H
#define H5OSFS_STORE_S3_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "h5osfs/store/store_s3.h"

struct s3_pool;

struct s3_store {
    struct store base;          /* first: a struct store * is a struct s3_store * */
    struct store_s3_config cfg; /* strings owned below */
    char *bucket, *prefix, *endpoint, *region, *key_id, *secret, *token, *ca_file;
    char *host;      /* Host header value: "127.0.0.1:9000", "b.s3.r.amazonaws.com" */
    char *base_url;  /* "http://127.0.0.1:9000/bucket" or "https://b.s3…com" */
    char *path_base; /* the path part of base_url: "/bucket" or "" */
    struct s3_pool *pool;
    atomic_int if_match_bare; /* the server compares If-Match with its ETag byte for byte,
                                   without RFC 7232's quotes (Ceph RGW 16) */
};

/* Where the bytes of a PUT come from: memory (data), or the file fd at off (data NULL). */
struct s3_source {
    const unsigned char *data;
    int fd;
    uint64_t off;
};

struct s3_request {
    const char *method; /* GET, HEAD, PUT, DELETE, POST */
    const char *key;    /* object key without the bucket prefix; NULL: the bucket */
    const char *query;  /* canonical (sorted, encoded) query string, or NULL */
    const char *range;  /* "bytes=a-b" or NULL */
    const void *body;   /* PUT/POST body */
    size_t body_len;
    const struct s3_source *body_file; /* PUT: the body is body_len bytes of this file */
    const char *payload_hash;          /* hex SHA-256 of the body if the caller has it (a file body
                                   must come with it), else computed from body */
    int error_in_ok;                   /* a 200 may carry an <Error> (CompleteMultipartUpload): one
                                   that says "try again" is retried as a 5xx would be */
    double extra_time;                 /* seconds added to the store's timeout and retry_time: the
                                   server works long before it answers (a Complete) */
    const char *content_md5;           /* base64 Content-MD5 (batch delete needs it) or NULL */
    const char *copy_source;           /* PUT: x-amz-copy-source "/bucket/encoded key" or NULL */
    const char *copy_range;            /* PUT: x-amz-copy-source-range "bytes=a-b" or NULL */
    const char *if_match;              /* PUT: If-Match "\"etag\"", If-None-Match "*", or NULL */
    const char *if_none_match;
    size_t max_body;         /* response bodies beyond this fail with -EFBIG */
    const char *list_prefix; /* a listing: the log names it "LIST prefix", not the bucket */
    char *why;               /* set: a final error status or failure is described here */
    size_t why_len;          /* (one line, as the log would say it) instead of logged */
};

struct s3_response {
    long status;
    struct store_buf body; /* data NUL-terminated, as store_get promises */
    int has_length;
    uint64_t content_length; /* from Content-Length (HEAD: the object's size) */
    double mtime;            /* from Last-Modified */
    int64_t range_start;     /* first byte of the body per Content-Range; -1: none */
    char etag[65];
};

/* Perform req with retries; 0 with the final response (any status) or -errno (logged, or
 * described in req->why). */
int s3_perform(struct s3_store *s3, const struct s3_request *req, struct s3_response *resp);
void s3_response_free(struct s3_response *resp);
/* Hex SHA-256 of len bytes of src (memory or file). 0, or -EIO (logged, naming key). */
int s3_source_sha256(const struct s3_source *src, uint64_t off, uint64_t len, const char *key,
                     char out[65]);

/* An answer no caller expected: -EIO, logged with op, key, the status and the server's code. */
int s3_unexpected(const struct s3_store *s3, const char *op, const char *key,
                  const struct s3_response *resp);
/* 0 for a 2xx answer, else the store's errno: -ENOENT (404), -EACCES (403), -EIO (logged with
 * op, key and the server's code). */
int s3_status_errno(const struct s3_store *s3, const char *op, const char *key,
                    const struct s3_response *resp);
/* "&name=<encoded value>" appended to the query *q (nothing for a NULL value; names must be
 * added in SigV4's canonical order, sorted). 0 or -ENOMEM. */
int s3_query_add(char **q, const char *name, const char *value);

/* Bytes a second a server is granted to copy or assemble an object before it answers (a
 * CopyObject, an UploadPartCopy, a CompleteMultipartUpload): added to the request's time. */
#define S3_SERVER_COPY_RATE (16.0 * (1u << 20))

int s3_pool_new(unsigned size, struct s3_pool **out);
void s3_pool_free(struct s3_pool *pool);

/* ListObjectsV2 body -> one page of store_list (keys still carrying the bucket prefix). */
int s3_parse_list(const char *xml, size_t len, struct store_list *out, int *truncated);
/* An S3 <Error> body: Code and Message (either may be empty). */
void s3_parse_error(const char *xml, size_t len, char *code, size_t code_len, char *msg,
                    size_t msg_len);
/* InitiateMultipartUploadResult: its UploadId. 0, or -EINVAL (no UploadId, too long). */
int s3_parse_initiate(const char *xml, size_t len, char *upload_id, size_t id_len);
/* The answer to CompleteMultipartUpload, which may be an error although the status is 200:
 * 0 for a CompleteMultipartUploadResult, -EIO for an <Error> (code and message given back),
 * -EINVAL for anything else. */
int s3_parse_complete(const char *xml, size_t len, char *code, size_t code_len, char *msg,
                      size_t msg_len);
/* The answer to UploadPartCopy (or CopyObject), which may be an error although the status is
 * 200: 0 with the copy's ETag (unquoted) for a CopyPartResult or CopyObjectResult, -EIO for an
 * <Error> (code and message given back), -EINVAL for anything else (no ETag). */
int s3_parse_copy_result(const char *xml, size_t len, char *etag, size_t etag_len, char *code,
                         size_t code_len, char *msg, size_t msg_len);
/* One page of ListMultipartUploads: the uploads (keys still carrying the bucket prefix), and
 * where the next page starts when it is truncated. */
struct s3_upload_entry {
    char *key, *id;
};
struct s3_uploads {
    struct s3_upload_entry *items;
    size_t n;
    int truncated;
    char *next_key, *next_id; /* NextKeyMarker, NextUploadIdMarker, or NULL */
};
/* ListMultipartUploadsResult -> out. 0, -EINVAL (not that XML), -ENOMEM. */
int s3_parse_uploads(const char *xml, size_t len, struct s3_uploads *out);
void s3_uploads_free(struct s3_uploads *u);
/* DeleteObjects result: number of <Error> entries (first key and code given back). */
int s3_parse_delete_result(const char *xml, size_t len, char *key, size_t key_len, char *code,
                           size_t code_len);

#endif
