/* s3_xml: S3 response bodies parsed with expat (see s3_int.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <expat.h>

#include "h5osfs/util/grow.h"
#include "h5osfs/store/s3_int.h"

#define XML_TEXT_MAX 4096 /* keys are at most 1024 bytes; tokens and messages less */

/* The path of open elements is tracked as a short stack of names; text is collected for the
 * element being closed. */
struct xml_walk {
    const char *path[8];
    char names[8][40];
    int depth;
    char text[XML_TEXT_MAX + 1];
    size_t text_len;
    int overflow;
    void (*on_end)(struct xml_walk *w, const char *name);
    void *ctx;
};

static void XMLCALL on_start(void *data, const XML_Char *name, const XML_Char **attrs)
{
    (void)attrs;
    struct xml_walk *w = data;
    if (w->depth < 8) {
        snprintf(w->names[w->depth], sizeof w->names[0], "%s", name);
        w->path[w->depth] = w->names[w->depth];
    }
    w->depth++;
    w->text_len = 0;
    w->overflow = 0;
}

static void XMLCALL on_text(void *data, const XML_Char *s, int len)
{
    struct xml_walk *w = data;
    if (w->text_len + (size_t)len > XML_TEXT_MAX) {
        w->overflow = 1;
        return;
    }
    memcpy(w->text + w->text_len, s, (size_t)len);
    w->text_len += (size_t)len;
}

static void XMLCALL on_end(void *data, const XML_Char *name)
{
    struct xml_walk *w = data;
    w->text[w->text_len] = '\0';
    if (w->on_end)
        w->on_end(w, name);
    w->depth--;
    w->text_len = 0;
}

/* 1 if the open elements end with parent/name (name is the one closing). */
static int at(const struct xml_walk *w, const char *parent, const char *name)
{
    return w->depth >= 2 && w->depth <= 8 && strcmp(w->path[w->depth - 1], name) == 0 &&
           strcmp(w->path[w->depth - 2], parent) == 0;
}

static int walk(const char *xml, size_t len, struct xml_walk *w)
{
    XML_Parser p = XML_ParserCreate("UTF-8");
    if (!p)
        return -ENOMEM;
    XML_SetUserData(p, w);
    XML_SetElementHandler(p, on_start, on_end);
    XML_SetCharacterDataHandler(p, on_text);
    int ok = XML_Parse(p, xml, (int)len, 1) == XML_STATUS_OK;
    XML_ParserFree(p);
    return ok ? 0 : -EINVAL;
}

/* ---- ListObjectsV2 ---- */

struct list_ctx {
    struct store_list *out;
    size_t cap_objects, cap_prefixes;
    struct store_entry cur;
    int truncated;
    int url_encoded; /* <EncodingType>url: keys and prefixes come URL-encoded */
    int failed;
};

static double parse_iso8601(const char *s)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *rest = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!rest)
        return 0;
    double frac = *rest == '.' ? strtod(rest, NULL) : 0;
    return (double)timegm(&tm) + frac;
}

static void copy_etag(char *dst, size_t len, const char *src)
{
    size_t n = strlen(src);
    if (n >= 2 && src[0] == '"' && src[n - 1] == '"') {
        src++;
        n -= 2;
    }
    snprintf(dst, len, "%.*s", (int)n, src);
}

static int push_object(struct list_ctx *c)
{
    struct store_list *o = c->out;
    if (o->n_objects == c->cap_objects) {
        struct store_entry *n =
            grow_array(o->objects, &c->cap_objects, c->cap_objects + 1, sizeof *n, 64);
        if (!n)
            return -ENOMEM;
        o->objects = n;
    }
    o->objects[o->n_objects++] = c->cur;
    memset(&c->cur, 0, sizeof c->cur);
    return 0;
}

static int push_prefix(struct list_ctx *c, const char *prefix)
{
    struct store_list *o = c->out;
    if (o->n_prefixes == c->cap_prefixes) {
        char **n = grow_array(o->prefixes, &c->cap_prefixes, c->cap_prefixes + 1, sizeof *n, 16);
        if (!n)
            return -ENOMEM;
        o->prefixes = n;
    }
    if (!(o->prefixes[o->n_prefixes] = strdup(prefix)))
        return -ENOMEM;
    o->n_prefixes++;
    return 0;
}

static void list_end(struct xml_walk *w, const char *name)
{
    struct list_ctx *c = w->ctx;
    if (w->overflow) {
        c->failed = -EINVAL;
        return;
    }
    if (at(w, "Contents", "Key")) {
        free(c->cur.key);
        c->cur.key = strdup(w->text);
        if (!c->cur.key)
            c->failed = -ENOMEM;
    } else if (at(w, "Contents", "Size")) {
        c->cur.st.size = strtoull(w->text, NULL, 10);
    } else if (at(w, "Contents", "LastModified")) {
        c->cur.st.mtime = parse_iso8601(w->text);
    } else if (at(w, "Contents", "ETag")) {
        copy_etag(c->cur.st.etag, sizeof c->cur.st.etag, w->text);
    } else if (strcmp(name, "Contents") == 0) {
        if (!c->cur.key)
            memset(&c->cur, 0, sizeof c->cur); /* no key: its fields go with it */
        else if (push_object(c) != 0)
            c->failed = -ENOMEM;
    } else if (at(w, "CommonPrefixes", "Prefix")) {
        if (push_prefix(c, w->text) != 0)
            c->failed = -ENOMEM;
    } else if (at(w, "ListBucketResult", "EncodingType")) {
        c->url_encoded = strcmp(w->text, "url") == 0;
    } else if (at(w, "ListBucketResult", "IsTruncated")) {
        c->truncated = strcmp(w->text, "true") == 0;
    } else if (at(w, "ListBucketResult", "NextContinuationToken")) {
        free(c->out->next_token);
        c->out->next_token = strdup(w->text);
        if (!c->out->next_token)
            c->failed = -ENOMEM;
    }
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* A key S3 URL-encoded (encoding-type=url: %XX for a byte, '+' for a space, as AWS and its
 * SDKs do; Ceph RGW encodes a space as %20 and '+' as %2B), decoded in place. -EINVAL for a
 * broken escape or a NUL byte, which no key holds. */
static int url_decode(char *s)
{
    char *out = s;
    for (const char *in = s; *in; in++) {
        int hi, lo;
        if (*in == '+') {
            *out++ = ' ';
        } else if (*in != '%') {
            *out++ = *in;
        } else if ((hi = hex_digit(in[1])) < 0 || (lo = hex_digit(in[2])) < 0 ||
                   (hi == 0 && lo == 0)) {
            return -EINVAL;
        } else {
            *out++ = (char)(hi << 4 | lo);
            in += 2;
        }
    }
    *out = '\0';
    return 0;
}

static int url_decode_page(struct store_list *l)
{
    for (size_t i = 0; i < l->n_objects; i++)
        if (url_decode(l->objects[i].key) != 0)
            return -EINVAL;
    for (size_t i = 0; i < l->n_prefixes; i++)
        if (url_decode(l->prefixes[i]) != 0)
            return -EINVAL;
    return 0;
}

static int by_entry_key(const void *a, const void *b)
{
    return strcmp(((const struct store_entry *)a)->key, ((const struct store_entry *)b)->key);
}

static int by_string(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* store.h promises a page sorted by key in byte order (the namespace's directory listings
 * are sorted because the pages are). S3 sends them so; a server that does not is put right
 * here rather than trusted. */
static void sort_page(struct store_list *l)
{
    if (l->n_objects > 1)
        qsort(l->objects, l->n_objects, sizeof *l->objects, by_entry_key);
    if (l->n_prefixes > 1)
        qsort(l->prefixes, l->n_prefixes, sizeof *l->prefixes, by_string);
}

int s3_parse_list(const char *xml, size_t len, struct store_list *out, int *truncated)
{
    struct list_ctx c = { .out = out };
    struct xml_walk w = { .on_end = list_end, .ctx = &c };
    memset(out, 0, sizeof *out);
    int rc = walk(xml, len, &w);
    free(c.cur.key);
    if (rc == 0)
        rc = c.failed;
    if (rc == 0 && c.url_encoded)
        rc = url_decode_page(out);
    if (rc != 0) {
        store_list_free(out);
        return rc;
    }
    sort_page(out);
    *truncated = c.truncated;
    if (!c.truncated) {
        free(out->next_token);
        out->next_token = NULL;
    }
    return 0;
}

/* ---- <Error> ---- */

struct error_ctx {
    char *code, *msg;
    size_t code_len, msg_len;
};

static void error_end(struct xml_walk *w, const char *name)
{
    (void)name;
    struct error_ctx *c = w->ctx;
    if (at(w, "Error", "Code"))
        snprintf(c->code, c->code_len, "%s", w->text);
    else if (at(w, "Error", "Message"))
        snprintf(c->msg, c->msg_len, "%s", w->text);
}

void s3_parse_error(const char *xml, size_t len, char *code, size_t code_len, char *msg,
                    size_t msg_len)
{
    struct error_ctx c = { code, msg, code_len, msg_len };
    struct xml_walk w = { .on_end = error_end, .ctx = &c };
    code[0] = msg[0] = '\0';
    if (xml && len > 0)
        (void)walk(xml, len, &w); /* not XML (a proxy's page): no code, the status says it */
}

/* ---- multipart uploads ---- */

struct initiate_ctx {
    char *id;
    size_t id_len;
    int found;
};

static void initiate_end(struct xml_walk *w, const char *name)
{
    (void)name;
    struct initiate_ctx *c = w->ctx;
    if (!at(w, "InitiateMultipartUploadResult", "UploadId") || w->overflow || !w->text[0] ||
        strlen(w->text) >= c->id_len)
        return;
    snprintf(c->id, c->id_len, "%s", w->text);
    c->found = 1;
}

int s3_parse_initiate(const char *xml, size_t len, char *upload_id, size_t id_len)
{
    struct initiate_ctx c = { upload_id, id_len, 0 };
    struct xml_walk w = { .on_end = initiate_end, .ctx = &c };
    upload_id[0] = '\0';
    int rc = xml && len > 0 ? walk(xml, len, &w) : -EINVAL;
    return rc == 0 && c.found ? 0 : -EINVAL;
}

struct complete_ctx {
    struct error_ctx err;
    char root[40];
};

static void complete_end(struct xml_walk *w, const char *name)
{
    struct complete_ctx *c = w->ctx;
    if (w->depth == 1)
        snprintf(c->root, sizeof c->root, "%s", name);
    w->ctx = &c->err;
    error_end(w, name);
    w->ctx = c;
}

int s3_parse_complete(const char *xml, size_t len, char *code, size_t code_len, char *msg,
                      size_t msg_len)
{
    struct complete_ctx c = { { code, msg, code_len, msg_len }, "" };
    struct xml_walk w = { .on_end = complete_end, .ctx = &c };
    code[0] = msg[0] = '\0';
    if (!xml || len == 0 || walk(xml, len, &w) != 0)
        return -EINVAL;
    if (strcmp(c.root, "CompleteMultipartUploadResult") == 0)
        return 0;
    return strcmp(c.root, "Error") == 0 ? -EIO : -EINVAL;
}

struct copy_ctx {
    struct error_ctx err;
    char root[40];
    char *etag;
    size_t etag_len;
};

static void copy_end(struct xml_walk *w, const char *name)
{
    struct copy_ctx *c = w->ctx;
    if (w->depth == 1)
        snprintf(c->root, sizeof c->root, "%s", name);
    else if (!w->overflow && w->depth == 2 && strcmp(name, "ETag") == 0)
        copy_etag(c->etag, c->etag_len, w->text);
    w->ctx = &c->err;
    error_end(w, name);
    w->ctx = c;
}

int s3_parse_copy_result(const char *xml, size_t len, char *etag, size_t etag_len, char *code,
                         size_t code_len, char *msg, size_t msg_len)
{
    struct copy_ctx c = { { code, msg, code_len, msg_len }, "", etag, etag_len };
    struct xml_walk w = { .on_end = copy_end, .ctx = &c };
    etag[0] = code[0] = msg[0] = '\0';
    if (!xml || len == 0 || walk(xml, len, &w) != 0)
        return -EINVAL;
    if (strcmp(c.root, "Error") == 0)
        return -EIO;
    int result = strcmp(c.root, "CopyPartResult") == 0 || strcmp(c.root, "CopyObjectResult") == 0;
    return result && etag[0] ? 0 : -EINVAL;
}

/* ---- ListMultipartUploads ---- */

struct uploads_ctx {
    struct s3_uploads *out;
    size_t cap;
    struct s3_upload_entry cur;
    int failed;
};

static int set_text(char **dst, const char *text)
{
    free(*dst);
    *dst = strdup(text);
    return *dst ? 0 : -ENOMEM;
}

static int push_upload(struct uploads_ctx *c)
{
    struct s3_uploads *o = c->out;
    if (!c->cur.key || !c->cur.id) { /* half an entry: nothing to abort */
        free(c->cur.key);
        free(c->cur.id);
        memset(&c->cur, 0, sizeof c->cur);
        return 0;
    }
    if (o->n == c->cap) {
        struct s3_upload_entry *n = grow_array(o->items, &c->cap, c->cap + 1, sizeof *n, 16);
        if (!n)
            return -ENOMEM;
        o->items = n;
    }
    o->items[o->n++] = c->cur;
    memset(&c->cur, 0, sizeof c->cur);
    return 0;
}

static void uploads_end(struct xml_walk *w, const char *name)
{
    struct uploads_ctx *c = w->ctx;
    int rc = 0;
    if (w->overflow)
        rc = -EINVAL;
    else if (at(w, "Upload", "Key"))
        rc = set_text(&c->cur.key, w->text);
    else if (at(w, "Upload", "UploadId"))
        rc = set_text(&c->cur.id, w->text);
    else if (strcmp(name, "Upload") == 0 && w->depth == 2)
        rc = push_upload(c);
    else if (at(w, "ListMultipartUploadsResult", "IsTruncated"))
        c->out->truncated = strcmp(w->text, "true") == 0;
    else if (at(w, "ListMultipartUploadsResult", "NextKeyMarker"))
        rc = set_text(&c->out->next_key, w->text);
    else if (at(w, "ListMultipartUploadsResult", "NextUploadIdMarker"))
        rc = set_text(&c->out->next_id, w->text);
    else if (w->depth == 1 && strcmp(name, "ListMultipartUploadsResult") != 0)
        rc = -EINVAL;
    if (rc != 0 && c->failed == 0)
        c->failed = rc;
}

int s3_parse_uploads(const char *xml, size_t len, struct s3_uploads *out)
{
    struct uploads_ctx c = { .out = out };
    struct xml_walk w = { .on_end = uploads_end, .ctx = &c };
    memset(out, 0, sizeof *out);
    int rc = xml && len > 0 ? walk(xml, len, &w) : -EINVAL;
    free(c.cur.key);
    free(c.cur.id);
    if (rc == 0)
        rc = c.failed;
    if (rc != 0)
        s3_uploads_free(out);
    return rc;
}

void s3_uploads_free(struct s3_uploads *u)
{
    for (size_t i = 0; i < u->n; i++) {
        free(u->items[i].key);
        free(u->items[i].id);
    }
    free(u->items);
    free(u->next_key);
    free(u->next_id);
    memset(u, 0, sizeof *u);
}

/* ---- DeleteObjects ---- */

struct delete_ctx {
    int errors;
    char *key, *code;
    size_t key_len, code_len;
};

static void delete_end(struct xml_walk *w, const char *name)
{
    struct delete_ctx *c = w->ctx;
    if (strcmp(name, "Error") == 0 && w->depth == 2)
        c->errors++;
    else if (c->errors == 0 && at(w, "Error", "Key"))
        snprintf(c->key, c->key_len, "%s", w->text);
    else if (c->errors == 0 && at(w, "Error", "Code"))
        snprintf(c->code, c->code_len, "%s", w->text);
}

int s3_parse_delete_result(const char *xml, size_t len, char *key, size_t key_len, char *code,
                           size_t code_len)
{
    struct delete_ctx c = { 0, key, code, key_len, code_len };
    struct xml_walk w = { .on_end = delete_end, .ctx = &c };
    key[0] = code[0] = '\0';
    int rc = walk(xml, len, &w);
    return rc ? rc : c.errors;
}
