/*
 * s3_multipart: an object put in parts (CreateMultipartUpload, UploadPart,
 * CompleteMultipartUpload), for objects above the mount's multipart_threshold and for every
 * object above S3's 5 GiB PutObject limit (see store.h, store_put_new_from_fd); and an object
 * copied in parts the same way, each part an UploadPartCopy of a range of the source, which the
 * server copies (store_copy_sized: CopyObject refuses sources over 5 GiB).
 *
 * Parts go up in parallel on up to max_requests threads (the connection pool bounds the
 * requests in flight anyway). Each part is one request, retried on its own by s3_perform with
 * the store's retry policy. Its SHA-256 is computed once, before it is sent, and signed
 * (SigV4's x-amz-content-sha256): the server checks the bytes it got against it. A part of a
 * file is so read twice, the second time from the page cache; never is a part in memory here.
 *
 * A failure that retries did not cure stops the parts not yet started and aborts the upload:
 * S3 keeps (and bills) the parts of an upload neither completed nor aborted, and no object
 * appears. CompleteMultipartUpload may answer 200 and still fail, with an <Error> body (AWS
 * documents it): InternalError or SlowDown so are retried (s3_request.error_in_ok), anything
 * else fails. The server assembles the object before it answers a Complete: the request may
 * take longer than others, a second for every 16 MiB. A Complete that succeeded but whose
 * answer was lost is retried into 404 NoSuchUpload: the object is then there, which a HEAD
 * (its size) tells.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "h5osfs/util/log.h"
#include "h5osfs/util/pfor.h"
#include "h5osfs/store/sigv4.h"
#include "h5osfs/store/s3_int.h"
#include "h5osfs/store/s3_multipart.h"

#define MIB (1ull << 20)
#define UPLOAD_ID_MAX 1024 /* AWS's are about 100 characters */
#define ANSWER_MAX (1u << 20)
/* Bytes a second a server is granted to assemble an object before it answers a Complete (AWS:
 * "several minutes" for big ones; s3rver copies the parts into one file first), or to copy a
 * part before it answers an UploadPartCopy. */
#define COMPLETE_RATE S3_SERVER_COPY_RATE

struct part {
    char etag[65];
};

struct upload {
    struct s3_store *s3;
    const char *key;
    const struct s3_source *src; /* the bytes to put, or NULL for a copy */
    const char *copy_source;     /* a copy: x-amz-copy-source of the object copied */
    uint64_t len, part_size;
    size_t n_parts;
    char *id_query; /* "uploadId=<encoded id>" */
    struct part *parts;
    _Atomic int failed; /* the first final failure of a part (-errno); 0: none */
};

int s3_part_size(uint64_t len, uint64_t wanted, uint64_t *out)
{
    if (len > STORE_S3_OBJECT_MAX)
        return -EFBIG;
    uint64_t part = wanted < STORE_S3_PART_MIN   ? STORE_S3_PART_MIN
                    : wanted > STORE_S3_PART_MAX ? STORE_S3_PART_MAX
                                                 : wanted;
    uint64_t fits = (len + STORE_S3_PARTS_MAX - 1) / STORE_S3_PARTS_MAX;
    if (part < fits)
        part = (fits + MIB - 1) / MIB * MIB;
    *out = part;
    return 0;
}

/* ---- the three steps, and the abort ---- */

/* A put's answer as an errno: a 404 (NoSuchUpload, NoSuchBucket) is no "no such object"
 * here, but a failure of the upload, logged. */
static int answer_errno(const struct upload *u, const char *op, const struct s3_response *resp)
{
    char code[64], msg[160];
    if (resp->status != 404)
        return s3_status_errno(u->s3, op, u->key, resp);
    s3_parse_error((const char *)resp->body.data, resp->body.len, code, sizeof code, msg,
                   sizeof msg);
    log_error("s3 %s %s/%s%s: HTTP 404 %s%s%s", op, u->s3->bucket, u->s3->prefix, u->key, code,
              msg[0] ? ": " : "", msg);
    return -EIO;
}

static int initiate(struct upload *u, char *id, size_t id_len)
{
    struct s3_response resp;
    struct s3_request req = { .method = "POST",
                              .key = u->key,
                              .query = "uploads=",
                              .body = "",
                              .body_len = 0,
                              .max_body = ANSWER_MAX };
    int rc = s3_perform(u->s3, &req, &resp);
    if (rc != 0)
        return rc;
    rc = answer_errno(u, "POST (CreateMultipartUpload)", &resp);
    if (rc == 0 &&
        s3_parse_initiate((const char *)resp.body.data, resp.body.len, id, id_len) != 0) {
        log_error("s3 POST %s/%s%s: the answer to CreateMultipartUpload names no upload",
                  u->s3->bucket, u->s3->prefix, u->key);
        rc = -EIO;
    }
    s3_response_free(&resp);
    return rc;
}

static int upload_query(const char *id, char **out)
{
    char *enc = NULL;
    int rc = sigv4_uri_encode(id, strlen(id), 0, &enc);
    if (rc == 0 && asprintf(out, "uploadId=%s", enc) < 0)
        rc = -ENOMEM;
    free(enc);
    return rc;
}

/* The ETag of an UploadPartCopy's answer, which is in its body (and may be an <Error>, even
 * with a 200, as AWS documents). 0, or -EIO (logged). */
static int copied_etag(const struct upload *u, const char *op, const struct s3_response *resp,
                       char *etag, size_t etag_len)
{
    char code[64], msg[160];
    int rc = s3_parse_copy_result((const char *)resp->body.data, resp->body.len, etag, etag_len,
                                  code, sizeof code, msg, sizeof msg);
    if (rc != 0)
        log_error("s3 %s %s/%s%s: HTTP %ld, but %s%s%s%s", op, u->s3->bucket, u->s3->prefix, u->key,
                  resp->status,
                  rc == -EIO ? "the body is the error "
                             : "the body is no CopyPartResult with an ETag",
                  rc == -EIO ? code : "", msg[0] ? ": " : "", msg);
    return rc == 0 ? 0 : -EIO;
}

/* The request of part i, n bytes at off: its bytes (memory or file), or a copy of that range
 * of the source object. hash, range: the caller's buffers that the request points into. */
static void part_request(const struct upload *u, uint64_t off, uint64_t n, struct s3_request *req,
                         struct s3_source *file, const char *hash, char *range, size_t range_len)
{
    if (u->copy_source) {
        snprintf(range, range_len, "bytes=%llu-%llu", (unsigned long long)off,
                 (unsigned long long)(off + n - 1));
        req->body = "";
        req->copy_source = u->copy_source;
        req->copy_range = range;
        req->error_in_ok = 1;
        req->extra_time = (double)n / COMPLETE_RATE;
        return;
    }
    req->body_len = (size_t)n;
    req->payload_hash = hash;
    *file = (struct s3_source){ .data = NULL, .fd = u->src->fd, .off = u->src->off + off };
    if (u->src->data)
        req->body = u->src->data + off;
    else
        req->body_file = file;
}

/* Part i (0-based; S3 numbers them from 1): 0 with its ETag kept, or -errno. */
static int put_part(struct upload *u, size_t i)
{
    uint64_t off = (uint64_t)i * u->part_size;
    uint64_t n = u->len - off < u->part_size ? u->len - off : u->part_size;
    struct s3_source file;
    char hash[65], op[64], range[64], *query = NULL;
    struct s3_response resp;
    int rc = u->copy_source ? 0 : s3_source_sha256(u->src, off, n, u->key, hash);
    if (rc == 0 && asprintf(&query, "partNumber=%zu&%s", i + 1, u->id_query) < 0)
        rc = -ENOMEM;
    if (rc != 0)
        return rc;
    struct s3_request req = {
        .method = "PUT", .key = u->key, .query = query, .max_body = ANSWER_MAX
    };
    part_request(u, off, n, &req, &file, hash, range, sizeof range);
    rc = s3_perform(u->s3, &req, &resp);
    free(query);
    if (rc != 0)
        return rc;
    snprintf(op, sizeof op, "PUT (%s %zu of %zu)", u->copy_source ? "part copy" : "part", i + 1,
             u->n_parts);
    rc = answer_errno(u, op, &resp);
    if (rc == 0 && u->copy_source)
        rc = copied_etag(u, op, &resp, u->parts[i].etag, sizeof u->parts[i].etag);
    else if (rc == 0 && !resp.etag[0]) {
        log_error("s3 %s %s/%s%s: the answer has no ETag", op, u->s3->bucket, u->s3->prefix,
                  u->key);
        rc = -EIO;
    }
    if (rc == 0 && !u->copy_source)
        snprintf(u->parts[i].etag, sizeof u->parts[i].etag, "%s", resp.etag);
    s3_response_free(&resp);
    return rc;
}

static void part_step(void *ctx, size_t i)
{
    struct upload *u = ctx;
    if (atomic_load(&u->failed))
        return; /* the upload is lost: send no more bytes */
    int rc = put_part(u, i), none = 0;
    if (rc != 0)
        atomic_compare_exchange_strong(&u->failed, &none, rc);
}

static int put_parts(struct upload *u)
{
    unsigned threads = u->s3->cfg.max_requests ? u->s3->cfg.max_requests : 16;
    pfor(u->n_parts, threads, part_step, u);
    return atomic_load(&u->failed);
}

/* <CompleteMultipartUpload> with every part's number and ETag (quoted, as S3 gave it). */
static char *complete_xml(const struct upload *u)
{
    static const char head[] = "<CompleteMultipartUpload>", tail[] = "</CompleteMultipartUpload>";
    size_t cap = sizeof head + sizeof tail + u->n_parts * (64 + sizeof u->parts[0].etag), len;
    char *xml = malloc(cap);
    if (!xml)
        return NULL;
    len = (size_t)snprintf(xml, cap, "%s", head);
    for (size_t i = 0; i < u->n_parts; i++)
        len += (size_t)snprintf(xml + len, cap - len,
                                "<Part><PartNumber>%zu</PartNumber><ETag>\"%s\"</ETag></Part>",
                                i + 1, u->parts[i].etag);
    snprintf(xml + len, cap - len, "%s", tail);
    return xml;
}

/* NoSuchUpload to a Complete: an earlier attempt of it may have succeeded, its answer lost. */
static int completed_before(struct upload *u)
{
    struct store_stat st;
    int rc = u->s3->base.ops->head(&u->s3->base, u->key, &st);
    if (rc == 0 && st.size == u->len) {
        log_info("s3 POST %s/%s%s: CompleteMultipartUpload was done by an attempt whose answer "
                 "was lost",
                 u->s3->bucket, u->s3->prefix, u->key);
        return 0;
    }
    log_error("s3 POST %s/%s%s: CompleteMultipartUpload: the server no longer knows the upload "
              "(NoSuchUpload), and the object is not there",
              u->s3->bucket, u->s3->prefix, u->key);
    return -EIO;
}

/* What a Complete answered: 0, or -errno (logged). */
static int judge_complete(struct upload *u, const struct s3_response *resp)
{
    static const char op[] = "POST (CompleteMultipartUpload)";
    char code[64], msg[160];
    const char *body = (const char *)resp->body.data;
    if (resp->status / 100 != 2) {
        s3_parse_error(body, resp->body.len, code, sizeof code, msg, sizeof msg);
        if (resp->status == 404 && strcmp(code, "NoSuchUpload") == 0)
            return completed_before(u);
        return answer_errno(u, op, resp);
    }
    int rc = s3_parse_complete(body, resp->body.len, code, sizeof code, msg, sizeof msg);
    if (rc != 0)
        log_error("s3 %s %s/%s%s: HTTP %ld, but %s%s%s%s", op, u->s3->bucket, u->s3->prefix, u->key,
                  resp->status,
                  rc == -EIO ? "the body is the error "
                             : "the body is "
                               "not a CompleteMultipartUploadResult",
                  rc == -EIO ? code : "", msg[0] ? ": " : "", msg);
    return rc == 0 ? 0 : -EIO;
}

static int complete(struct upload *u)
{
    char *xml = complete_xml(u);
    struct s3_response resp;
    if (!xml)
        return -ENOMEM;
    struct s3_request req = { .method = "POST",
                              .key = u->key,
                              .query = u->id_query,
                              .body = xml,
                              .body_len = strlen(xml),
                              .max_body = ANSWER_MAX,
                              .error_in_ok = 1,
                              .extra_time = (double)u->len / COMPLETE_RATE };
    int rc = s3_perform(u->s3, &req, &resp);
    free(xml);
    if (rc != 0)
        return rc;
    rc = judge_complete(u, &resp);
    s3_response_free(&resp);
    return rc;
}

/* After a failure: the parts go, so that nothing of the upload stays in the bucket. */
static void abort_upload(struct upload *u, const char *id)
{
    struct s3_response resp;
    struct s3_request req = {
        .method = "DELETE", .key = u->key, .query = u->id_query, .max_body = ANSWER_MAX
    };
    int rc = s3_perform(u->s3, &req, &resp);
    if (rc == 0) {
        if (resp.status != 404) /* NoSuchUpload: nothing left of it */
            rc = s3_status_errno(u->s3, "DELETE (AbortMultipartUpload)", u->key, &resp);
        s3_response_free(&resp);
    }
    if (rc != 0)
        log_error("s3 %s/%s%s: multipart upload %s could not be aborted: its parts stay in the "
                  "bucket until it is (or a lifecycle rule AbortIncompleteMultipartUpload "
                  "removes them)",
                  u->s3->bucket, u->s3->prefix, u->key, id);
    else
        log_info("s3 %s/%s%s: multipart %s of %zu parts aborted after a failure", u->s3->bucket,
                 u->s3->prefix, u->key, u->copy_source ? "copy" : "upload", u->n_parts);
}

/* Create, parts, complete; an abort when any of it fails after the create. 0 or -errno. */
static int run_upload(struct upload *u)
{
    char id[UPLOAD_ID_MAX + 1];
    int rc = s3_part_size(u->len, u->s3->cfg.multipart_part_size, &u->part_size);
    if (rc != 0) {
        log_error("s3 PUT %s/%s%s: %llu bytes are more than S3 takes in one object (5 TiB)",
                  u->s3->bucket, u->s3->prefix, u->key, (unsigned long long)u->len);
        return rc;
    }
    u->n_parts = u->len == 0 ? 1 : (size_t)((u->len + u->part_size - 1) / u->part_size);
    u->parts = calloc(u->n_parts, sizeof *u->parts);
    if (!u->parts)
        return -ENOMEM;
    rc = initiate(u, id, sizeof id);
    if (rc == 0 && (rc = upload_query(id, &u->id_query)) == 0) {
        rc = put_parts(u);
        if (rc == 0)
            rc = complete(u);
        if (rc != 0)
            abort_upload(u, id);
    }
    free(u->id_query);
    free(u->parts);
    return rc;
}

int s3_multipart_put(struct s3_store *s3, const char *key, const struct s3_source *src,
                     uint64_t len)
{
    struct upload u = { .s3 = s3, .key = key, .src = src, .len = len };
    return run_upload(&u);
}

int s3_multipart_copy(struct s3_store *s3, const char *key, const char *copy_source, uint64_t len)
{
    /* a range "bytes=0--1" does not exist: an empty object is never copied in parts */
    if (len == 0)
        return -EINVAL;
    struct upload u = { .s3 = s3, .key = key, .copy_source = copy_source, .len = len };
    return run_upload(&u);
}

/* ---- uploads nobody will complete (a daemon that died during one) ---- */

#define UPLOADS_PAGE_MAX (16u << 20) /* one ListMultipartUploads page: 1000 uploads */

/* One ListMultipartUploads page of the uploads below full_prefix (the bucket prefix included),
 * from the markers on. 0, -EOPNOTSUPP (the server has no such listing), or -errno (logged). */
static int uploads_page(struct s3_store *s3, const char *full_prefix, const char *key_marker,
                        const char *id_marker, struct s3_uploads *page)
{
    char *query = NULL;
    struct s3_response resp;
    int rc = s3_query_add(&query, "key-marker", key_marker); /* the canonical order: sorted */
    if (rc == 0)
        rc = s3_query_add(&query, "prefix", full_prefix);
    if (rc == 0)
        rc = s3_query_add(&query, "upload-id-marker", id_marker);
    if (rc == 0)
        rc = s3_query_add(&query, "uploads", "");
    struct s3_request req = {
        .method = "GET", .key = NULL, .query = query, .max_body = UPLOADS_PAGE_MAX
    };
    if (rc == 0)
        rc = s3_perform(s3, &req, &resp);
    free(query);
    if (rc != 0)
        return rc;
    if (resp.status == 501 || resp.status == 405) {
        log_debug("s3 GET %s: the server has no ListMultipartUploads (HTTP %ld)", s3->bucket,
                  resp.status);
        rc = -EOPNOTSUPP;
    } else
        rc = s3_status_errno(s3, "GET (ListMultipartUploads)", full_prefix, &resp);
    if (rc == 0 && s3_parse_uploads((const char *)resp.body.data, resp.body.len, page) != 0) {
        log_error("s3 GET %s/%s: the answer to ListMultipartUploads is not its XML", s3->bucket,
                  full_prefix);
        rc = -EIO;
    }
    s3_response_free(&resp);
    return rc == -ENOENT ? -EIO : rc;
}

/* AbortMultipartUpload of a listed upload (its key with the bucket prefix). 0 (also when it
 * is gone already) or -errno (logged). */
static int abort_listed(struct s3_store *s3, const char *full_key, const char *id)
{
    const char *key = full_key + strlen(s3->prefix);
    char *query = NULL;
    struct s3_response resp;
    int rc = upload_query(id, &query);
    struct s3_request req = {
        .method = "DELETE", .key = key, .query = query, .max_body = ANSWER_MAX
    };
    if (rc == 0)
        rc = s3_perform(s3, &req, &resp);
    free(query);
    if (rc != 0)
        return rc;
    if (resp.status != 404) /* NoSuchUpload: aborted or completed meanwhile */
        rc = s3_status_errno(s3, "DELETE (AbortMultipartUpload)", key, &resp);
    s3_response_free(&resp);
    if (rc == 0)
        log_info("s3 %s/%s: multipart upload %s, never completed, aborted", s3->bucket, full_key,
                 id);
    return rc;
}

/* The uploads of one page below full_prefix aborted (any other the server sent left alone).
 * The number that could not be. */
static size_t abort_page(struct s3_store *s3, const char *full_prefix,
                         const struct s3_uploads *page, size_t *aborted)
{
    size_t failed = 0, plen = strlen(full_prefix);
    for (size_t i = 0; i < page->n; i++) {
        if (strncmp(page->items[i].key, full_prefix, plen) != 0)
            continue;
        if (abort_listed(s3, page->items[i].key, page->items[i].id) == 0)
            (*aborted)++;
        else
            failed++;
    }
    return failed;
}

/* The markers of the page after page: 0, or -EIO when a truncated page names none that moves
 * on (a broken server would have us list the same page forever). */
static int next_markers(const struct s3_store *s3, struct s3_uploads *page, char **key_marker,
                        char **id_marker)
{
    int same = page->next_key && *key_marker && strcmp(page->next_key, *key_marker) == 0 &&
               page->next_id && *id_marker && strcmp(page->next_id, *id_marker) == 0;
    if (!page->next_key || same) {
        log_error("s3 GET %s: ListMultipartUploads is truncated but names no next page",
                  s3->bucket);
        return -EIO;
    }
    free(*key_marker);
    free(*id_marker);
    *key_marker = page->next_key;
    *id_marker = page->next_id;
    page->next_key = page->next_id = NULL;
    return 0;
}

int s3_abort_uploads(struct s3_store *s3, const char *prefix, size_t *aborted)
{
    char *full = NULL, *key_marker = NULL, *id_marker = NULL;
    size_t failed = 0;
    int rc = asprintf(&full, "%s%s", s3->prefix, prefix) < 0 ? -ENOMEM : 0, more = 1;
    *aborted = 0;
    while (rc == 0 && more) {
        struct s3_uploads page;
        rc = uploads_page(s3, full, key_marker, id_marker, &page);
        if (rc != 0)
            break;
        failed += abort_page(s3, full, &page, aborted);
        more = page.truncated;
        if (more)
            rc = next_markers(s3, &page, &key_marker, &id_marker);
        s3_uploads_free(&page);
    }
    free(full);
    free(key_marker);
    free(id_marker);
    return rc == 0 && failed ? -EIO : rc;
}
