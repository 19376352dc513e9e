/*
 * Unit tests of hjson_dumps (include/h5osfs/schema/hjson.h, spec/hsds-format.md §3.0): the bytes
 * Python's json.dumps writes. argv[1] is tests/data:
 *   - hjson/{floats,strings,structures}.json: vectors made by tools/check_hjson_dumps.py with
 * Python's own json module (input text, json.dumps output), compared byte for byte;
 *   - hsds-v2/hsdstest: every JSON document real HSDS wrote must be written back identically.
 */
#include "h5osfs/schema/hjson.h"

#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define WHY_LEN 256

/* hjson_dumps of v (stolen), or NULL; rc gets the return code. */
static char *dumps(json_t *v, int *rc)
{
    char *out = NULL;
    *rc = hjson_dumps(v, &out);
    json_decref(v);
    return out;
}

static void check_dumps(json_t *v, const char *want)
{
    int rc;
    char *got = dumps(v, &rc);
    CHECK_INT(rc, 0);
    CHECK_STR(got, want);
    free(got);
}

static void check_text(const char *text, const char *want)
{
    char why[WHY_LEN];
    json_t *v = hjson_loadb(text, strlen(text), why, sizeof(why));
    CHECK(v != NULL);
    check_dumps(v, want);
}

static void test_basics(void)
{
    check_dumps(json_null(), "null");
    check_dumps(json_true(), "true");
    check_dumps(json_false(), "false");
    check_dumps(json_integer(-42), "-42");
    check_dumps(json_integer(INT64_MIN), "-9223372036854775808");
    check_dumps(json_real(2.0), "2.0");
    check_dumps(json_real(-0.0), "-0.0");
    check_dumps(json_real(1e-5), "1e-05");
    check_dumps(json_real(1e16), "1e+16");
    check_dumps(json_real(1e15), "1000000000000000.0");
    check_dumps(json_real(0.0001), "0.0001");
    check_dumps(json_real(0.1), "0.1");
    check_dumps(json_real(1708897646.0599918), "1708897646.0599918");
    check_dumps(json_real(5e-324), "5e-324");
    check_dumps(json_real(1.7976931348623157e308), "1.7976931348623157e+308");
    check_dumps(json_real(1e100), "1e+100");
    check_dumps(json_array(), "[]");
    check_dumps(json_object(), "{}");
    check_text("{\"b\":[1,{\"c\":null}],\"a\":\"x\"}", "{\"b\": [1, {\"c\": null}], \"a\": \"x\"}");
    check_text("\"\\u00e9\\ud83d\\ude00\\u007f/\"", "\"\\u00e9\\ud83d\\ude00\\u007f/\"");
    check_text("\"\xc3\xa9\xe2\x9c\x93\xf0\x9f\x98\x80\"", "\"\\u00e9\\u2713\\ud83d\\ude00\"");
    check_dumps(json_stringn("a\0b", 3), "\"a\\u0000b\"");
    check_text("\"\\n\\r\\t\\b\\f\\u0001\\u001f\\\"\\\\\"",
               "\"\\n\\r\\t\\b\\f\\u0001\\u001f\\\"\\\\\"");
}

static void test_markers(void)
{
    check_text("[NaN, Infinity, -Infinity]", "[NaN, Infinity, -Infinity]");
    check_text("[18446744073709551615, -9223372036854775809]",
               "[18446744073709551615, -9223372036854775809]");
    check_dumps(json_string(HJSON_NAN), "NaN");
    check_dumps(json_string(HJSON_BIGINT_PREFIX "123"), "123");
    check_dumps(json_string(HJSON_BIGINT_PREFIX "-7"), "-7");
    /* strings that start like a marker but are none stay strings */
    check_dumps(json_string("\x01"), "\"\\u0001\"");
    check_dumps(json_string("\x01-"), "\"\\u0001-\"");
    check_dumps(json_string("\x01"
                            "12a"),
                "\"\\u000112a\"");
    check_dumps(json_string("\x01NaNx"), "\"\\u0001NaNx\"");
    check_dumps(json_string("\x01"
                            "007"),
                "\"\\u0001007\""); /* not a JSON integer */
    check_dumps(json_string("NaN"), "\"NaN\"");
}

static void test_refusals(void)
{
    char *out = (char *)1;
    CHECK_INT(hjson_dumps(NULL, &out), -EINVAL);
    CHECK(out == NULL);
    CHECK_INT(hjson_dumps(json_null(), NULL), -EINVAL);
    int rc;
    char *got = dumps(json_stringn_nocheck("\xff", 1), &rc);
    CHECK_INT(rc, -EINVAL);
    CHECK(got == NULL);
    got = dumps(json_stringn_nocheck("\xed\xa0\x80", 3), &rc); /* a UTF-8 surrogate */
    CHECK_INT(rc, -EINVAL);
    got = dumps(json_stringn_nocheck("\xc0\x80", 2), &rc); /* overlong NUL */
    CHECK_INT(rc, -EINVAL);
    json_t *obj = json_object();
    CHECK(json_object_set_new(obj, "k", json_stringn_nocheck("a\xe2\x9c", 3)) == 0);
    got = dumps(obj, &rc);
    CHECK_INT(rc, -EINVAL);
    /* nesting: 2048 levels are written, 2049 refused */
    for (int depth = 2048; depth <= 2049; depth++) {
        json_t *v = json_integer(1);
        for (int k = 0; k < depth; k++) {
            json_t *outer = json_array();
            CHECK(json_array_append_new(outer, v) == 0);
            v = outer;
        }
        got = dumps(v, &rc);
        CHECK_INT(rc, depth == 2048 ? 0 : -EINVAL);
        free(got);
    }
}

/* Random doubles of every exponent read back exactly (the vectors check the digits). Under
 * valgrind a tenth of them: the same calls, each one checked for memory errors. */
static void test_round_trip(void)
{
    uint64_t s = 0x9e3779b97f4a7c15ull;
    int bad = 0, n = getenv("H5OSFS_UNDER_VALGRIND") ? 20000 : 200000;
    for (int k = 0; k < n; k++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        double x;
        memcpy(&x, &s, sizeof(x));
        if (!isfinite(x))
            continue;
        int rc;
        char *text = dumps(json_real(x), &rc);
        if (rc != 0 || strtod(text, NULL) != x || strlen(text) > 24)
            bad++;
        free(text);
    }
    CHECK_INT(bad, 0);
}

/* What hjson_loadb could not hold (HJSON_UNLOADABLE) is written back as it was stored; a
 * string that only looks like one, and would not be a JSON string as is, is escaped. */
static void test_unloadable_round_trip(void)
{
    check_text("{\"caf\\udc80\": \"x\\ud800\", \"a\\u0000b\": [\"q\\\"\\\\\\udfff\"]}",
               "{\"caf\\udc80\": \"x\\ud800\", \"a\\u0000b\": [\"q\\\"\\\\\\udfff\"]}");
    check_dumps(json_string(HJSON_UNLOADABLE "\", \"evil\": \"1"),
                "\"\\u0001\\u0002\\\", \\\"evil\\\": \\\"1\"");
    check_dumps(json_string(HJSON_UNLOADABLE "a\\"), "\"\\u0001\\u0002a\\\\\"");
    check_dumps(json_string(HJSON_UNLOADABLE "\\u12"), "\"\\u0001\\u0002\\\\u12\"");
}

/* ---- Python's vectors ---- */

static json_t *load_vector(const char *text, size_t len, char *why)
{
    return hjson_loadb(text, len, why, WHY_LEN);
}

static void test_vectors(const char *data, const char *name, size_t min_count)
{
    char path[4096];
    json_error_t err;
    snprintf(path, sizeof(path), "%s/hjson/%s.json", data, name);
    json_t *vectors = json_load_file(path, 0, &err);
    CHECK(vectors != NULL);
    if (!vectors) {
        fprintf(stderr, "%s: %s\n", path, err.text);
        return;
    }
    CHECK(json_array_size(vectors) >= min_count);
    size_t k, failed = 0;
    json_t *pair;
    json_array_foreach(vectors, k, pair)
    {
        const char *in = json_string_value(json_array_get(pair, 0));
        const char *want = json_string_value(json_array_get(pair, 1));
        char why[WHY_LEN] = "";
        json_t *v = in ? load_vector(in, json_string_length(json_array_get(pair, 0)), why) : NULL;
        int rc;
        char *got = v ? dumps(v, &rc) : NULL;
        if (!got || !want || strcmp(got, want) != 0) {
            if (failed++ < 10)
                fprintf(stderr, "%s #%zu: got\n  %s\nwant\n  %s\n(%s)\n", name, k,
                        got ? got : "(null)", want ? want : "(null)", why);
        }
        free(got);
    }
    CHECK_INT(failed, 0);
    json_decref(vectors);
}

/* ---- every document of the fixture bucket ---- */

static int n_documents;

static int visit(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)ftw;
    size_t len = strlen(path);
    if (flag != FTW_F || len < 5 || strcmp(path + len - 5, ".json") != 0)
        return 0;
    char *text = malloc((size_t)st->st_size + 1);
    FILE *fp = fopen(path, "rb");
    size_t n = fp && text ? fread(text, 1, (size_t)st->st_size, fp) : 0;
    if (fp)
        fclose(fp);
    CHECK(text != NULL && n == (size_t)st->st_size);
    if (text) {
        text[n] = '\0';
        json_t *doc = hjson_loadb(text, n, NULL, 0);
        CHECK(doc != NULL);
        int rc;
        char *got = doc ? dumps(doc, &rc) : NULL;
        if (!got || strcmp(got, text) != 0)
            fprintf(stderr, "%s written back differently:\n%s\n", path, got ? got : "(null)");
        CHECK(got && strcmp(got, text) == 0);
        free(got);
        n_documents++;
    }
    free(text);
    return 0;
}

static void test_fixture_bucket(const char *data)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/hsds-v2/hsdstest", data);
    CHECK_INT(nftw(path, visit, 16, FTW_PHYS), 0);
    CHECK(n_documents > 100);
}

int main(int argc, char **argv)
{
    test_basics();
    test_markers();
    test_refusals();
    test_round_trip();
    test_unloadable_round_trip();
    if (argc > 1) {
        test_vectors(argv[1], "floats", 300);
        test_vectors(argv[1], "strings", 200);
        test_vectors(argv[1], "structures", 100);
        test_fixture_bucket(argv[1]);
    } else {
        CHECK(!"argv[1] (tests/data) missing");
    }
    return check_done("hjson_dumps");
}
