/* sigv4_int.h: what sigv4.c (canonical requests) and sigv4_sign.c (signatures) share. */
#ifndef H5OSFS_SIGV4_INT_H
#define H5OSFS_SIGV4_INT_H

#include <stddef.h>

#include "h5osfs/store/sigv4.h"
#include "h5osfs/util/dynbuf.h"

#define SIGV4_ALGORITHM "AWS4-HMAC-SHA256"
#define SIGV4_TERMINATOR "aws4_request"
#define SIGV4_UNSIGNED "UNSIGNED-PAYLOAD"
#define SHA256_LEN 32
#define AMZ_DATE_LEN 16 /* "YYYYMMDDTHHMMSSZ" */
#define DATE8_LEN 8

int sigv4_is_alnum(unsigned char c);
void sigv4_hex_lower(const unsigned char *bin, size_t n, char *out);
int sigv4_hmac_sha256(const void *key, size_t key_len, const void *msg, size_t msg_len,
                      unsigned char out[SHA256_LEN]);

/* The canonical request and, apart, the signed header list the Authorization header repeats. */
int sigv4_build_canonical(const struct sigv4_request *req, int normalize_path, char **creq,
                          char **signed_names);

#endif
