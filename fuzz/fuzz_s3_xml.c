/*
 * fuzz_s3_xml: the S3 answers the daemon parses (src/store/s3_xml.c): s3_parse_list (a
 * ListObjectsV2 page), s3_parse_error (an <Error> body), s3_parse_delete_result (a
 * DeleteObjects answer), s3_parse_initiate and s3_parse_complete (the answers of a multipart
 * upload), each on the whole input.
 *
 * Input: the response body, as the server sent it (XML or anything else).
 *
 * Checks beyond "no crash, no leak, no UB":
 *   list: 0 or -EINVAL (-ENOMEM); on success every key and prefix is a string, objects and
 *   prefixes are each sorted by key in byte order (store.h's contract for a page), a page that
 *   is not truncated has no next token, every etag ends within its buffer; on failure the
 *   list is left empty.
 *   error, delete: the code, message and key are NUL-terminated within the sizes given (the
 *   buffers are exactly that large, so ASan sees any byte beyond), which vary with the input;
 *   the delete result is a count of errors or -EINVAL (-ENOMEM).
 *   initiate, complete: 0 or -EINVAL (complete: -EIO for an <Error>); an upload id found is
 *   not empty; strings NUL-terminated within their buffers as above.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/util/log.h"
#include "h5osfs/store/store.h"
#include "h5osfs/store/s3_int.h"
#include "fuzz_scratch.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what)
{
    fuzz_fail("fuzz_s3_xml", what);
}

FUZZ_INIT_LOG_ONLY

static void check_sorted(char *const *keys, size_t n, size_t stride, const char *what)
{
    const char *prev = NULL;
    for (size_t i = 0; i < n; i++) {
        const char *key = *(char *const *)((const char *)keys + i * stride);
        if (!key)
            fail(what);
        if (prev && strcmp(prev, key) > 0) {
            fprintf(stderr, "fuzz_s3_xml: %s not sorted: \"%s\" before \"%s\"\n", what, prev, key);
            abort();
        }
        prev = key;
    }
}

static void check_list(const char *xml, size_t len)
{
    struct store_list l;
    int truncated = -1;
    int rc = s3_parse_list(xml, len, &l, &truncated);
    if (rc != 0) {
        if (rc != -EINVAL && rc != -ENOMEM)
            fail("s3_parse_list: neither 0, -EINVAL nor -ENOMEM");
        if (l.objects || l.n_objects || l.prefixes || l.n_prefixes || l.next_token)
            fail("s3_parse_list failed but left entries");
        return;
    }
    if (truncated != 0 && truncated != 1)
        fail("s3_parse_list: truncated is not 0 or 1");
    if (!truncated && l.next_token)
        fail("s3_parse_list: a next token on the last page");
    if (l.n_objects)
        check_sorted(&l.objects[0].key, l.n_objects, sizeof l.objects[0], "object keys");
    check_sorted(l.prefixes, l.n_prefixes, sizeof l.prefixes[0], "prefixes");
    for (size_t i = 0; i < l.n_objects; i++)
        if (strnlen(l.objects[i].st.etag, sizeof l.objects[i].st.etag) ==
            sizeof l.objects[i].st.etag)
            fail("s3_parse_list: an etag without its NUL");
    store_list_free(&l);
}

/* A buffer of exactly n bytes, filled with non-NUL bytes: a missing terminator shows. */
static char *exact(size_t n)
{
    char *b = malloc(n);
    if (!b)
        abort();
    memset(b, 'Z', n);
    return b;
}

static void check_terminated(const char *s, size_t n, const char *what)
{
    if (strnlen(s, n) == n)
        fail(what);
}

static void check_error_and_delete(const char *xml, size_t len)
{
    /* sizes from 1 (room for the NUL only) up, as the callers' buffers of 8..256 bytes */
    size_t code_len = 1 + len % 67, msg_len = 1 + (len / 67) % 131, key_len = 1 + len % 97;
    char *code = exact(code_len), *msg = exact(msg_len), *key = exact(key_len);
    s3_parse_error(xml, len, code, code_len, msg, msg_len);
    check_terminated(code, code_len, "s3_parse_error: code not NUL-terminated");
    check_terminated(msg, msg_len, "s3_parse_error: message not NUL-terminated");

    memset(code, 'Z', code_len);
    int n = s3_parse_delete_result(xml, len, key, key_len, code, code_len);
    if (n < 0 && n != -EINVAL && n != -ENOMEM)
        fail("s3_parse_delete_result: neither a count, -EINVAL nor -ENOMEM");
    check_terminated(key, key_len, "s3_parse_delete_result: key not NUL-terminated");
    check_terminated(code, code_len, "s3_parse_delete_result: code not NUL-terminated");
    free(code);
    free(msg);
    free(key);
}

static void check_multipart(const char *xml, size_t len)
{
    size_t id_len = 1 + len % 113, code_len = 1 + len % 61, msg_len = 1 + (len / 61) % 127;
    char *id = exact(id_len), *code = exact(code_len), *msg = exact(msg_len);
    int rc = s3_parse_initiate(xml, len, id, id_len);
    if (rc != 0 && rc != -EINVAL)
        fail("s3_parse_initiate: neither 0 nor -EINVAL");
    check_terminated(id, id_len, "s3_parse_initiate: id not NUL-terminated");
    if (rc == 0 && !id[0])
        fail("s3_parse_initiate: an empty upload id");
    rc = s3_parse_complete(xml, len, code, code_len, msg, msg_len);
    if (rc != 0 && rc != -EIO && rc != -EINVAL)
        fail("s3_parse_complete: neither 0, -EIO nor -EINVAL");
    check_terminated(code, code_len, "s3_parse_complete: code not NUL-terminated");
    check_terminated(msg, msg_len, "s3_parse_complete: message not NUL-terminated");
    free(id);
    free(code);
    free(msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a copy of exactly size bytes: the parsers must not read past the length given */
    char *xml = malloc(size ? size : 1);
    if (!xml)
        abort();
    memcpy(xml, data, size);
    check_list(xml, size);
    check_error_and_delete(xml, size);
    check_multipart(xml, size);
    free(xml);
    return 0;
}
