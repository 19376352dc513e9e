/*
 * sigv4: AWS Signature Version 4 for S3 requests, as pure functions (no I/O, no clock).
 *
 * Proven against the official AWS test suite (tests/data/aws-sigv4): canonical request,
 * string to sign, signature and Authorization header. S3's own rules differ from the generic
 * suite in two ways the caller chooses: S3 never normalises paths (normalize_path 0) and the
 * payload hash is either the hex SHA-256 of the body or "UNSIGNED-PAYLOAD" (sent as the
 * x-amz-content-sha256 header, which is then signed like any other header).
 *
 * Every function returns 0 or a negative errno (-EINVAL for malformed input, -ENOMEM); strings
 * it returns are the caller's to free(). Secrets never appear in anything but the HMAC input.
 */
#ifndef H5OSFS_SIGV4_H
#define H5OSFS_SIGV4_H

#include <stddef.h>

struct sigv4_header {
    const char *name;  /* any case; canonicalised to lower case */
    const char *value; /* trimmed and inner runs of spaces folded when canonicalised */
};

struct sigv4_request {
    const char *method; /* "GET", "PUT", ... */
    const char *path;   /* as sent on the wire, already URI-encoded, starting with '/' */
    const char *query;  /* as sent, without '?'; NULL or "" for none */
    const struct sigv4_header *headers; /* every header to sign (host and x-amz-date too) */
    size_t n_headers;
    const char *payload_hash; /* hex SHA-256 of the body, or "UNSIGNED-PAYLOAD" */
};

struct sigv4_credentials {
    const char *access_key_id;
    const char *secret_access_key;
    const char *session_token; /* NULL when none; the caller adds x-amz-security-token */
};

struct sigv4_scope {
    const char *amz_date; /* "20150830T123600Z" */
    const char *region;   /* "us-east-1" */
    const char *service;  /* "s3" */
};

/* The canonical request; normalize_path 1 applies RFC 3986 dot-segment removal and collapses
 * repeated slashes (the generic suite's "normalized" cases), 0 leaves the path as is (S3). */
int sigv4_canonical_request(const struct sigv4_request *req, int normalize_path, char **out);

/* "AWS4-HMAC-SHA256\n<date>\n<date8>/<region>/<service>/aws4_request\n<hex sha256(creq)>" */
int sigv4_string_to_sign(const char *canonical_request, const struct sigv4_scope *scope,
                         char **out);

/* Lower-case hex HMAC-SHA256 signature of string_to_sign (64 characters + NUL). */
int sigv4_signature(const struct sigv4_credentials *cred, const struct sigv4_scope *scope,
                    const char *string_to_sign, char out[65]);

/* The Authorization header value:
 * "AWS4-HMAC-SHA256 Credential=<id>/<scope>, SignedHeaders=<names>, Signature=<sig>". */
int sigv4_authorization(const struct sigv4_request *req, int normalize_path,
                        const struct sigv4_credentials *cred, const struct sigv4_scope *scope,
                        char **out);

/* URI-encode as S3 wants it: unreserved characters (A-Z a-z 0-9 - . _ ~) kept, every other byte
 * %XX with upper-case hex; '/' kept when keep_slash (object keys in paths), encoded otherwise
 * (query values). */
int sigv4_uri_encode(const char *in, size_t len, int keep_slash, char **out);

/* Hex SHA-256 of data (64 characters + NUL). */
int sigv4_sha256_hex(const void *data, size_t len, char out[65]);

#endif
