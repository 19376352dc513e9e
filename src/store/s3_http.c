/*
 * s3_http: one S3 request, signed, over a pool of curl easy handles, with retries.
 *
 * Parallelism comes from the callers: every FUSE worker (and every prefetch) that needs an
 * object takes a handle from the pool and performs its request; at most max_requests run at
 * once and the rest wait for a handle. A handle keeps its connection alive between requests.
 *
 * Retries: connection failures, timeouts, truncated bodies, 5xx, 429 and SlowDown are retried
 * with full-jitter exponential backoff (100 ms doubling, at most 5 s a wait), bounded by the
 * attempt count and by the total time of the request. One log line says what finally failed.
 *
 * Timeouts: an attempt may take the store's timeout to connect, and is given up once it moves
 * fewer than LOW_SPEED_BYTES a second, either way, for that long (a stall: a server that does
 * not answer, a body that stops); its total time grows with its size, so that a big PUT or
 * part on a slow link is never cut off while its bytes flow. Requests whose server works before
 * it answers (a copy, a Complete) get their extra_time in both.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "h5osfs/util/clock.h"
#include "h5osfs/util/bigbuf.h"
#include "h5osfs/util/grow.h"
#include "h5osfs/util/log.h"
#include "h5osfs/store/sigv4.h"
#include "h5osfs/store/s3_int.h"

#define BACKOFF_BASE 0.1
#define BACKOFF_MAX 5.0
/* Slower than this for a whole timeout, a transfer is stalled. Low, because max_requests
 * transfers share the link: 16 parts at once on a 1 Mbit/s link move 8 KiB/s each. */
#define LOW_SPEED_BYTES 1024.0
#define NO_TOTAL_LIMIT 1e9 /* seconds: past this a total time is no limit at all */

/* ---- the pool ---- */

/* A handle and the socket of its connection (curl keeps one per handle here): what
 * on_progress sets the low-water mark of. */
struct s3_conn {
    CURL *h;
    curl_socket_t fd; /* CURL_SOCKET_BAD while it has none */
};

struct s3_pool {
    pthread_mutex_t lock;
    pthread_cond_t freed;
    struct s3_conn **idle; /* handles not in use */
    size_t n_idle;
    unsigned size, created;
};

int s3_pool_new(unsigned size, struct s3_pool **out)
{
    struct s3_pool *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->size = size ? size : 1;
    p->idle = calloc(p->size, sizeof *p->idle);
    if (!p->idle || pthread_mutex_init(&p->lock, NULL) != 0 ||
        pthread_cond_init(&p->freed, NULL) != 0) {
        free(p->idle);
        free(p);
        return -ENOMEM;
    }
    *out = p;
    return 0;
}

/* The handle first: closing its connection calls on_close_socket with c. */
static void conn_free(struct s3_conn *c)
{
    curl_easy_cleanup(c->h);
    free(c);
}

void s3_pool_free(struct s3_pool *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_idle; i++)
        conn_free(p->idle[i]);
    free(p->idle);
    pthread_cond_destroy(&p->freed);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

static struct s3_conn *conn_new(void)
{
    struct s3_conn *c = malloc(sizeof *c);
    if (c && (c->h = curl_easy_init()) == NULL) {
        free(c);
        c = NULL;
    }
    if (c)
        c->fd = CURL_SOCKET_BAD;
    return c;
}

static struct s3_conn *pool_take(struct s3_pool *p)
{
    struct s3_conn *c = NULL;
    pthread_mutex_lock(&p->lock);
    while (p->n_idle == 0 && p->created >= p->size)
        pthread_cond_wait(&p->freed, &p->lock);
    if (p->n_idle > 0) {
        c = p->idle[--p->n_idle];
    } else {
        c = conn_new();
        if (c)
            p->created++;
    }
    pthread_mutex_unlock(&p->lock);
    return c;
}

static void pool_give(struct s3_pool *p, struct s3_conn *c)
{
    pthread_mutex_lock(&p->lock);
    p->idle[p->n_idle++] = c;
    pthread_cond_signal(&p->freed);
    pthread_mutex_unlock(&p->lock);
}

/* A handle whose transfer failed may hold a broken connection: replace it. */
static void pool_discard(struct s3_pool *p, struct s3_conn *c)
{
    conn_free(c);
    pthread_mutex_lock(&p->lock);
    p->created--;
    pthread_cond_signal(&p->freed);
    pthread_mutex_unlock(&p->lock);
}

/* ---- building a request ---- */

struct transfer {
    const struct s3_request *req;
    struct s3_response *resp;
    size_t sent; /* PUT body bytes handed to curl */
    int too_big;
    int read_error; /* errno of a failed read of a file body */
    struct s3_conn *conn;
    int batch;      /* the body may be received in batches (on_progress) */
    int lowat;      /* the socket's SO_RCVLOWAT as this transfer set it (0: untouched) */
    double started; /* clock_monotonic() when the request went out */
};

static void amz_date(char out[17])
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

static int object_path(const struct s3_store *s3, const char *key, char **out)
{
    char *enc = NULL, *full = NULL;
    if (!key)
        return asprintf(out, "%s/", s3->path_base) < 0 ? -ENOMEM : 0;
    if (asprintf(&full, "%s%s", s3->prefix, key) < 0)
        return -ENOMEM;
    int rc = sigv4_uri_encode(full, strlen(full), 1, &enc);
    free(full);
    if (rc != 0)
        return rc;
    rc = asprintf(out, "%s/%s", s3->path_base, enc) < 0 ? -ENOMEM : 0;
    free(enc);
    return rc;
}

static struct curl_slist *add_header(struct curl_slist *list, const char *name, const char *value,
                                     int *failed)
{
    char *line = NULL;
    if (asprintf(&line, "%s: %s", name, value) < 0) {
        *failed = 1;
        return list;
    }
    struct curl_slist *n = curl_slist_append(list, line);
    free(line);
    if (!n)
        *failed = 1;
    return n ? n : list;
}

/* Every header we send, signed (except what curl adds itself, which S3 does not need signed). */
static int build_headers(const struct s3_store *s3, const struct s3_request *req, const char *path,
                         struct curl_slist **out)
{
    char date[17], hash[65];
    struct sigv4_header h[11];
    size_t n = 0;
    int failed = 0;
    amz_date(date);
    if (req->payload_hash)
        snprintf(hash, sizeof hash, "%s", req->payload_hash);
    else if (req->body_file)
        return -EINVAL; /* hashing a file each attempt would read it twice as often */
    else if (req->body && sigv4_sha256_hex(req->body, req->body_len, hash) != 0)
        return -ENOMEM;
    else if (!req->body)
        snprintf(hash, sizeof hash, "UNSIGNED-PAYLOAD");
    h[n++] = (struct sigv4_header){ "host", s3->host };
    h[n++] = (struct sigv4_header){ "x-amz-content-sha256", hash };
    h[n++] = (struct sigv4_header){ "x-amz-date", date };
    if (req->range)
        h[n++] = (struct sigv4_header){ "range", req->range };
    if (req->content_md5)
        h[n++] = (struct sigv4_header){ "content-md5", req->content_md5 };
    if (req->copy_source)
        h[n++] = (struct sigv4_header){ "x-amz-copy-source", req->copy_source };
    if (req->copy_range)
        h[n++] = (struct sigv4_header){ "x-amz-copy-source-range", req->copy_range };
    if (req->if_match)
        h[n++] = (struct sigv4_header){ "if-match", req->if_match };
    if (req->if_none_match)
        h[n++] = (struct sigv4_header){ "if-none-match", req->if_none_match };
    if (s3->token && !s3->cfg.no_sign)
        h[n++] = (struct sigv4_header){ "x-amz-security-token", s3->token };
    struct curl_slist *list = NULL;
    for (size_t i = 1; i < n; i++) /* curl sends Host itself, from the URL */
        list = add_header(list, h[i].name, h[i].value, &failed);
    list = add_header(list, "Expect", "", &failed); /* no 100-continue round trip */
    if (!s3->cfg.no_sign) {
        struct sigv4_request sr = { req->method, path, req->query, h, n, hash };
        struct sigv4_credentials cred = { s3->key_id, s3->secret, s3->token };
        struct sigv4_scope scope = { date, s3->region, "s3" };
        char *auth = NULL;
        if (sigv4_authorization(&sr, 0, &cred, &scope, &auth) != 0)
            failed = 1;
        else
            list = add_header(list, "Authorization", auth, &failed);
        free(auth);
    }
    if (failed) {
        curl_slist_free_all(list);
        return -ENOMEM;
    }
    *out = list;
    return 0;
}

/* ---- curl callbacks ---- */

/*
 * A server that writes a body in small pieces (s3rver: 64 KiB) wakes the receiving thread
 * once per piece: a poll, a recv and a callback each, and on a full read those wakeups cost
 * more of the daemon's CPU than the bytes. The socket's receive low-water mark makes poll wait
 * until a batch is there. Never more than is still to come, so the last bytes never wait for a
 * timeout; never more than BATCH_TIME's worth at the rate the body came so far, so a slow link
 * still shows curl's stall detection bytes every fraction of a second. Plain http only: on
 * https the bytes on the socket are TLS records, not the body. The mark is back at 1 when the
 * body is complete, before the connection serves another request.
 */
#define BATCH (256 << 10)
#define BATCH_TIME 0.05 /* seconds */
static void set_lowat(struct transfer *t, int want)
{
    curl_socket_t fd = t->conn->fd;
    if (want == t->lowat || fd == CURL_SOCKET_BAD)
        return;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &want, sizeof want) == 0)
        t->lowat = want;
}

/* curl opened the connection's socket, or closed it: c->fd follows it. */
static int on_socket(void *ctx, curl_socket_t fd, curlsocktype purpose)
{
    if (purpose == CURLSOCKTYPE_IPCXN)
        ((struct s3_conn *)ctx)->fd = fd;
    return CURL_SOCKOPT_OK;
}

static int on_close_socket(void *ctx, curl_socket_t fd)
{
    struct s3_conn *c = ctx;
    if (c->fd == fd)
        c->fd = CURL_SOCKET_BAD;
    return close(fd);
}

/* Once per receive, after the bytes went through on_body: resp->body.len is all that left the
 * socket, so content_length - body.len is exactly what is still to come on it. */
static int on_progress(void *ctx, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    struct transfer *t = ctx;
    const struct s3_response *resp = t->resp;
    if (!resp->has_length || resp->body.len == 0 || resp->body.len >= resp->content_length) {
        set_lowat(t, t->lowat ? 1 : 0);
        return 0;
    }
    uint64_t left = resp->content_length - resp->body.len;
    double elapsed = clock_monotonic() - t->started;
    double paced = elapsed > 0 ? (double)resp->body.len / elapsed * BATCH_TIME : 0;
    uint64_t want = left < BATCH ? left : BATCH;
    if (paced < (double)want)
        want = (uint64_t)paced;
    set_lowat(t, want > 1 ? (int)want : 1);
    return 0;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *ctx)
{
    struct transfer *t = ctx;
    size_t n = size * nmemb;
    struct store_buf *b = &t->resp->body;
    if (b->len + n > t->req->max_body) {
        t->too_big = 1;
        return 0; /* aborts the transfer */
    }
    if (b->len + n + 1 > b->cap) {
        unsigned char *nd = grow_array(b->data, &b->cap, b->len + n + 1, 1, 16384);
        if (!nd)
            return 0;
        b->data = nd;
    }
    memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
    return n;
}

/* A body of announced length gets its buffer at once: growing it by doubling copies a 1 MiB
 * chunk about twice over, and faults in twice its pages (a bigbuf: huge pages when it fills
 * them). A length past RESERVE_MAX is not believed up front (a hostile or broken server); such
 * a body grows as it comes. */
#define RESERVE_MAX (256u << 20)
static void reserve_body(struct transfer *t)
{
    struct store_buf *b = &t->resp->body;
    uint64_t want = t->resp->content_length + 1;
    if (strcmp(t->req->method, "HEAD") == 0 || b->len != 0 || want > RESERVE_MAX || want <= b->cap)
        return;
    size_t cap;
    unsigned char *nd = bigbuf_alloc((size_t)want, &cap);
    if (!nd)
        return;    /* on_body grows it, or fails, as before */
    free(b->data); /* empty: b->len is 0 */
    b->data = nd;
    b->cap = cap;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *ctx)
{
    struct transfer *t = ctx;
    size_t n = size * nmemb;
    char line[512];
    snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line ? n : sizeof line - 1), data);
    line[strcspn(line, "\r\n")] = '\0';
    if (strncasecmp(line, "HTTP/", 5) == 0) { /* a new response (after a redirect) */
        t->resp->has_length = 0;
        t->resp->range_start = -1;
        t->resp->etag[0] = '\0';
    } else if (strncasecmp(line, "content-length:", 15) == 0) {
        t->resp->content_length = strtoull(line + 15, NULL, 10);
        t->resp->has_length = 1;
        if (t->resp->content_length > t->req->max_body && strcmp(t->req->method, "HEAD") != 0) {
            t->too_big = 1;
            return 0;
        }
        reserve_body(t);
    } else if (strncasecmp(line, "content-range:", 14) == 0) {
        const char *v = line + 14 + strspn(line + 14, " \t");
        if (strncasecmp(v, "bytes ", 6) == 0 && v[6] >= '0' && v[6] <= '9')
            t->resp->range_start = (int64_t)strtoull(v + 6, NULL, 10);
    } else if (strncasecmp(line, "etag:", 5) == 0) {
        const char *v = line + 5 + strspn(line + 5, " \t\"");
        snprintf(t->resp->etag, sizeof t->resp->etag, "%.*s", (int)strcspn(v, "\""), v);
    } else if (strncasecmp(line, "last-modified:", 14) == 0) {
        time_t when = curl_getdate(line + 14, NULL);
        t->resp->mtime = when > 0 ? (double)when : 0;
    }
    return n;
}

/* The next bytes of a file body; a read error or a file shorter than promised aborts the
 * transfer (retrying would read the same). */
static size_t upload_from_file(struct transfer *t, char *buf, size_t n)
{
    const struct s3_source *src = t->req->body_file;
    ssize_t got;
    do
        got = pread(src->fd, buf, n, (off_t)(src->off + t->sent));
    while (got < 0 && errno == EINTR);
    if (got <= 0) {
        t->read_error = got < 0 ? errno : EIO;
        return CURL_READFUNC_ABORT;
    }
    t->sent += (size_t)got;
    return (size_t)got;
}

static size_t on_upload(char *buf, size_t size, size_t nmemb, void *ctx)
{
    struct transfer *t = ctx;
    size_t room = size * nmemb, left = t->req->body_len - t->sent;
    size_t n = left < room ? left : room;
    if (n > 0 && t->req->body_file)
        return upload_from_file(t, buf, n);
    memcpy(buf, (const char *)t->req->body + t->sent, n);
    t->sent += n;
    return n;
}

/* curl sends a body again from the start when a kept-alive connection turns out dead. */
static int on_seek(void *ctx, curl_off_t offset, int origin)
{
    struct transfer *t = ctx;
    if (origin != SEEK_SET || offset < 0 || (uint64_t)offset > t->req->body_len)
        return CURL_SEEKFUNC_CANTSEEK;
    t->sent = (size_t)offset;
    return CURL_SEEKFUNC_OK;
}

static void set_method(CURL *h, const struct s3_request *req, struct transfer *t)
{
    if (strcmp(req->method, "HEAD") == 0) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (strcmp(req->method, "PUT") == 0) {
        curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(h, CURLOPT_READFUNCTION, on_upload);
        curl_easy_setopt(h, CURLOPT_READDATA, t);
        curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, on_seek);
        curl_easy_setopt(h, CURLOPT_SEEKDATA, t);
        curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)req->body_len);
    } else if (strcmp(req->method, "POST") == 0) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, req->body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
    } else if (strcmp(req->method, "GET") != 0) {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req->method);
    }
}

/* Seconds the bytes of req take at the low-speed rate: what it sends, and what a GET may
 * receive (its limit; none when that is unbounded). */
static double size_time(const struct s3_request *req)
{
    double bytes = (double)req->body_len;
    if (strcmp(req->method, "GET") == 0)
        bytes +=
            req->max_body == SIZE_MAX ? NO_TOTAL_LIMIT * LOW_SPEED_BYTES : (double)req->max_body;
    return bytes / LOW_SPEED_BYTES;
}

/* The three limits of one attempt (see the top of this file). */
static void set_timeouts(const struct s3_store *s3, CURL *h, const struct s3_request *req)
{
    double stall = s3->cfg.timeout + req->extra_time;
    double total = stall + size_time(req);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(s3->cfg.timeout * 1000));
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, (long)LOW_SPEED_BYTES);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, stall < 1 ? 1L : (long)(stall + 0.5));
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, total >= NO_TOTAL_LIMIT ? 0L : (long)(total * 1000));
}

/* curl's receive buffer (its default is 16 KiB): every fill of it is a poll, a recv and a
 * callback, so a 1 MiB chunk took ~64 wakeups of its thread; curl takes up to 512 KiB. */
#define RECEIVE_BUFFER (512L << 10)

static int setup(const struct s3_store *s3, struct s3_conn *c, const struct s3_request *req,
                 struct transfer *t, struct curl_slist *headers, const char *url)
{
    CURL *h = c->h;
    curl_easy_reset(h);
    int ok = curl_easy_setopt(h, CURLOPT_URL, url) == CURLE_OK;
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L); /* threads: no SIGALRM timeouts */
    set_timeouts(s3, h, req);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(h, CURLOPT_BUFFERSIZE, (long)RECEIVE_BUFFER);
    curl_easy_setopt(h, CURLOPT_SOCKOPTFUNCTION, on_socket);
    curl_easy_setopt(h, CURLOPT_SOCKOPTDATA, c);
    curl_easy_setopt(h, CURLOPT_CLOSESOCKETFUNCTION, on_close_socket);
    curl_easy_setopt(h, CURLOPT_CLOSESOCKETDATA, c);
    if (t->batch) {
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, t);
    }
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, t);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "h5osfs/" H5OSFS_VERSION);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    if (s3->ca_file)
        curl_easy_setopt(h, CURLOPT_CAINFO, s3->ca_file);
    set_method(h, req, t);
    return ok ? 0 : -EINVAL;
}

/* ---- one attempt, and the retry loop ---- */

enum outcome { DONE, RETRY, FAIL };

struct attempt {
    CURLcode curl;
    int too_big;    /* the body exceeded the caller's limit */
    int read_error; /* errno of a failed read of a file body */
    char code[64], msg[160];
};

static enum outcome classify(const struct s3_response *resp, struct attempt *a,
                             const struct transfer *t)
{
    if (t->too_big) {
        a->too_big = 1;
        return FAIL;
    }
    if (t->read_error) {
        a->read_error = t->read_error;
        return FAIL;
    }
    if (a->curl != CURLE_OK)
        return a->curl == CURLE_URL_MALFORMAT || a->curl == CURLE_UNSUPPORTED_PROTOCOL ||
                       a->curl == CURLE_OUT_OF_MEMORY
                   ? FAIL
                   : RETRY;
    if ((resp->status >= 300 || (t->req->error_in_ok && resp->status / 100 == 2)) &&
        resp->body.len > 0)
        s3_parse_error((const char *)resp->body.data, resp->body.len, a->code, sizeof a->code,
                       a->msg, sizeof a->msg);
    if (resp->status >= 500 || resp->status == 429 || strcmp(a->code, "SlowDown") == 0 ||
        strcmp(a->code, "RequestTimeout") == 0 || strcmp(a->code, "InternalError") == 0)
        return RETRY;
    /* a body shorter than its Content-Length that curl did not notice (HEAD has none) */
    if (resp->status / 100 == 2 && resp->has_length && strcmp(t->req->method, "HEAD") != 0 &&
        resp->body.len != resp->content_length)
        return RETRY;
    return DONE;
}

static enum outcome attempt_once(struct s3_store *s3, const struct s3_request *req, const char *url,
                                 const char *path, struct s3_response *resp, struct attempt *a)
{
    struct curl_slist *headers = NULL;
    struct transfer t = { req, resp, 0, 0, 0, NULL, 0, 0, 0 };
    memset(resp, 0, sizeof *resp);
    resp->range_start = -1;
    memset(a, 0, sizeof *a);
    t.batch = strcmp(req->method, "GET") == 0 && strncmp(url, "http://", 7) == 0;
    struct s3_conn *c = pool_take(s3->pool);
    if (!c || build_headers(s3, req, path, &headers) != 0 || setup(s3, c, req, &t, headers, url)) {
        if (c)
            pool_give(s3->pool, c);
        curl_slist_free_all(headers);
        a->curl = CURLE_OUT_OF_MEMORY;
        return FAIL;
    }
    t.conn = c;
    t.started = clock_monotonic();
    a->curl = curl_easy_perform(c->h);
    curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &resp->status);
    curl_slist_free_all(headers);
    if (t.lowat > 1)
        set_lowat(&t, 1); /* a body that ended short: the next request must not wait */
    if (a->curl == CURLE_OK && t.lowat <= 1)
        pool_give(s3->pool, c);
    else
        pool_discard(s3->pool, c); /* a connection left waiting for bytes is no use */
    if (!resp->body.data && (resp->body.data = malloc(1)) != NULL) {
        resp->body.data[0] = '\0';
        resp->body.cap = 1;
    }
    return classify(resp, a, &t);
}

static double backoff(unsigned attempt)
{
    unsigned r = 0;
    if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
        r = (unsigned)time(NULL);
    double cap = BACKOFF_BASE * (double)(1u << (attempt < 10 ? attempt : 10));
    if (cap > BACKOFF_MAX)
        cap = BACKOFF_MAX;
    return cap * ((double)r / 4294967296.0); /* full jitter */
}

static void sleep_for(double s)
{
    struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* What finally went wrong, after "s3 METHOD bucket/key: " in a log line. retried: the
 * attempts ran out (a status that is simply the answer, such as 404, was not retried). */
static void describe_failure(const struct s3_response *resp, const struct attempt *a,
                             unsigned tries, int retried, char *buf, size_t len)
{
    char attempts[40] = "";
    if (retried)
        snprintf(attempts, sizeof attempts, " after %u attempt%s", tries, tries == 1 ? "" : "s");
    if (a->read_error)
        snprintf(buf, len, "reading the bytes to send failed: %s", strerror(a->read_error));
    else if (a->curl != CURLE_OK)
        snprintf(buf, len, "%s%s", curl_easy_strerror(a->curl), attempts);
    else if (resp->status == 403)
        snprintf(buf, len, "HTTP 403 %s: %s", a->code[0] ? a->code : "Forbidden",
                 strcmp(a->code, "SignatureDoesNotMatch") == 0
                     ? "the server refused the request signature (wrong secret key?)"
                 : a->msg[0] ? a->msg
                             : "access denied");
    else
        snprintf(buf, len, "HTTP %ld%s%s%s%s%s", resp->status, a->code[0] ? " " : "", a->code,
                 a->msg[0] ? ": " : "", a->msg, attempts);
}

static void report_failure(const struct s3_store *s3, const struct s3_request *req,
                           const struct s3_response *resp, const struct attempt *a, unsigned tries,
                           int retried)
{
    char what[320];
    describe_failure(resp, a, tries, retried, what, sizeof what);
    if (req->why)
        snprintf(req->why, req->why_len, "%s", what);
    else if (req->list_prefix)
        log_error("s3 LIST %s/%s%s: %s", s3->bucket, s3->prefix, req->list_prefix, what);
    else
        log_error("s3 %s %s/%s%s: %s", req->method, s3->bucket, s3->prefix,
                  req->key ? req->key : "", what);
}

int s3_perform(struct s3_store *s3, const struct s3_request *req, struct s3_response *resp)
{
    char *path = NULL, *url = NULL;
    struct attempt a;
    int rc = object_path(s3, req->key, &path);
    if (rc != 0)
        return rc;
    if (asprintf(&url, "%s%s%s%s", s3->base_url, path + strlen(s3->path_base),
                 req->query && *req->query ? "?" : "", req->query ? req->query : "") < 0) {
        free(path);
        return -ENOMEM;
    }
    double start = clock_monotonic();
    unsigned tries = 0;
    enum outcome o;
    for (;;) {
        o = attempt_once(s3, req, url, path, resp, &a);
        tries++;
        if (o != RETRY || tries > s3->cfg.retries)
            break;
        double wait = backoff(tries);
        /* the bytes a request sends take their time on every attempt: that is no failing */
        double budget =
            s3->cfg.retry_time + req->extra_time + (double)req->body_len / LOW_SPEED_BYTES;
        if (clock_monotonic() - start + wait > budget)
            break;
        log_debug("s3 %s %s: retrying (%s, HTTP %ld %s)", req->method, req->key ? req->key : "/",
                  curl_easy_strerror(a.curl), resp->status, a.code);
        s3_response_free(resp);
        atomic_fetch_add_explicit(&s3->base.counters.retries, 1, memory_order_relaxed);
        sleep_for(wait);
    }
    free(path);
    free(url);
    if (o == DONE) {
        if (resp->status == 403 || (req->why && resp->status / 100 != 2))
            report_failure(s3, req, resp, &a, tries, 0);
        return 0; /* the caller maps the status */
    }
    if (a.too_big && req->why)
        snprintf(req->why, req->why_len, "an answer larger than %zu bytes", req->max_body);
    else if (!a.too_big)
        report_failure(s3, req, resp, &a, tries, 1);
    s3_response_free(resp);
    return a.too_big ? -EFBIG : -EIO;
}

void s3_response_free(struct s3_response *resp)
{
    store_buf_free(&resp->body);
}
