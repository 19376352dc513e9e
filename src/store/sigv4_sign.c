/* sigv4_sign: string to sign, signature and Authorization header (see sigv4.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "h5osfs/util/log.h"
#include "sigv4_int.h"

/* ---- string to sign, signature, Authorization ---- */

/* Region and service go into the credential scope between '/': no '/', blank or control. */
static int is_scope_part(const char *s)
{
    if (!s || !*s)
        return 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p <= ' ' || *p == '/' || *p >= 0x7f)
            return 0;
    return 1;
}

static int is_amz_date(const char *d)
{
    if (!d || strlen(d) != AMZ_DATE_LEN || d[DATE8_LEN] != 'T' || d[AMZ_DATE_LEN - 1] != 'Z')
        return 0;
    for (int i = 0; i < AMZ_DATE_LEN - 1; i++)
        if (i != DATE8_LEN && !(d[i] >= '0' && d[i] <= '9'))
            return 0;
    return 1;
}

static int check_scope(const struct sigv4_scope *scope)
{
    if (!scope || !is_amz_date(scope->amz_date) || !is_scope_part(scope->region) ||
        !is_scope_part(scope->service)) {
        log_error("sigv4: scope needs a YYYYMMDDTHHMMSSZ date, a region and a service");
        return -EINVAL;
    }
    return 0;
}

/* "<date8>/<region>/<service>/aws4_request" */
static void sb_put_scope(struct dynbuf *b, const struct sigv4_scope *scope)
{
    dynbuf_append(b, scope->amz_date, DATE8_LEN);
    dynbuf_appendc(b, '/');
    dynbuf_appends(b, scope->region);
    dynbuf_appendc(b, '/');
    dynbuf_appends(b, scope->service);
    dynbuf_appends(b, "/" SIGV4_TERMINATOR);
}

int sigv4_string_to_sign(const char *canonical_request, const struct sigv4_scope *scope, char **out)
{
    char hash[2 * SHA256_LEN + 1];
    if (!out)
        return -EINVAL;
    *out = NULL;
    if (!canonical_request)
        return -EINVAL;
    int rc = check_scope(scope);
    if (rc == 0)
        rc = sigv4_sha256_hex(canonical_request, strlen(canonical_request), hash);
    if (rc)
        return rc;
    struct dynbuf b = DYNBUF_INIT(DYNBUF_NO_MAX);
    dynbuf_appends(&b, SIGV4_ALGORITHM "\n");
    dynbuf_appends(&b, scope->amz_date);
    dynbuf_appendc(&b, '\n');
    sb_put_scope(&b, scope);
    dynbuf_appendc(&b, '\n');
    dynbuf_appends(&b, hash);
    return dynbuf_take(&b, out, NULL);
}

/* kSigning = HMAC(HMAC(HMAC(HMAC("AWS4" + secret, date8), region), service), "aws4_request") */
static int derive_signing_key(const char *secret, const struct sigv4_scope *scope,
                              unsigned char key[SHA256_LEN])
{
    size_t secret_len = strlen(secret);
    if (secret_len > INT_MAX - 4)
        return -EINVAL;
    char *k_secret = malloc(secret_len + 4);
    if (!k_secret)
        return -ENOMEM;
    memcpy(k_secret, "AWS4", 4);
    memcpy(k_secret + 4, secret, secret_len);
    unsigned char k[SHA256_LEN];
    int rc = sigv4_hmac_sha256(k_secret, secret_len + 4, scope->amz_date, DATE8_LEN, k);
    OPENSSL_cleanse(k_secret, secret_len + 4);
    free(k_secret);
    if (rc == 0)
        rc = sigv4_hmac_sha256(k, sizeof k, scope->region, strlen(scope->region), key);
    if (rc == 0)
        rc = sigv4_hmac_sha256(key, SHA256_LEN, scope->service, strlen(scope->service), k);
    if (rc == 0)
        rc = sigv4_hmac_sha256(k, sizeof k, SIGV4_TERMINATOR, strlen(SIGV4_TERMINATOR), key);
    OPENSSL_cleanse(k, sizeof k);
    return rc;
}

int sigv4_signature(const struct sigv4_credentials *cred, const struct sigv4_scope *scope,
                    const char *string_to_sign, char out[65])
{
    if (!cred || !cred->secret_access_key || !string_to_sign || !out) {
        log_error("sigv4: no secret key or no string to sign");
        return -EINVAL;
    }
    int rc = check_scope(scope);
    if (rc)
        return rc;
    unsigned char key[SHA256_LEN], sig[SHA256_LEN];
    rc = derive_signing_key(cred->secret_access_key, scope, key);
    if (rc == 0)
        rc = sigv4_hmac_sha256(key, sizeof key, string_to_sign, strlen(string_to_sign), sig);
    OPENSSL_cleanse(key, sizeof key);
    if (rc == 0)
        sigv4_hex_lower(sig, sizeof sig, out);
    return rc;
}

/* The key id goes into "Credential=<id>/<scope>, ": no '/', ',', blank or control. */
static int is_access_key_id(const char *id)
{
    return is_scope_part(id) && strchr(id, ',') == NULL;
}

static int format_authorization(const char *key_id, const struct sigv4_scope *scope,
                                const char *signed_names, const char *sig, char **out)
{
    struct dynbuf b = DYNBUF_INIT(DYNBUF_NO_MAX);
    dynbuf_appends(&b, SIGV4_ALGORITHM " Credential=");
    dynbuf_appends(&b, key_id);
    dynbuf_appendc(&b, '/');
    sb_put_scope(&b, scope);
    dynbuf_appends(&b, ", SignedHeaders=");
    dynbuf_appends(&b, signed_names);
    dynbuf_appends(&b, ", Signature=");
    dynbuf_appends(&b, sig);
    return dynbuf_take(&b, out, NULL);
}

int sigv4_authorization(const struct sigv4_request *req, int normalize_path,
                        const struct sigv4_credentials *cred, const struct sigv4_scope *scope,
                        char **out)
{
    char *creq = NULL, *names = NULL, *sts = NULL;
    char sig[2 * SHA256_LEN + 1];
    if (!out)
        return -EINVAL;
    *out = NULL;
    if (!cred || !is_access_key_id(cred->access_key_id)) {
        log_error("sigv4: no credentials or an invalid access key id");
        return -EINVAL;
    }
    int rc = sigv4_build_canonical(req, normalize_path, &creq, &names);
    if (rc == 0)
        rc = sigv4_string_to_sign(creq, scope, &sts);
    if (rc == 0)
        rc = sigv4_signature(cred, scope, sts, sig);
    if (rc == 0)
        rc = format_authorization(cred->access_key_id, scope, names, sig, out);
    free(creq);
    free(names);
    free(sts);
    return rc;
}
