/*
 * s3_request: what building and judging one request takes, shared by the store operations
 * (s3.c) and the multipart uploads (s3_multipart.c), so that s3.c calls s3_multipart.c and
 * never the other way: a status as the store's errno, a query string, a body's SHA-256.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "h5osfs/util/log.h"
#include "h5osfs/store/sigv4.h"
#include "h5osfs/store/s3_int.h"

#define HASH_BLOCK (1u << 20)

int s3_unexpected(const struct s3_store *s3, const char *op, const char *key,
                  const struct s3_response *resp)
{
    char code[64], msg[160];
    s3_parse_error((const char *)resp->body.data, resp->body.len, code, sizeof code, msg,
                   sizeof msg);
    log_error("s3 %s %s/%s%s: unexpected HTTP %ld %s%s%s", op, s3->bucket, s3->prefix,
              key ? key : "", resp->status, code, msg[0] ? ": " : "", msg);
    return -EIO;
}

int s3_status_errno(const struct s3_store *s3, const char *op, const char *key,
                    const struct s3_response *resp)
{
    if (resp->status / 100 == 2)
        return 0;
    if (resp->status == 404)
        return -ENOENT;
    if (resp->status == 403)
        return -EACCES;
    return s3_unexpected(s3, op, key, resp);
}

int s3_query_add(char **q, const char *name, const char *value)
{
    char *enc = NULL, *n = NULL;
    if (!value)
        return 0;
    if (sigv4_uri_encode(value, strlen(value), 0, &enc) != 0)
        return -ENOMEM;
    int rc = asprintf(&n, "%s%s%s=%s", *q ? *q : "", *q ? "&" : "", name, enc) < 0 ? -ENOMEM : 0;
    free(enc);
    if (rc == 0) {
        free(*q);
        *q = n;
    }
    return rc;
}

static void hex(const unsigned char *md, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* The file's bytes into ctx, HASH_BLOCK at a time. 0 or -EIO (logged). */
static int hash_file(EVP_MD_CTX *ctx, const struct s3_source *src, uint64_t off, uint64_t len,
                     const char *key, unsigned char *buf)
{
    for (uint64_t done = 0; done < len;) {
        size_t want = len - done < HASH_BLOCK ? (size_t)(len - done) : HASH_BLOCK;
        ssize_t got = pread(src->fd, buf, want, (off_t)(src->off + off + done));
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            log_error("s3 PUT %s: reading its bytes at offset %llu failed: %s", key,
                      (unsigned long long)(src->off + off + done),
                      got < 0 ? strerror(errno) : "the file ends before the object does");
            return -EIO;
        }
        if (EVP_DigestUpdate(ctx, buf, (size_t)got) != 1)
            return -ENOMEM;
        done += (uint64_t)got;
    }
    return 0;
}

int s3_source_sha256(const struct s3_source *src, uint64_t off, uint64_t len, const char *key,
                     char out[65])
{
    if (src->data)
        return sigv4_sha256_hex(src->data + off, (size_t)len, out);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned char *buf = malloc(HASH_BLOCK), md[EVP_MAX_MD_SIZE];
    unsigned md_len = 0;
    int rc = ctx && buf && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 ? 0 : -ENOMEM;
    if (rc == 0)
        rc = hash_file(ctx, src, off, len, key, buf);
    if (rc == 0 && (EVP_DigestFinal_ex(ctx, md, &md_len) != 1 || md_len != 32))
        rc = -ENOMEM;
    if (rc == 0)
        hex(md, md_len, out);
    EVP_MD_CTX_free(ctx);
    free(buf);
    return rc;
}
