/*
 * fuzz_hjson_types: JSON as HSDS writes it -> HDF5 types -> element buffers (src/schema:
 * hjson.c, h5type*.c, h5value*.c).
 *
 * Input: JSON text, optionally followed by a NUL byte and "stored bytes".
 *   1. hjson_loadb on the text; hjson_number on every scalar of the document (first 4096), and
 *      the id/key/name functions of src/schema on every string; schema_domain_parse (and
 *      schema_acl_rights) on the text as a .domain.json; hjson_dumps of the document, which
 *      hjson_loadb must read back equal (and dump again to the same text).
 *   2. If it is an object with "type": h5type_from_json, h5type_stored_size, h5type_traits.
 *   3. With "value" (and "shape", or n = 1): h5value_from_json, as an attribute or fill value
 *      is converted; "encoding": "base64" takes the base64 path through h5value_from_stored.
 *   4. With stored bytes after the NUL: h5value_from_stored on them, n elements (n from
 *      "shape", else as many as fit the stored size, else 1), as a decoded chunk is converted.
 *   Every buffer made is written as an attribute of an in-memory HDF5 file (so the library
 *   walks it, vlen pointers included) and freed with h5value_free.
 *
 * Checks: no crash, leak or UB; failures carry a reason; no HDF5 datatype id is leaked; the
 * traits and stored size agree (stored size exists exactly when there is no vlen part); the
 * built type has the size h5value expects.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>
#include <jansson.h>

#include "h5osfs/h5json/h5type.h"
#include "h5osfs/h5json/h5value.h"
#include "h5osfs/schema/hjson.h"
#include "h5osfs/util/log.h"
#include "h5osfs/schema/schema.h"
#include "fuzz_scratch.h"

/* As the image builder's shape_space: at most 2^40 elements. */
#define MAX_ELEMENTS (UINT64_C(1) << 40)
/* Buffers written to HDF5 only up to this many elements. */
#define WRITE_MAX 4096
#define ATTR_DATA_MAX (64u << 20)
#define STORE_KEY_BUF 1100

static hid_t g_file = H5I_INVALID_HID;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_log_setup();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return 0;
}

/* The in-memory file attributes are written to; made anew now and then, as it only grows. */
static void fresh_file(void)
{
    static unsigned runs;
    if (g_file >= 0 && ++runs % 10000 != 0)
        return;
    if (g_file >= 0)
        H5Fclose(g_file);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0 || H5Pset_fapl_core(fapl, 1 << 20, 0) < 0)
        abort();
    g_file = H5Fcreate("fuzz_hjson_types.h5", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (g_file < 0)
        abort();
}

/* Object ids ending in '0' are unknown objects; others resolve to a made-up address. */
static int resolve(void *ctx, const char *id, hobj_ref_t *out)
{
    (void)ctx;
    size_t n = strlen(id);
    if (n == 0 || id[n - 1] == '0')
        return -ENOENT;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)id[i]) * 1099511628211ull;
    *out = (hobj_ref_t)h;
    return 0;
}

static void need_reason(int rc, const char *why, const char *what)
{
    if (rc == 0 || rc == -ENOMEM)
        return;
    if (rc != -EINVAL && rc != -ERANGE && rc != -ENOENT) {
        fprintf(stderr, "%s returned %d\n", what, rc);
        abort();
    }
    if (why[0] == '\0') {
        fprintf(stderr, "%s failed without a reason\n", what);
        abort();
    }
}

/* The id, key and name functions of src/schema on a string of the document. */
static void strings(const char *s, size_t len)
{
    char buf[STORE_KEY_BUF], root[SCHEMA_ID_BUF];
    uint64_t index[3] = { 0, 7, 123456789 };
    (void)schema_id_version(s);
    (void)schema_id_is_root(s);
    if (schema_id_class(s) >= 0) {
        (void)schema_root_of(s, root);
        (void)schema_obj_key(s, buf, sizeof buf);
        (void)schema_info_key(s, buf, sizeof buf);
        (void)schema_chunk_key(s, index, 3, (int)(len % 5) - 1, buf, sizeof buf);
        (void)schema_chunk_key(s, index, 1, -1, buf, 40); /* too small a buffer */
    }
    if (schema_domain_key(s, buf, sizeof buf) == 0) {
        char back[STORE_KEY_BUF];
        if (schema_domain_path(buf, back, sizeof back) != 0 || strcmp(back, s) != 0) {
            fprintf(stderr, "schema_domain_path does not invert schema_domain_key on %s\n", s);
            abort();
        }
    }
    (void)schema_domain_path(s, buf, sizeof buf);
    (void)schema_name_valid(s, len);
    (void)schema_hex_rot((unsigned char)s[0]);
}

static void numbers(const json_t *v, int *budget)
{
    if (--*budget < 0)
        return;
    double d;
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v) && *budget > 0; i++)
            numbers(json_array_get(v, i), budget);
    } else if (json_is_object(v)) {
        const char *k;
        json_t *m;
        json_object_foreach((json_t *)v, k, m)
        {
            if (*budget <= 0)
                break;
            numbers(m, budget);
        }
    } else {
        (void)hjson_number(v, &d);
        if (json_is_string(v))
            strings(json_string_value(v), json_string_length(v));
    }
}

/* hjson_dumps writes what hjson_loadb reads back as the same document, and is idempotent.
 * (Not compared when the text has a \u0001 escape: a string that looks like one of hjson.h's
 * markers is written as the bare token it stands for, by design.) */
static void roundtrip(const json_t *doc, const char *text, size_t text_len)
{
    char *out = NULL, *again = NULL, why[256] = "";
    int rc = hjson_dumps(doc, &out);
    if (rc != 0) {
        if (rc != -EINVAL && rc != -ENOMEM) {
            fprintf(stderr, "hjson_dumps returned %d\n", rc);
            abort();
        }
        return;
    }
    json_t *back = hjson_loadb(out, strlen(out), why, sizeof why);
    if (!back) {
        fprintf(stderr, "hjson_loadb cannot read what hjson_dumps wrote (%s): %s\n", why, out);
        abort();
    }
    int markers = memmem(text, text_len, "\\u0001", 6) != NULL;
    if (!markers && !json_equal((json_t *)doc, back)) {
        fprintf(stderr, "hjson_dumps/hjson_loadb changed the document: %s\n", out);
        abort();
    }
    if (!markers && (hjson_dumps(back, &again) != 0 || strcmp(out, again) != 0)) {
        fprintf(stderr, "hjson_dumps is not idempotent: %s\n", out);
        abort();
    }
    free(again);
    free(out);
    json_decref(back);
}

/* Element count of a "shape" as the image builder reads one (NULL/SCALAR/SIMPLE). */
static int shape_count(const json_t *shape, size_t *n)
{
    const char *cls = json_string_value(json_object_get(shape, "class"));
    *n = 1;
    if (!shape || !cls || strcmp(cls, "H5S_SCALAR") == 0)
        return 0;
    if (strcmp(cls, "H5S_NULL") == 0) {
        *n = 0;
        return 0;
    }
    const json_t *dims = json_object_get(shape, "dims");
    if (strcmp(cls, "H5S_SIMPLE") != 0 || json_array_size(dims) < 1 || json_array_size(dims) > 32)
        return -1;
    uint64_t total = 1;
    for (size_t k = 0; k < json_array_size(dims); k++) {
        const json_t *d = json_array_get(dims, k);
        json_int_t v = json_integer_value(d);
        if (!json_is_integer(d) || v < 0 || (v > 0 && total > MAX_ELEMENTS / (uint64_t)v))
            return -1;
        total *= (uint64_t)v;
    }
    *n = (size_t)total;
    return 0;
}

/* Hand buf to HDF5 as an attribute's value (it reads every element, vlen data included). */
static void write_attribute(hid_t tid, const void *buf, size_t n)
{
    if (n == 0 || n > WRITE_MAX)
        return;
    hsize_t dims[1] = { n };
    hid_t space = H5Screate_simple(1, dims, NULL);
    hid_t attr = space < 0 ? -1 : H5Acreate2(g_file, "a", tid, space, H5P_DEFAULT, H5P_DEFAULT);
    if (attr >= 0) {
        (void)H5Awrite(attr, tid, buf);
        H5Aclose(attr);
        H5Adelete(g_file, "a");
    }
    if (space >= 0)
        H5Sclose(space);
}

static void values(const json_t *doc, const json_t *type, hid_t tid, const uint8_t *stored,
                   size_t stored_len, int has_stored, size_t stored_size)
{
    struct h5value_refs refs = { resolve, NULL };
    const json_t *value = json_object_get(doc, "value");
    const char *enc = json_string_value(json_object_get(doc, "encoding"));
    size_t n = 1;
    int have_shape = json_object_get(doc, "shape") != NULL;
    if (shape_count(json_object_get(doc, "shape"), &n) != 0)
        return;
    /* as the image builder's make_attribute: values over 64 MiB are refused before h5value */
    if (n > ATTR_DATA_MAX / H5Tget_size(tid))
        return;
    if (value) {
        void *buf = NULL;
        char why[256] = "";
        int rc;
        if (enc && strcmp(enc, "base64") == 0 && json_is_string(value)) {
            unsigned char *bytes = NULL;
            size_t len = 0;
            rc = h5value_base64_decode(json_string_value(value), json_string_length(value), &bytes,
                                       &len);
            if (rc == 0) {
                rc = h5value_from_stored(type, tid, bytes, len, n, &refs, &buf, why, sizeof why);
                need_reason(rc, why, "h5value_from_stored (base64)");
                free(bytes);
            }
        } else {
            rc = h5value_from_json(type, tid, value, n, &refs, &buf, why, sizeof why);
            need_reason(rc, why, "h5value_from_json");
        }
        if (rc == 0) {
            write_attribute(tid, buf, n);
            h5value_free(tid, buf, n);
        } else if (buf) {
            fprintf(stderr, "failed conversion returned a buffer\n");
            abort();
        }
    }
    if (has_stored) {
        size_t ns = n;
        if (!have_shape)
            ns = stored_size ? stored_len / stored_size : 1;
        void *buf = NULL;
        char why[256] = "";
        int rc =
            h5value_from_stored(type, tid, stored, stored_len, ns, &refs, &buf, why, sizeof why);
        need_reason(rc, why, "h5value_from_stored");
        if (rc == 0) {
            write_attribute(tid, buf, ns);
            h5value_free(tid, buf, ns);
        }
    }
}

static ssize_t open_types(void)
{
    ssize_t n = 0;
    hsize_t count = 0;
    if (H5Inmembers(H5I_DATATYPE, &count) >= 0)
        n = (ssize_t)count;
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fresh_file();
    const uint8_t *nul = memchr(data, 0, size);
    size_t text_len = nul ? (size_t)(nul - data) : size;
    const uint8_t *stored = nul ? nul + 1 : NULL;
    size_t stored_len = nul ? size - text_len - 1 : 0;
    char why[256] = "";

    /* exact-size copies, so ASan sees any read past either part */
    char *text = malloc(text_len ? text_len : 1);
    uint8_t *bytes = malloc(stored_len ? stored_len : 1);
    if (!text || !bytes)
        abort();
    memcpy(text, data, text_len);
    if (stored_len)
        memcpy(bytes, stored, stored_len);

    json_t *doc = hjson_loadb(text, text_len, why, sizeof why);
    if (!doc) {
        if (why[0] == '\0') {
            fprintf(stderr, "hjson_loadb failed without a reason\n");
            abort();
        }
        goto out;
    }
    int budget = 4096;
    numbers(doc, &budget);
    roundtrip(doc, text, text_len);
    /* the same text as a .domain.json, and its ACL decisions */
    struct schema_domain dom;
    why[0] = '\0';
    if (schema_domain_parse(text, text_len, &dom, why, sizeof why) == 0) {
        static const char *const groups[] = { "g1", "admins" };
        (void)schema_acl_rights(&dom, "test_user1", "admin", groups, 2);
        (void)schema_acl_rights(&dom, "default", NULL, NULL, 0);
        (void)schema_acl_rights(&dom, "admin", "admin", groups, 1);
        schema_domain_free(&dom);
    } else if (why[0] == '\0') {
        fprintf(stderr, "schema_domain_parse failed without a reason\n");
        abort();
    }
    const json_t *type = json_object_get(doc, "type");
    if (!type)
        goto out;

    ssize_t types_before = open_types();
    why[0] = '\0';
    hid_t tid = h5type_from_json(type, why, sizeof why);
    size_t stored_size = 0;
    int rc_size = h5type_stored_size(type, &stored_size);
    unsigned traits = h5type_traits(type);
    if (tid < 0 && why[0] == '\0') {
        fprintf(stderr, "h5type_from_json failed without a reason\n");
        abort();
    }
    if (tid >= 0 && ((traits & H5TYPE_HAS_VLEN) != 0) != (rc_size != 0)) {
        fprintf(stderr, "traits %#x disagree with the stored size (%d)\n", traits, rc_size);
        abort();
    }
    if (tid >= 0 && rc_size == 0 && stored_size == 0) {
        fprintf(stderr, "a stored size of 0\n");
        abort();
    }
    if (tid >= 0) {
        values(doc, type, tid, bytes, stored_len, nul != NULL, rc_size == 0 ? stored_size : 0);
        H5Tclose(tid);
    }
    if (open_types() != types_before) {
        fprintf(stderr, "datatype ids leaked: %zd before, %zd after\n", types_before, open_types());
        abort();
    }
out:
    json_decref(doc);
    free(text);
    free(bytes);
    return 0;
}
