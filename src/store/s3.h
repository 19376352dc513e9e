/*
 * s3.h: what the S3 backend's files share: s3.c (the store operations), s3_http.c (one signed
 * request with retries over a pool of kept-alive curl handles), s3_xml.c (response bodies).
 */
#ifndef H5OSFS_STORE_S3_H
#define H5OSFS_STORE_S3_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "h5osfs/store.h"

struct s3_pool;

struct s3_store {
    struct store base;          /* first: a struct store * is a struct s3_store * */
    struct store_s3_config cfg; /* strings owned below */
    char *bucket, *prefix, *endpoint, *region, *key_id, *secret, *token, *ca_file;
    char *host;                 /* Host header value: "127.0.0.1:9000", "b.s3.r.amazonaws.com" */
    char *base_url;             /* "http://127.0.0.1:9000/bucket" or "https://b.s3…com" */
    char *path_base;            /* the path part of base_url: "/bucket" or "" */
    struct s3_pool *pool;
    atomic_int if_match_bare;   /* the server compares If-Match with its ETag byte for byte,
                                   without RFC 7232's quotes (Ceph RGW 16) */
};

struct s3_request {
    const char *method;         /* GET, HEAD, PUT, DELETE, POST */
    const char *key;            /* object key without the bucket prefix; NULL: the bucket */
    const char *query;          /* canonical (sorted, encoded) query string, or NULL */
    const char *range;          /* "bytes=a-b" or NULL */
    const void *body;           /* PUT/POST body */
    size_t body_len;
    const char *content_md5;    /* base64 Content-MD5 (batch delete needs it) or NULL */
    const char *copy_source;    /* PUT: x-amz-copy-source "/bucket/encoded key" or NULL */
    const char *if_match;       /* PUT: If-Match "\"etag\"", If-None-Match "*", or NULL */
    const char *if_none_match;
    size_t max_body;            /* response bodies beyond this fail with -EFBIG */
    char *why;                  /* set: a final error status or failure is described here */
    size_t why_len;             /* (one line, as the log would say it) instead of logged */
};

struct s3_response {
    long status;
    struct store_buf body;      /* data NUL-terminated, as store_get promises */
    int has_length;
    uint64_t content_length;    /* from Content-Length (HEAD: the object's size) */
    double mtime;               /* from Last-Modified */
    int64_t range_start;        /* first byte of the body per Content-Range; -1: none */
    char etag[65];
};

/* Perform req with retries; 0 with the final response (any status) or -errno (logged, or
 * described in req->why). */
int s3_perform(struct s3_store *s3, const struct s3_request *req, struct s3_response *resp);
void s3_response_free(struct s3_response *resp);

int s3_pool_new(unsigned size, struct s3_pool **out);
void s3_pool_free(struct s3_pool *pool);

/* ListObjectsV2 body -> one page of store_list (keys still carrying the bucket prefix). */
int s3_parse_list(const char *xml, size_t len, struct store_list *out, int *truncated);
/* An S3 <Error> body: Code and Message (either may be empty). */
void s3_parse_error(const char *xml, size_t len, char *code, size_t code_len, char *msg,
                    size_t msg_len);
/* DeleteObjects result: number of <Error> entries (first key and code given back). */
int s3_parse_delete_result(const char *xml, size_t len, char *key, size_t key_len, char *code,
                           size_t code_len);

#endif
