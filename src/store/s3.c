/*
 * s3: the store interface over an S3-compatible object store (see include/h5osfs/store/store.h).
 *
 * Keys are the HSDS keys below cfg.prefix. Status codes become the store's errnos here:
 * 404 -> -ENOENT, 403 -> -EACCES (logged by s3_http with the server's reason), 416 on a range
 * past the end -> an empty result, anything else unexpected -> -EIO with one log line.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "h5osfs/util/log.h"
#include "h5osfs/store/sigv4.h"
#include "h5osfs/util/why.h"
#include "h5osfs/store/s3_int.h"
#include "h5osfs/store/s3_multipart.h"

#define S3_LIST_PAGE 1000
#define S3_JSON_LIST_MAX (16u << 20) /* one ListObjectsV2 page: ~1000 keys of 1 KiB */

static struct s3_store *s3_of(struct store *st)
{
    return (struct s3_store *)st;
}

/* ---- get / head ---- */

/* Some servers answer a range with more than asked (the whole object, as 200 or even as 206):
 * keep the asked bytes, using Content-Range to know where the body starts. */
#define RANGE_SLACK (64u << 20)

static void keep_range(struct s3_response *resp, uint64_t off, uint64_t len)
{
    uint64_t start = resp->status == 206 && resp->range_start >= 0 ? (uint64_t)resp->range_start
                     : resp->status == 206                         ? off
                                                                   : 0;
    uint64_t skip = off > start ? off - start : 0;
    size_t from = skip < resp->body.len ? (size_t)skip : resp->body.len;
    size_t n = resp->body.len - from;
    if (len != STORE_RANGE_TO_END && n > len)
        n = (size_t)len;
    memmove(resp->body.data, resp->body.data + from, n);
    resp->body.len = n;
    resp->body.data[n] = '\0';
}

static int s3_get(struct store *st, const char *key, uint64_t off, uint64_t len, size_t max,
                  struct store_buf *out)
{
    struct s3_store *s3 = s3_of(st);
    char range[64];
    struct s3_response resp;
    struct s3_request req = { .method = "GET", .key = key, .max_body = max };
    int ranged = off > 0 || len != STORE_RANGE_TO_END;
    if (ranged && len == 0) {
        out->data = calloc(1, 1);
        return out->data ? 0 : -ENOMEM;
    }
    if (ranged && len != STORE_RANGE_TO_END)
        snprintf(range, sizeof range, "bytes=%llu-%llu", (unsigned long long)off,
                 (unsigned long long)(off + len - 1));
    else
        snprintf(range, sizeof range, "bytes=%llu-", (unsigned long long)off);
    req.range = ranged ? range : NULL;
    if (ranged && max > RANGE_SLACK && (len == STORE_RANGE_TO_END || len + RANGE_SLACK < max))
        req.max_body = len == STORE_RANGE_TO_END ? max : (size_t)len + RANGE_SLACK;
    int rc = s3_perform(s3, &req, &resp);
    if (rc != 0)
        return rc;
    if (resp.status == 416) { /* the range starts past the end */
        s3_response_free(&resp);
        out->data = calloc(1, 1);
        return out->data ? 0 : -ENOMEM;
    }
    rc = s3_status_errno(s3, "GET", key, &resp);
    if (rc == 0 && ranged)
        keep_range(&resp, off, len);
    if (rc != 0) {
        s3_response_free(&resp);
        return rc;
    }
    *out = resp.body;
    snprintf(out->etag, sizeof out->etag, "%s", resp.etag);
    return 0;
}

static int s3_head(struct store *st, const char *key, struct store_stat *out)
{
    struct s3_store *s3 = s3_of(st);
    struct s3_response resp;
    struct s3_request req = { .method = "HEAD", .key = key, .max_body = 0 };
    int rc = s3_perform(s3, &req, &resp);
    if (rc != 0)
        return rc;
    rc = s3_status_errno(s3, "HEAD", key, &resp);
    if (rc == 0) {
        out->size = resp.content_length;
        out->mtime = resp.mtime;
        snprintf(out->etag, sizeof out->etag, "%s", resp.etag);
    }
    s3_response_free(&resp);
    return rc;
}

/* ---- put / delete ---- */

/* One PutObject of len bytes of src at key (a single request, retried as any). */
static int put_source(struct s3_store *s3, const char *key, const struct s3_source *src,
                      uint64_t len)
{
    char hash[65];
    struct s3_response resp;
    struct s3_request req = {
        .method = "PUT", .key = key, .body_len = (size_t)len, .max_body = 1u << 20
    };
    if (src->data) {
        req.body = src->data;
    } else {
        int rc = s3_source_sha256(src, 0, len, key, hash);
        if (rc != 0)
            return rc;
        req.body_file = src;
        req.payload_hash = hash;
    }
    int rc = s3_perform(s3, &req, &resp);
    if (rc != 0)
        return rc;
    rc = s3_status_errno(s3, "PUT", key, &resp);
    s3_response_free(&resp);
    return rc;
}

/* One PutObject up to the threshold, a multipart upload above it (and above S3's 5 GiB). */
static int put_any(struct s3_store *s3, const char *key, const struct s3_source *src, uint64_t len)
{
    if (len > s3->cfg.multipart_threshold || len > STORE_S3_PUT_MAX)
        return s3_multipart_put(s3, key, src, len);
    return put_source(s3, key, src, len);
}

static int s3_put(struct store *st, const char *key, const void *data, size_t len)
{
    struct s3_source src = { .data = data ? data : (const unsigned char *)"", .fd = -1 };
    return put_any(s3_of(st), key, &src, len);
}

static int s3_put_new_from_fd(struct store *st, const char *key, int fd, uint64_t off, size_t len)
{
    struct s3_source src = { .data = NULL, .fd = fd, .off = off };
    return put_any(s3_of(st), key, &src, len);
}

/* One conditional PutObject; if_match is the If-Match header value, NULL for If-None-Match: *.
 * 0, -ESTALE (412, 409, or 404 under If-Match), or -errno. */
static int put_conditional(struct s3_store *s3, const char *key, const void *data, size_t len,
                           const char *if_match)
{
    struct s3_response resp;
    struct s3_request req = { .method = "PUT",
                              .key = key,
                              .body = data ? data : "",
                              .body_len = len,
                              .max_body = 1u << 20,
                              .if_match = if_match,
                              .if_none_match = if_match ? NULL : "*" };
    int rc = s3_perform(s3, &req, &resp);
    if (rc != 0)
        return rc;
    if (resp.status == 412 || resp.status == 409 || (if_match && resp.status == 404))
        rc = -ESTALE;
    else
        rc = s3_status_errno(s3, "PUT (conditional)", key, &resp);
    s3_response_free(&resp);
    return rc;
}

/*
 * 412 PreconditionFailed (the etag no longer matches, or an object exists), 404 (If-Match on
 * an object deleted meanwhile) and 409 ConditionalRequestConflict (a concurrent conditional
 * write) mean that another writer came first; so does the 412 a retried put that did land
 * gets (the caller re-reads to tell). If-Match carries the ETag quoted, as RFC 7232 and AWS
 * have it; Ceph RGW 16 compares it byte for byte with its unquoted ETag and refuses every
 * quoted one: when a 412 comes while a HEAD still shows the very etag, the put is made again
 * with the bare ETag, and so are all later ones of this store.
 */
static int s3_put_if(struct store *st, const char *key, const void *data, size_t len,
                     const char *if_etag)
{
    struct s3_store *s3 = s3_of(st);
    char quoted[sizeof((struct store_stat *)0)->etag + 2];
    snprintf(quoted, sizeof quoted, "\"%s\"", if_etag ? if_etag : "");
    if (!if_etag)
        return put_conditional(s3, key, data, len, NULL);
    if (atomic_load(&s3->if_match_bare))
        return put_conditional(s3, key, data, len, if_etag);
    int rc = put_conditional(s3, key, data, len, quoted);
    struct store_stat now;
    if (rc != -ESTALE || s3_head(st, key, &now) != 0 || strcmp(now.etag, if_etag) != 0)
        return rc;
    rc = put_conditional(s3, key, data, len, if_etag);
    if (rc == 0) {
        atomic_store(&s3->if_match_bare, 1);
        log_info("s3 %s: the server wants If-Match without quotes (as Ceph RGW): sent so from "
                 "now on",
                 s3->bucket);
    }
    return rc;
}

/* x-amz-copy-source of object src of this store: "/bucket/<encoded prefix and key>". */
static int copy_source_of(const struct s3_store *s3, const char *src, char **out)
{
    char *full = NULL, *enc = NULL;
    int rc = asprintf(&full, "%s%s", s3->prefix, src) < 0 ? -ENOMEM : 0;
    if (rc == 0)
        rc = sigv4_uri_encode(full, strlen(full), 1, &enc);
    if (rc == 0 && asprintf(out, "/%s/%s", s3->bucket, enc) < 0)
        rc = -ENOMEM;
    free(full);
    free(enc);
    return rc;
}

/* 400 InvalidRequest is how S3 refuses a CopyObject of a source over 5 GiB. */
static int refused_as_too_big(const struct s3_response *resp)
{
    char code[64], msg[8];
    if (resp->status != 400)
        return 0;
    s3_parse_error((const char *)resp->body.data, resp->body.len, code, sizeof code, msg,
                   sizeof msg);
    return strcmp(code, "InvalidRequest") == 0;
}

/* One CopyObject: the server copies; an error may come inside a 200 answer (AWS documents it),
 * and then InternalError or SlowDown are retried as a 5xx. -E2BIG, not logged, when the answer
 * may mean that the source is too big for one CopyObject (size unknown). */
static int copy_object(struct s3_store *s3, const char *source, const char *dst, uint64_t size)
{
    struct s3_response resp;
    struct s3_request req = { .method = "PUT",
                              .key = dst,
                              .body = "",
                              .body_len = 0,
                              .copy_source = source,
                              .error_in_ok = 1,
                              .max_body = 1u << 20 };
    if (size != STORE_SIZE_UNKNOWN)
        req.extra_time = (double)size / S3_SERVER_COPY_RATE;
    int rc = s3_perform(s3, &req, &resp);
    if (rc != 0)
        return rc;
    if (size == STORE_SIZE_UNKNOWN && refused_as_too_big(&resp))
        rc = -E2BIG;
    else
        rc = s3_status_errno(s3, "PUT (copy)", dst, &resp);
    if (rc == 0 && resp.body.len > 0 && strstr((const char *)resp.body.data, "<Error>"))
        rc = s3_unexpected(s3, "PUT (copy)", dst, &resp);
    s3_response_free(&resp);
    return rc;
}

static int over_threshold(const struct s3_store *s3, uint64_t size)
{
    return size > s3->cfg.multipart_threshold || size > STORE_S3_PUT_MAX;
}

/* A CopyObject that the server refused, of a source of unknown size: copied in parts if it is
 * big (S3's answer for a source over 5 GiB), else the refusal stands. */
static int copy_refused(struct s3_store *s3, const char *src, const char *source, const char *dst)
{
    struct store_stat st;
    int rc = s3_head(&s3->base, src, &st);
    if (rc == 0 && over_threshold(s3, st.size)) {
        log_info("s3 PUT %s/%s%s: CopyObject of %s (%llu bytes) refused as InvalidRequest: copied "
                 "in parts",
                 s3->bucket, s3->prefix, dst, src, (unsigned long long)st.size);
        return s3_multipart_copy(s3, dst, source, st.size);
    }
    if (rc == 0) {
        log_error("s3 PUT %s/%s%s: CopyObject of %s refused: HTTP 400 InvalidRequest", s3->bucket,
                  s3->prefix, dst, src);
        rc = -EIO;
    }
    return rc;
}

/* One CopyObject up to the threshold, UploadPartCopy parts above it (and above 5 GiB, which
 * CopyObject refuses). A source of unknown size is taken for a small one. */
static int s3_copy(struct store *st, const char *src, const char *dst, uint64_t size)
{
    struct s3_store *s3 = s3_of(st);
    char *source = NULL;
    int rc = copy_source_of(s3, src, &source);
    if (rc == 0 && size != STORE_SIZE_UNKNOWN && over_threshold(s3, size))
        rc = s3_multipart_copy(s3, dst, source, size);
    else if (rc == 0 && (rc = copy_object(s3, source, dst, size)) == -E2BIG)
        rc = copy_refused(s3, src, source, dst);
    free(source);
    return rc;
}

static int s3_del(struct store *st, const char *key)
{
    struct s3_store *s3 = s3_of(st);
    struct s3_response resp;
    struct s3_request req = { .method = "DELETE", .key = key, .max_body = 1u << 20 };
    int rc = s3_perform(s3, &req, &resp);
    if (rc != 0)
        return rc;
    rc = s3_status_errno(s3, "DELETE", key, &resp);
    s3_response_free(&resp);
    return rc;
}

/* ---- list ---- */

/* The query in SigV4's canonical order (names sorted). */
static int list_query(const char *prefix, const char *delimiter, const char *token, size_t max,
                      char **out)
{
    char maxs[24];
    char *q = NULL;
    snprintf(maxs, sizeof maxs, "%zu", max);
    int rc = s3_query_add(&q, "continuation-token", token);
    if (rc == 0)
        rc = s3_query_add(&q, "delimiter", delimiter);
    if (rc == 0) /* a key with characters XML 1.0 cannot hold breaks a raw listing's XML */
        rc = s3_query_add(&q, "encoding-type", "url");
    if (rc == 0)
        rc = s3_query_add(&q, "list-type", "2");
    if (rc == 0)
        rc = s3_query_add(&q, "max-keys", maxs);
    if (rc == 0)
        rc = s3_query_add(&q, "prefix", prefix);
    if (rc != 0)
        free(q);
    *out = rc == 0 ? q : NULL;
    return rc;
}

/* Keys and prefixes come back with the bucket prefix: take it off (and drop any without). */
static void strip_prefix(const struct s3_store *s3, struct store_list *l)
{
    size_t plen = strlen(s3->prefix), w = 0;
    for (size_t i = 0; i < l->n_objects; i++) {
        struct store_entry e = l->objects[i];
        if (strncmp(e.key, s3->prefix, plen) != 0 || !e.key[plen]) {
            free(e.key);
            continue;
        }
        memmove(e.key, e.key + plen, strlen(e.key + plen) + 1);
        l->objects[w++] = e;
    }
    l->n_objects = w;
    w = 0;
    for (size_t i = 0; i < l->n_prefixes; i++) {
        char *p = l->prefixes[i];
        if (strncmp(p, s3->prefix, plen) != 0 || !p[plen]) {
            free(p);
            continue;
        }
        memmove(p, p + plen, strlen(p + plen) + 1);
        l->prefixes[w++] = p;
    }
    l->n_prefixes = w;
}

static int list_page(struct s3_store *s3, const char *prefix, const char *delimiter,
                     const char *token, size_t max, struct store_list *out)
{
    char *full = NULL, *query = NULL;
    struct s3_response resp;
    int truncated = 0;
    if (asprintf(&full, "%s%s", s3->prefix, prefix ? prefix : "") < 0)
        return -ENOMEM;
    int rc = list_query(full, delimiter, token, max, &query);
    free(full);
    if (rc != 0)
        return rc;
    struct s3_request req = { .method = "GET",
                              .key = NULL,
                              .query = query,
                              .max_body = S3_JSON_LIST_MAX,
                              .list_prefix = prefix ? prefix : "" };
    rc = s3_perform(s3, &req, &resp);
    free(query);
    if (rc != 0)
        return rc;
    rc = s3_status_errno(s3, "LIST", prefix, &resp);
    if (rc == 0 &&
        (rc = s3_parse_list((const char *)resp.body.data, resp.body.len, out, &truncated)) != 0)
        log_error("s3 LIST %s/%s%s: the listing is not ListObjectsV2 XML", s3->bucket, s3->prefix,
                  prefix ? prefix : "");
    s3_response_free(&resp);
    if (rc == 0)
        strip_prefix(s3, out);
    return rc == -ENOENT ? -EIO : rc;
}

static int append_list(struct store_list *dst, struct store_list *src)
{
    struct store_entry *o =
        realloc(dst->objects, (dst->n_objects + src->n_objects + 1) * sizeof *o);
    if (o)
        dst->objects = o;
    char **p = realloc(dst->prefixes, (dst->n_prefixes + src->n_prefixes + 1) * sizeof *p);
    if (p)
        dst->prefixes = p;
    if (!o || !p)
        return -ENOMEM;
    if (src->n_objects) /* memcpy from NULL is undefined even for 0 bytes */
        memcpy(dst->objects + dst->n_objects, src->objects, src->n_objects * sizeof *o);
    if (src->n_prefixes)
        memcpy(dst->prefixes + dst->n_prefixes, src->prefixes, src->n_prefixes * sizeof *p);
    dst->n_objects += src->n_objects;
    dst->n_prefixes += src->n_prefixes;
    free(src->objects);
    free(src->prefixes);
    free(src->next_token);
    memset(src, 0, sizeof *src);
    return 0;
}

static int s3_list(struct store *st, const char *prefix, const char *delimiter, const char *token,
                   size_t max_keys, struct store_list *out)
{
    struct s3_store *s3 = s3_of(st);
    if (max_keys > 0)
        return list_page(s3, prefix, delimiter, token, max_keys, out);
    /* no limit: gather every page */
    char *next = token ? strdup(token) : NULL;
    int rc = 0;
    memset(out, 0, sizeof *out);
    do {
        struct store_list page;
        rc = list_page(s3, prefix, delimiter, next, S3_LIST_PAGE, &page);
        free(next);
        next = NULL;
        if (rc != 0)
            break;
        next = page.next_token;
        page.next_token = NULL;
        rc = append_list(out, &page);
        if (rc != 0)
            store_list_free(&page);
    } while (next && rc == 0);
    free(next);
    if (rc != 0)
        store_list_free(out);
    return rc;
}

/* ---- the check at mount ---- */

/* What an answer to the listing means for the mount: 0 to go on, or -errno with why. */
static int judge_listing(const struct s3_store *s3, const struct s3_response *resp,
                         const char *failure, char *why, size_t why_len)
{
    struct store_list list;
    int truncated;
    if (resp->status / 100 == 2) {
        if (s3_parse_list((const char *)resp->body.data, resp->body.len, &list, &truncated) == 0) {
            store_list_free(&list);
            return 0;
        }
        why_set(why, why_len,
                "%s answered a bucket listing with something other than S3's "
                "ListObjectsV2 XML (is it an S3 endpoint?)",
                s3->base_url);
        return -EIO;
    }
    if (resp->status == 403 && s3->cfg.no_sign) {
        /* a public bucket may serve its objects to anyone but its listing to no one */
        why_set(why, why_len,
                "anonymous listing refused by %s (%s): mounted anyway, but "
                "whatever needs a listing will fail with EACCES",
                s3->base_url, failure);
        return 0;
    }
    if (resp->status == 403) {
        why_set(why, why_len, "credentials refused by %s: %s", s3->base_url, failure);
        return -EACCES;
    }
    char code[64], msg[8];
    s3_parse_error((const char *)resp->body.data, resp->body.len, code, sizeof code, msg,
                   sizeof msg);
    if (strcmp(code, "NoSuchBucket") == 0) {
        why_set(why, why_len, "no such bucket at %s: %s", s3->base_url, failure);
        return -ENOENT;
    }
    why_set(why, why_len, "%s refused a bucket listing: %s", s3->base_url, failure);
    return -EIO;
}

int store_s3_check(struct store *st, char *why, size_t why_len)
{
    struct s3_store *s3 = s3_of(st);
    char *query = NULL, failure[320] = "";
    struct s3_response resp;
    why[0] = '\0';
    int rc = list_query(s3->prefix, NULL, NULL, 1, &query);
    if (rc != 0)
        return rc;
    struct s3_request req = { .method = "GET",
                              .key = NULL,
                              .query = query,
                              .max_body = S3_JSON_LIST_MAX,
                              .why = failure,
                              .why_len = sizeof failure };
    rc = s3_perform(s3, &req, &resp);
    free(query);
    if (rc != 0) {
        why_set(why, why_len, "no usable answer from %s: %s", s3->base_url,
                failure[0] ? failure : strerror(-rc));
        return rc;
    }
    rc = judge_listing(s3, &resp, failure, why, why_len);
    s3_response_free(&resp);
    return rc;
}

/* ---- open / close ---- */

static int s3_abort_uploads_op(struct store *st, const char *prefix, size_t *aborted)
{
    return s3_abort_uploads(s3_of(st), prefix, aborted);
}

static void s3_destroy(struct store *st)
{
    struct s3_store *s3 = s3_of(st);
    s3_pool_free(s3->pool);
    free(s3->bucket);
    free(s3->prefix);
    free(s3->endpoint);
    free(s3->region);
    free(s3->key_id);
    free(s3->secret);
    free(s3->token);
    free(s3->ca_file);
    free(s3->host);
    free(s3->base_url);
    free(s3->path_base);
    free(s3);
}

static const struct store_ops s3_ops = {
    .name = "s3",
    .get = s3_get,
    .put = s3_put,
    .put_if = s3_put_if,
    .put_new_from_fd = s3_put_new_from_fd,
    .copy = s3_copy,
    .del = s3_del,
    .head = s3_head,
    .list = s3_list,
    .abort_uploads = s3_abort_uploads_op,
    .destroy = s3_destroy,
};

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* Host header and URLs: path style ("endpoint/bucket/key") or virtual-hosted
 * ("bucket.endpoint/key"). An endpoint may carry a path of its own. */
static int build_urls(struct s3_store *s3)
{
    char aws[128];
    const char *endpoint = s3->endpoint;
    if (!endpoint) {
        snprintf(aws, sizeof aws, "https://s3.%s.amazonaws.com", s3->region);
        endpoint = aws;
    }
    const char *sep = strstr(endpoint, "://");
    if (!sep || !sep[3])
        return -EINVAL;
    int scheme_len = (int)(sep + 3 - endpoint);
    const char *host = sep + 3;
    int host_len = (int)strcspn(host, "/");
    const char *path = host + host_len;
    int path_len = (int)strlen(path);
    while (path_len > 0 && path[path_len - 1] == '/')
        path_len--;
    int bad;
    if (s3->cfg.path_style)
        bad = asprintf(&s3->host, "%.*s", host_len, host) < 0 ||
              asprintf(&s3->path_base, "%.*s/%s", path_len, path, s3->bucket) < 0 ||
              asprintf(&s3->base_url, "%.*s%.*s%s", scheme_len, endpoint, host_len, host,
                       s3->path_base) < 0;
    else
        bad =
            asprintf(&s3->host, "%s.%.*s", s3->bucket, host_len, host) < 0 ||
            asprintf(&s3->path_base, "%.*s", path_len, path) < 0 ||
            asprintf(&s3->base_url, "%.*s%s%s", scheme_len, endpoint, s3->host, s3->path_base) < 0;
    return bad ? -ENOMEM : 0;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result = CURLE_FAILED_INIT; /* written once under curl_once */

static void init_curl(void)
{
    curl_init_result = curl_global_init(CURL_GLOBAL_ALL);
}

int store_s3_open(const struct store_s3_config *cfg, struct store **out)
{
    if (pthread_once(&curl_once, init_curl) != 0 || curl_init_result != CURLE_OK)
        return -EIO;
    struct s3_store *s3 = calloc(1, sizeof *s3);
    if (!s3)
        return -ENOMEM;
    s3->base.ops = &s3_ops;
    s3->cfg = *cfg;
    if (!s3->cfg.multipart_threshold)
        s3->cfg.multipart_threshold = STORE_S3_DEFAULT_MULTIPART_THRESHOLD;
    if (!s3->cfg.multipart_part_size)
        s3->cfg.multipart_part_size = STORE_S3_DEFAULT_PART_SIZE;
    s3->bucket = dup_or_null(cfg->bucket);
    s3->prefix = strdup(cfg->prefix ? cfg->prefix : "");
    s3->endpoint = dup_or_null(cfg->endpoint);
    s3->region = strdup(cfg->region ? cfg->region : "us-east-1");
    s3->key_id = dup_or_null(cfg->access_key_id);
    s3->secret = dup_or_null(cfg->secret_access_key);
    s3->token = dup_or_null(cfg->session_token);
    s3->ca_file = dup_or_null(cfg->ca_file);
    int rc = !s3->bucket || !s3->prefix || !s3->region ? -ENOMEM : 0;
    if (rc == 0 && !cfg->no_sign && (!s3->key_id || !s3->secret))
        rc = -EACCES; /* no credentials and not anonymous */
    if (rc == 0)
        rc = build_urls(s3);
    if (rc == 0)
        rc = s3_pool_new(cfg->max_requests ? cfg->max_requests : 16, &s3->pool);
    if (rc != 0) {
        s3_destroy(&s3->base);
        return rc;
    }
    *out = &s3->base;
    return 0;
}
