/*
 * Unit tests of h5type (include/h5osfs/h5json/h5type.h, spec/hsds-format.md §4): every class, the
 * memory layout of the types built, stored sizes, traits and refusals. Type JSON marked
 * "fixture" is copied byte for byte from the bucket tests/data/hsds-v2/hsdstest (real HSDS);
 * argv[1] is tests/data, and every type found in that bucket must build.
 */
#include "h5osfs/h5json/h5type.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/schema/hjson.h"

#include "check.h"

#define WHY_LEN 256

static json_t *parse(const char *text)
{
    char why[WHY_LEN];
    json_t *j = hjson_loadb(text, strlen(text), why, sizeof(why));
    if (!j)
        fprintf(stderr, "bad test JSON %s: %s\n", text, why);
    return j;
}

/* Build the type of a JSON text; why gets the reason of a refusal. */
static hid_t type_of(const char *text, char *why)
{
    json_t *j = parse(text);
    why[0] = '\0';
    hid_t tid = j ? h5type_from_json(j, why, WHY_LEN) : H5I_INVALID_HID;
    json_decref(j);
    return tid;
}

static int stored_of(const char *text, size_t *size)
{
    json_t *j = parse(text);
    *size = 0;
    int rc = h5type_stored_size(j, size);
    json_decref(j);
    return rc;
}

static unsigned traits_of(const char *text)
{
    json_t *j = parse(text);
    unsigned t = h5type_traits(j);
    json_decref(j);
    return t;
}

static void check_int(const char *text, size_t size, H5T_order_t order, H5T_sign_t sign)
{
    char why[WHY_LEN];
    hid_t tid = type_of(text, why);
    CHECK(tid >= 0);
    if (tid < 0) {
        fprintf(stderr, "%s: %s\n", text, why);
        return;
    }
    CHECK_INT(H5Tget_class(tid), H5T_INTEGER);
    CHECK_INT(H5Tget_size(tid), size);
    CHECK_INT(H5Tget_order(tid), order);
    CHECK_INT(H5Tget_sign(tid), sign);
    H5Tclose(tid);
    size_t stored;
    CHECK_INT(stored_of(text, &stored), 0);
    CHECK_INT(stored, size);
    CHECK_INT(traits_of(text), 0);
}

static void test_integers(void)
{
    check_int("\"H5T_STD_I8LE\"", 1, H5T_ORDER_LE, H5T_SGN_2);
    check_int("\"H5T_STD_U8BE\"", 1, H5T_ORDER_BE, H5T_SGN_NONE);
    check_int("\"H5T_STD_I16BE\"", 2, H5T_ORDER_BE, H5T_SGN_2);
    check_int("\"H5T_STD_U16LE\"", 2, H5T_ORDER_LE, H5T_SGN_NONE);
    check_int("\"H5T_STD_I32LE\"", 4, H5T_ORDER_LE, H5T_SGN_2);
    check_int("\"H5T_STD_U32BE\"", 4, H5T_ORDER_BE, H5T_SGN_NONE);
    check_int("\"H5T_STD_I64BE\"", 8, H5T_ORDER_BE, H5T_SGN_2);
    check_int("\"H5T_STD_U64LE\"", 8, H5T_ORDER_LE, H5T_SGN_NONE);
    check_int("\"H5T_STD_I32\"", 4, H5T_ORDER_LE, H5T_SGN_2); /* HSDS default: LE */
    /* fixture: sample1 i16 attribute, bigendian_named dataset, committed myint_t */
    check_int("{\"class\": \"H5T_INTEGER\", \"base\": \"H5T_STD_I16LE\"}", 2, H5T_ORDER_LE,
              H5T_SGN_2);
    check_int("{\"class\": \"H5T_INTEGER\", \"base\": \"H5T_STD_I64BE\"}", 8, H5T_ORDER_BE,
              H5T_SGN_2);
    check_int("{\"class\": \"H5T_INTEGER\", \"base\": \"H5T_STD_U64LE\"}", 8, H5T_ORDER_LE,
              H5T_SGN_NONE);
    /* a committed type's copy keeps an "id" member, ignored */
    check_int("{\"class\": \"H5T_INTEGER\", \"base\": \"H5T_STD_I64BE\", "
              "\"id\": \"t-d64bf735-c43d061d-90df-34ef80-05e3bd\"}",
              8, H5T_ORDER_BE, H5T_SGN_2);
}

static void check_float(const char *text, size_t size, H5T_order_t order)
{
    char why[WHY_LEN];
    hid_t tid = type_of(text, why);
    CHECK(tid >= 0);
    if (tid < 0)
        return;
    CHECK_INT(H5Tget_class(tid), H5T_FLOAT);
    CHECK_INT(H5Tget_size(tid), size);
    CHECK_INT(H5Tget_order(tid), order);
    if (size == 2) {
        size_t spos, epos, esize, mpos, msize;
        CHECK(H5Tget_fields(tid, &spos, &epos, &esize, &mpos, &msize) >= 0);
        CHECK_INT(spos, 15);
        CHECK_INT(epos, 10);
        CHECK_INT(esize, 5);
        CHECK_INT(mpos, 0);
        CHECK_INT(msize, 10);
        CHECK_INT(H5Tget_ebias(tid), 15);
        CHECK_INT(H5Tget_precision(tid), 16);
        CHECK_INT(H5Tget_offset(tid), 0);
    } else {
        hid_t want = size == 4 ? (order == H5T_ORDER_LE ? H5T_IEEE_F32LE : H5T_IEEE_F32BE)
                               : (order == H5T_ORDER_LE ? H5T_IEEE_F64LE : H5T_IEEE_F64BE);
        CHECK(H5Tequal(tid, want) > 0);
    }
    H5Tclose(tid);
    size_t stored;
    CHECK_INT(stored_of(text, &stored), 0);
    CHECK_INT(stored, size);
}

static void test_floats(void)
{
    check_float("\"H5T_IEEE_F16LE\"", 2, H5T_ORDER_LE);
    check_float("\"H5T_IEEE_F16BE\"", 2, H5T_ORDER_BE);
    check_float("\"H5T_IEEE_F32BE\"", 4, H5T_ORDER_BE);
    check_float("\"H5T_IEEE_F64\"", 8, H5T_ORDER_LE);
    check_float("{\"class\": \"H5T_FLOAT\", \"base\": \"H5T_IEEE_F32LE\"}", 4, H5T_ORDER_LE);
    check_float("{\"class\": \"H5T_FLOAT\", \"base\": \"H5T_IEEE_F64LE\"}", 8, H5T_ORDER_LE);
    check_float("{\"class\": \"H5T_FLOAT\", \"base\": \"H5T_IEEE_F16LE\"}", 2, H5T_ORDER_LE);
}

static void check_string(const char *text, size_t size, H5T_cset_t cset, H5T_str_t pad)
{
    char why[WHY_LEN];
    hid_t tid = type_of(text, why);
    CHECK(tid >= 0);
    if (tid < 0)
        return;
    CHECK_INT(H5Tget_class(tid), H5T_STRING);
    CHECK_INT(H5Tis_variable_str(tid), size == 0);
    if (size)
        CHECK_INT(H5Tget_size(tid), size);
    CHECK_INT(H5Tget_cset(tid), cset);
    CHECK_INT(H5Tget_strpad(tid), pad);
    H5Tclose(tid);
    size_t stored;
    CHECK_INT(stored_of(text, &stored), size ? 0 : -EINVAL);
    CHECK_INT(stored, size);
    CHECK_INT(traits_of(text), size ? 0 : H5TYPE_HAS_VLEN);
}

static void test_strings(void)
{
    /* fixtures: sample1 fixed_str, sample2 vlen ascii dataset, sample1 tag attribute */
    check_string("{\"class\": \"H5T_STRING\", \"charSet\": \"H5T_CSET_ASCII\", \"length\": 11, "
                 "\"strPad\": \"H5T_STR_NULLPAD\"}",
                 11, H5T_CSET_ASCII, H5T_STR_NULLPAD);
    check_string("{\"class\": \"H5T_STRING\", \"length\": \"H5T_VARIABLE\", \"charSet\": "
                 "\"H5T_CSET_ASCII\", \"strPad\": \"H5T_STR_NULLTERM\"}",
                 0, H5T_CSET_ASCII, H5T_STR_NULLTERM);
    check_string("{\"class\": \"H5T_STRING\", \"length\": \"H5T_VARIABLE\", \"charSet\": "
                 "\"H5T_CSET_UTF8\", \"strPad\": \"H5T_STR_NULLTERM\"}",
                 0, H5T_CSET_UTF8, H5T_STR_NULLTERM);
    check_string("{\"class\": \"H5T_STRING\", \"charSet\": \"H5T_CSET_UTF8\", \"length\": 3, "
                 "\"strPad\": \"H5T_STR_SPACEPAD\"}",
                 3, H5T_CSET_UTF8, H5T_STR_SPACEPAD);
    check_string("{\"class\": \"H5T_STRING\", \"charSet\": \"H5T_CSET_ASCII\", \"length\": 5, "
                 "\"strPad\": \"H5T_STR_NULLTERM\"}",
                 5, H5T_CSET_ASCII, H5T_STR_NULLTERM);
    /* strPad absent: numpy's NUL padding for fixed, NUL termination for variable */
    check_string("{\"class\": \"H5T_STRING\", \"charSet\": \"H5T_CSET_ASCII\", \"length\": 2}", 2,
                 H5T_CSET_ASCII, H5T_STR_NULLPAD);
    check_string("{\"class\": \"H5T_STRING\", \"charSet\": \"H5T_CSET_UTF8\", "
                 "\"length\": \"H5T_VARIABLE\"}",
                 0, H5T_CSET_UTF8, H5T_STR_NULLTERM);
}

static void test_vlen_opaque_array(void)
{
    char why[WHY_LEN];
    size_t stored;
    /* fixture: sample2's vlen dataset (base name without byte order) */
    const char *vlen = "{\"class\": \"H5T_VLEN\", \"size\": \"H5T_VARIABLE\", \"base\": "
                       "\"H5T_STD_I32\"}";
    hid_t tid = type_of(vlen, why);
    CHECK(tid >= 0);
    CHECK_INT(H5Tget_class(tid), H5T_VLEN);
    CHECK_INT(H5Tget_size(tid), sizeof(hvl_t));
    hid_t super = H5Tget_super(tid);
    CHECK(H5Tequal(super, H5T_STD_I32LE) > 0);
    H5Tclose(super);
    H5Tclose(tid);
    CHECK_INT(stored_of(vlen, &stored), -EINVAL);
    CHECK_INT(traits_of(vlen), H5TYPE_HAS_VLEN);

    const char *vref = "{\"class\": \"H5T_VLEN\", \"base\": {\"class\": \"H5T_REFERENCE\", "
                       "\"base\": \"H5T_STD_REF_OBJ\"}}";
    CHECK_INT(traits_of(vref), H5TYPE_HAS_VLEN | H5TYPE_HAS_REF);

    const char *opaque = "{\"class\": \"H5T_OPAQUE\", \"size\": 5, \"tag\": \"blob\"}";
    tid = type_of(opaque, why);
    CHECK(tid >= 0);
    CHECK_INT(H5Tget_class(tid), H5T_OPAQUE);
    CHECK_INT(H5Tget_size(tid), 5);
    char *tag = H5Tget_tag(tid);
    CHECK_STR(tag, "blob");
    H5free_memory(tag);
    H5Tclose(tid);
    CHECK_INT(stored_of(opaque, &stored), 0);
    CHECK_INT(stored, 5);
    tid = type_of("{\"class\": \"H5T_OPAQUE\", \"size\": 3, \"tag\": \"\"}", why);
    CHECK(tid >= 0);
    H5Tclose(tid);

    const char *array = "{\"class\": \"H5T_ARRAY\", \"dims\": [2, 3], \"base\": "
                        "\"H5T_STD_U16BE\"}";
    tid = type_of(array, why);
    CHECK(tid >= 0);
    CHECK_INT(H5Tget_class(tid), H5T_ARRAY);
    CHECK_INT(H5Tget_array_ndims(tid), 2);
    hsize_t dims[2] = { 0, 0 };
    CHECK_INT(H5Tget_array_dims2(tid, dims), 2);
    CHECK_INT(dims[0], 2);
    CHECK_INT(dims[1], 3);
    CHECK_INT(H5Tget_size(tid), 12);
    H5Tclose(tid);
    CHECK_INT(stored_of(array, &stored), 0);
    CHECK_INT(stored, 12);

    /* dims as a bare integer; an array of vlen strings; an array of arrays */
    tid = type_of("{\"class\": \"H5T_ARRAY\", \"dims\": 4, \"base\": {\"class\": \"H5T_STRING\","
                  " \"charSet\": \"H5T_CSET_UTF8\", \"length\": \"H5T_VARIABLE\"}}",
                  why);
    CHECK(tid >= 0);
    CHECK_INT(H5Tget_size(tid), 4 * sizeof(char *));
    H5Tclose(tid);
    CHECK_INT(traits_of("{\"class\": \"H5T_ARRAY\", \"dims\": 4, \"base\": {\"class\": "
                        "\"H5T_STRING\", \"charSet\": \"H5T_CSET_UTF8\", \"length\": "
                        "\"H5T_VARIABLE\"}}"),
              H5TYPE_HAS_VLEN);
    const char *nested = "{\"class\": \"H5T_ARRAY\", \"dims\": [2], \"base\": {\"class\": "
                         "\"H5T_ARRAY\", \"dims\": [3], \"base\": \"H5T_IEEE_F16LE\"}}";
    tid = type_of(nested, why);
    CHECK(tid >= 0);
    CHECK_INT(H5Tget_size(tid), 12);
    H5Tclose(tid);
    CHECK_INT(stored_of(nested, &stored), 0);
    CHECK_INT(stored, 12);
}

static void test_enums(void)
{
    char why[WHY_LEN];
    /* fixture: sample2 colors */
    const char *colors = "{\"class\": \"H5T_ENUM\", \"mapping\": {\"ALPHA\": 7, \"BLUE\": 2, "
                         "\"GREEN\": 1, \"RED\": 0}, \"base\": {\"class\": \"H5T_INTEGER\", "
                         "\"base\": \"H5T_STD_I8LE\"}}";
    hid_t tid = type_of(colors, why);
    CHECK(tid >= 0);
    CHECK_INT(H5Tget_class(tid), H5T_ENUM);
    CHECK_INT(H5Tget_nmembers(tid), 4);
    signed char v = -1;
    CHECK(H5Tenum_valueof(tid, "ALPHA", &v) >= 0);
    CHECK_INT(v, 7);
    char name[16];
    v = 2;
    CHECK(H5Tenum_nameof(tid, &v, name, sizeof(name)) >= 0);
    CHECK_STR(name, "BLUE");
    H5Tclose(tid);
    size_t stored;
    CHECK_INT(stored_of(colors, &stored), 0);
    CHECK_INT(stored, 1);

    /* fixture: sample1 bool */
    tid = type_of("{\"class\": \"H5T_ENUM\", \"mapping\": {\"FALSE\": 0, \"TRUE\": 1}, \"base\": "
                  "{\"class\": \"H5T_INTEGER\", \"base\": \"H5T_STD_I8LE\"}}",
                  why);
    CHECK(tid >= 0);
    CHECK_INT(H5Tget_size(tid), 1);
    v = 1;
    CHECK(H5Tenum_nameof(tid, &v, name, sizeof(name)) >= 0);
    CHECK_STR(name, "TRUE");
    H5Tclose(tid);

    /* a big-endian base: the values are stored big-endian */
    tid = type_of("{\"class\": \"H5T_ENUM\", \"mapping\": {\"A\": 258, \"B\": -2}, \"base\": "
                  "{\"class\": \"H5T_INTEGER\", \"base\": \"H5T_STD_I16BE\"}}",
                  why);
    CHECK(tid >= 0);
    unsigned char be[2] = { 0, 0 };
    CHECK(H5Tenum_valueof(tid, "A", be) >= 0);
    CHECK(be[0] == 1 && be[1] == 2);
    CHECK(H5Tenum_valueof(tid, "B", be) >= 0);
    CHECK(be[0] == 0xff && be[1] == 0xfe);
    H5Tclose(tid);

    /* uint64 values beyond int64, as hjson_loadb hands them over */
    tid = type_of("{\"class\": \"H5T_ENUM\", \"mapping\": {\"MAX\": 18446744073709551615, "
                  "\"ZERO\": 0}, \"base\": {\"class\": \"H5T_INTEGER\", \"base\": "
                  "\"H5T_STD_U64LE\"}}",
                  why);
    CHECK(tid >= 0);
    unsigned long long u = 0;
    CHECK(H5Tenum_valueof(tid, "MAX", &u) >= 0);
    CHECK(u == 18446744073709551615ull);
    H5Tclose(tid);
}

static void check_member(hid_t tid, unsigned k, const char *name, size_t offset, H5T_class_t cls)
{
    char *got = H5Tget_member_name(tid, k);
    CHECK_STR(got, name);
    H5free_memory(got);
    CHECK_INT(H5Tget_member_offset(tid, k), offset);
    CHECK_INT(H5Tget_member_class(tid, k), cls);
}

static void test_compounds(void)
{
    char why[WHY_LEN];
    size_t stored;
    /* fixture: sample2 nested compound with an array and an inner compound */
    const char *nested =
        "{\"class\": \"H5T_COMPOUND\", \"fields\": [{\"name\": \"id\", \"type\": {\"class\": "
        "\"H5T_INTEGER\", \"base\": \"H5T_STD_I32LE\"}}, {\"name\": \"temp\", \"type\": "
        "{\"class\": \"H5T_FLOAT\", \"base\": \"H5T_IEEE_F64LE\"}}, {\"name\": \"label\", "
        "\"type\": {\"class\": \"H5T_STRING\", \"charSet\": \"H5T_CSET_ASCII\", \"length\": 8, "
        "\"strPad\": \"H5T_STR_NULLPAD\"}}, {\"name\": \"vec\", \"type\": {\"dims\": [3], "
        "\"class\": \"H5T_ARRAY\", \"base\": {\"class\": \"H5T_FLOAT\", \"base\": "
        "\"H5T_IEEE_F32LE\"}}}, {\"name\": \"inner\", \"type\": {\"class\": \"H5T_COMPOUND\", "
        "\"fields\": [{\"name\": \"a\", \"type\": {\"class\": \"H5T_INTEGER\", \"base\": "
        "\"H5T_STD_I16LE\"}}, {\"name\": \"b\", \"type\": {\"class\": \"H5T_INTEGER\", \"base\": "
        "\"H5T_STD_U8LE\"}}]}}]}";
    hid_t tid = type_of(nested, why);
    CHECK(tid >= 0);
    CHECK_INT(H5Tget_size(tid), 4 + 8 + 8 + 12 + 3);
    CHECK_INT(H5Tget_nmembers(tid), 5);
    check_member(tid, 0, "id", 0, H5T_INTEGER);
    check_member(tid, 1, "temp", 4, H5T_FLOAT);
    check_member(tid, 2, "label", 12, H5T_STRING);
    check_member(tid, 3, "vec", 20, H5T_ARRAY);
    check_member(tid, 4, "inner", 32, H5T_COMPOUND);
    hid_t inner = H5Tget_member_type(tid, 4);
    CHECK_INT(H5Tget_size(inner), 3);
    check_member(inner, 1, "b", 2, H5T_INTEGER);
    H5Tclose(inner);
    H5Tclose(tid);
    CHECK_INT(stored_of(nested, &stored), 0);
    CHECK_INT(stored, 35);
    CHECK_INT(traits_of(nested), 0);

    /* fixture: sample2 compound with a vlen string: memory holds a char * at offset 4 */
    const char *with_vstr =
        "{\"class\": \"H5T_COMPOUND\", \"fields\": [{\"name\": \"n\", \"type\": {\"class\": "
        "\"H5T_INTEGER\", \"base\": \"H5T_STD_I32LE\"}}, {\"name\": \"s\", \"type\": {\"class\": "
        "\"H5T_STRING\", \"length\": \"H5T_VARIABLE\", \"charSet\": \"H5T_CSET_UTF8\", "
        "\"strPad\": \"H5T_STR_NULLTERM\"}}]}";
    tid = type_of(with_vstr, why);
    CHECK(tid >= 0);
    CHECK_INT(H5Tget_size(tid), 4 + sizeof(char *));
    check_member(tid, 1, "s", 4, H5T_STRING);
    H5Tclose(tid);
    CHECK_INT(stored_of(with_vstr, &stored), -EINVAL);
    CHECK_INT(traits_of(with_vstr), H5TYPE_HAS_VLEN);

    /* predefined names as field types (attr_test.testPutCompound), vlen, ref, half, enum */
    const char *mixed =
        "{\"class\": \"H5T_COMPOUND\", \"fields\": [{\"name\": \"a\", \"type\": \"H5T_STD_U8LE\"},"
        " {\"name\": \"r\", \"type\": {\"class\": \"H5T_REFERENCE\", \"base\": "
        "\"H5T_STD_REF_OBJ\"}}, {\"name\": \"h\", \"type\": \"H5T_IEEE_F16BE\"}, {\"name\": \"v\","
        " \"type\": {\"class\": \"H5T_VLEN\", \"base\": \"H5T_STD_I16LE\"}}]}";
    tid = type_of(mixed, why);
    CHECK(tid >= 0);
    CHECK_INT(H5Tget_size(tid), 1 + 8 + 2 + sizeof(hvl_t));
    check_member(tid, 1, "r", 1, H5T_REFERENCE);
    check_member(tid, 2, "h", 9, H5T_FLOAT);
    check_member(tid, 3, "v", 11, H5T_VLEN);
    H5Tclose(tid);
    CHECK_INT(traits_of(mixed), H5TYPE_HAS_VLEN | H5TYPE_HAS_REF);

    /* references stored as 48 bytes each, held as hobj_ref_t */
    const char *refs = "{\"class\": \"H5T_COMPOUND\", \"fields\": [{\"name\": \"r\", \"type\": "
                       "{\"class\": \"H5T_REFERENCE\", \"base\": \"H5T_STD_REF_OBJ\"}}, "
                       "{\"name\": \"x\", \"type\": \"H5T_STD_I32BE\"}]}";
    CHECK_INT(stored_of(refs, &stored), 0);
    CHECK_INT(stored, 52);
    CHECK_INT(traits_of(refs), H5TYPE_HAS_REF);
}

static void test_references(void)
{
    char why[WHY_LEN];
    /* fixture: sample1 object_refs dataset */
    const char *ref = "{\"class\": \"H5T_REFERENCE\", \"base\": \"H5T_STD_REF_OBJ\", "
                      "\"charSet\": \"H5T_CSET_ASCII\", \"length\": 48, \"strPad\": "
                      "\"H5T_STR_NULLPAD\"}";
    hid_t tid = type_of(ref, why);
    CHECK(tid >= 0);
    CHECK_INT(H5Tget_class(tid), H5T_REFERENCE);
    CHECK(H5Tequal(tid, H5T_STD_REF_OBJ) > 0);
    CHECK_INT(H5Tget_size(tid), sizeof(hobj_ref_t));
    H5Tclose(tid);
    size_t stored;
    CHECK_INT(stored_of(ref, &stored), 0);
    CHECK_INT(stored, 48);
    CHECK_INT(traits_of(ref), H5TYPE_HAS_REF);
    const char *arr = "{\"class\": \"H5T_ARRAY\", \"dims\": [3], \"base\": \"H5T_STD_I8LE\"}";
    CHECK_INT(stored_of(arr, &stored), 0);
    CHECK_INT(stored, 3);
}

/* An array of array of ... (levels deep) of I8, into out[2048]. */
static void nested_arrays(char *out, int levels)
{
    static const char open[] = "{\"class\": \"H5T_ARRAY\", \"dims\": 1, \"base\": ";
    out[0] = '\0';
    for (int k = 0; k < levels; k++)
        strcat(out, open);
    strcat(out, "\"H5T_STD_I8LE\"");
    for (int k = 0; k < levels; k++)
        strcat(out, "}");
}

static void test_refusals(void)
{
    char deep[2048];
    nested_arrays(deep, 17);
    const char *bad[] = {
        "42",
        "null",
        "[]",
        "\"\"",
        "\"H5T_STD_I12LE\"",
        "\"H5T_IEEE_F8LE\"",
        "\"H5T_STD_I32XE\"",
        "\"H5T_STD_I32LEX\"",
        "\"H5T_NATIVE_INT\"",
        "{}",
        "{\"class\": \"H5T_TIME\"}",
        "{\"class\": 7}",
        "{\"class\": \"H5T_INTEGER\"}",
        "{\"class\": \"H5T_INTEGER\", \"base\": \"H5T_IEEE_F32LE\"}",
        "{\"class\": \"H5T_FLOAT\", \"base\": \"H5T_STD_I32LE\"}",
        "{\"class\": \"H5T_INTEGER\", \"base\": {\"class\": \"H5T_INTEGER\", \"base\": "
        "\"H5T_STD_I8LE\"}}",
        "{\"class\": \"H5T_INTEGER\", \"base\": \"H5T_STD_I8LE\", \"dims\": [2]}",
        "{\"class\": \"H5T_STRING\", \"length\": 4}",
        "{\"class\": \"H5T_STRING\", \"charSet\": \"H5T_CSET_LATIN1\", \"length\": 4}",
        "{\"class\": \"H5T_STRING\", \"charSet\": \"H5T_CSET_ASCII\"}",
        "{\"class\": \"H5T_STRING\", \"charSet\": \"H5T_CSET_ASCII\", \"length\": 0}",
        "{\"class\": \"H5T_STRING\", \"charSet\": \"H5T_CSET_ASCII\", \"length\": -3}",
        "{\"class\": \"H5T_STRING\", \"charSet\": \"H5T_CSET_ASCII\", \"length\": \"8\"}",
        "{\"class\": \"H5T_STRING\", \"charSet\": \"H5T_CSET_ASCII\", \"length\": 67108865}",
        "{\"class\": \"H5T_STRING\", \"charSet\": \"H5T_CSET_ASCII\", \"length\": 4, "
        "\"strPad\": \"H5T_STR_ZEROPAD\"}",
        "{\"class\": \"H5T_OPAQUE\"}",
        "{\"class\": \"H5T_OPAQUE\", \"size\": 0}",
        "{\"class\": \"H5T_OPAQUE\", \"size\": 4, \"tag\": 5}",
        "{\"class\": \"H5T_ARRAY\", \"base\": \"H5T_STD_I8LE\"}",
        "{\"class\": \"H5T_ARRAY\", \"dims\": [], \"base\": \"H5T_STD_I8LE\"}",
        "{\"class\": \"H5T_ARRAY\", \"dims\": [0], \"base\": \"H5T_STD_I8LE\"}",
        "{\"class\": \"H5T_ARRAY\", \"dims\": [2, -1], \"base\": \"H5T_STD_I8LE\"}",
        "{\"class\": \"H5T_ARRAY\", \"dims\": [2.5], \"base\": \"H5T_STD_I8LE\"}",
        "{\"class\": \"H5T_ARRAY\", \"dims\": [65536, 65536, 65536], \"base\": "
        "\"H5T_STD_I8LE\"}",
        "{\"class\": \"H5T_ARRAY\", \"dims\": [8388608, 2], \"base\": \"H5T_STD_I64LE\"}",
        "{\"class\": \"H5T_ARRAY\", \"dims\": [1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,"
        "1,1,1,1,1,1,1,1,1], \"base\": \"H5T_STD_I8LE\"}",
        "{\"class\": \"H5T_ARRAY\", \"dims\": [2]}",
        "{\"class\": \"H5T_ARRAY\", \"dims\": [2], \"base\": {\"class\": \"H5T_COMPOUND\", "
        "\"fields\": [{\"name\": \"a\", \"type\": \"H5T_STD_I8LE\"}]}}",
        "{\"class\": \"H5T_ARRAY\", \"dims\": [2], \"base\": {\"class\": \"H5T_VLEN\", "
        "\"base\": \"H5T_STD_I8LE\"}}",
        "{\"class\": \"H5T_ARRAY\", \"dims\": [2], \"base\": {\"class\": \"H5T_OPAQUE\", "
        "\"size\": 2}}",
        "{\"class\": \"H5T_VLEN\"}",
        "{\"class\": \"H5T_VLEN\", \"base\": {\"class\": \"H5T_VLEN\", \"base\": "
        "\"H5T_STD_I8LE\"}}",
        "{\"class\": \"H5T_VLEN\", \"base\": {\"class\": \"H5T_STRING\", \"charSet\": "
        "\"H5T_CSET_UTF8\", \"length\": \"H5T_VARIABLE\"}}",
        "{\"class\": \"H5T_VLEN\", \"base\": {\"class\": \"H5T_COMPOUND\", \"fields\": "
        "[{\"name\": \"a\", \"type\": \"H5T_STD_I8LE\"}]}}",
        "{\"class\": \"H5T_VLEN\", \"base\": {\"class\": \"H5T_ARRAY\", \"dims\": 2, \"base\": "
        "{\"class\": \"H5T_STRING\", \"charSet\": \"H5T_CSET_UTF8\", \"length\": "
        "\"H5T_VARIABLE\"}}}",
        "{\"class\": \"H5T_ENUM\", \"base\": {\"class\": \"H5T_INTEGER\", \"base\": "
        "\"H5T_STD_I8LE\"}}",
        "{\"class\": \"H5T_ENUM\", \"mapping\": {}, \"base\": {\"class\": \"H5T_INTEGER\", "
        "\"base\": \"H5T_STD_I8LE\"}}",
        "{\"class\": \"H5T_ENUM\", \"mapping\": {\"A\": 1}, \"base\": \"H5T_STD_I8LE\"}",
        "{\"class\": \"H5T_ENUM\", \"mapping\": {\"A\": 1}, \"base\": {\"class\": \"H5T_FLOAT\","
        " \"base\": \"H5T_IEEE_F32LE\"}}",
        "{\"class\": \"H5T_ENUM\", \"mapping\": {\"A\": 300}, \"base\": {\"class\": "
        "\"H5T_INTEGER\", \"base\": \"H5T_STD_I8LE\"}}",
        "{\"class\": \"H5T_ENUM\", \"mapping\": {\"A\": -1}, \"base\": {\"class\": "
        "\"H5T_INTEGER\", \"base\": \"H5T_STD_U8LE\"}}",
        "{\"class\": \"H5T_ENUM\", \"mapping\": {\"A\": 1, \"B\": 1}, \"base\": {\"class\": "
        "\"H5T_INTEGER\", \"base\": \"H5T_STD_I8LE\"}}",
        "{\"class\": \"H5T_ENUM\", \"mapping\": {\"A\": \"1\"}, \"base\": {\"class\": "
        "\"H5T_INTEGER\", \"base\": \"H5T_STD_I8LE\"}}",
        "{\"class\": \"H5T_ENUM\", \"mapping\": {\"\": 1}, \"base\": {\"class\": "
        "\"H5T_INTEGER\", \"base\": \"H5T_STD_I8LE\"}}",
        "{\"class\": \"H5T_COMPOUND\"}",
        "{\"class\": \"H5T_COMPOUND\", \"fields\": []}",
        "{\"class\": \"H5T_COMPOUND\", \"fields\": [{\"name\": \"a\"}]}",
        "{\"class\": \"H5T_COMPOUND\", \"fields\": [{\"type\": \"H5T_STD_I8LE\"}]}",
        "{\"class\": \"H5T_COMPOUND\", \"fields\": [{\"name\": \"\", \"type\": "
        "\"H5T_STD_I8LE\"}]}",
        "{\"class\": \"H5T_COMPOUND\", \"fields\": [{\"name\": \"\\u00e9\", \"type\": "
        "\"H5T_STD_I8LE\"}]}",
        "{\"class\": \"H5T_COMPOUND\", \"fields\": [{\"name\": \"a\", \"type\": "
        "\"H5T_STD_I8LE\"}, {\"name\": \"a\", \"type\": \"H5T_STD_I16LE\"}]}",
        "{\"class\": \"H5T_COMPOUND\", \"fields\": [{\"name\": \"a\", \"type\": "
        "\"H5T_STD_I8LE\"}, {\"name\": \"b\", \"type\": \"H5T_BOGUS\"}]}",
        "{\"class\": \"H5T_COMPOUND\", \"fields\": {\"a\": \"H5T_STD_I8LE\"}}",
        "{\"class\": \"H5T_REFERENCE\", \"base\": \"H5T_STD_REF_DSETREG\"}",
        "{\"class\": \"H5T_REFERENCE\", \"base\": \"H5T_STD_REF\"}",
        "{\"class\": \"H5T_REFERENCE\"}",
        deep,
    };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        char why[WHY_LEN];
        json_t *j = parse(bad[k]);
        CHECK(j != NULL);
        why[0] = '\0';
        hid_t tid = h5type_from_json(j, why, sizeof(why));
        if (tid >= 0) {
            fprintf(stderr, "accepted: %s\n", bad[k]);
            H5Tclose(tid);
        }
        CHECK(tid < 0);
        CHECK(why[0] != '\0');
        size_t stored;
        CHECK_INT(h5type_stored_size(j, &stored), -EINVAL);
        CHECK_INT(h5type_traits(j), 0);
        json_decref(j);
    }
    char why[WHY_LEN];
    CHECK(h5type_from_json(NULL, why, sizeof(why)) < 0);
    CHECK(h5type_from_json(NULL, NULL, 0) < 0);
    hid_t tid = type_of("{\"class\": \"H5T_REFERENCE\", \"base\": \"H5T_STD_REF_DSETREG\"}", why);
    CHECK(tid < 0);
    CHECK(strstr(why, "region") != NULL);

    /* 16 levels are fine */
    nested_arrays(deep, 16);
    tid = type_of(deep, why);
    CHECK(tid >= 0);
    H5Tclose(tid);
    /* exactly 64 MiB is fine */
    tid = type_of("{\"class\": \"H5T_OPAQUE\", \"size\": 67108864}", why);
    CHECK(tid >= 0);
    H5Tclose(tid);
}

/* ---- every type of the fixture bucket ---- */

static int n_types;

static void check_fixture_type(const char *path, const char *what, const json_t *type)
{
    char why[WHY_LEN] = "";
    hid_t tid = h5type_from_json(type, why, sizeof(why));
    if (tid < 0)
        fprintf(stderr, "%s %s: %s\n", path, what, why);
    CHECK(tid >= 0);
    size_t stored = 0;
    int rc = h5type_stored_size(type, &stored);
    unsigned traits = h5type_traits(type);
    CHECK(rc == 0 || (rc == -EINVAL && (traits & H5TYPE_HAS_VLEN)));
    if (tid >= 0 && rc == 0 && !(traits & H5TYPE_HAS_REF))
        CHECK_INT(stored, H5Tget_size(tid));
    if (tid >= 0)
        H5Tclose(tid);
    n_types++;
}

static int visit(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    size_t len = strlen(path);
    if (flag != FTW_F || len < 5 || strcmp(path + len - 5, ".json") != 0)
        return 0;
    FILE *f = fopen(path, "rb");
    char text[1 << 16];
    size_t n = f ? fread(text, 1, sizeof(text), f) : 0;
    if (f)
        fclose(f);
    CHECK(n > 0 && n < sizeof(text));
    json_t *doc = hjson_loadb(text, n, NULL, 0);
    CHECK(doc != NULL);
    if (json_object_get(doc, "type"))
        check_fixture_type(path, "type", json_object_get(doc, "type"));
    const char *name;
    json_t *attr;
    json_object_foreach(json_object_get(doc, "attributes"), name, attr)
        check_fixture_type(path, name, json_object_get(attr, "type"));
    json_decref(doc);
    return 0;
}

static void test_fixture_bucket(const char *data)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/hsds-v2/hsdstest", data);
    CHECK_INT(nftw(path, visit, 16, FTW_PHYS), 0);
    CHECK(n_types > 100);
}

/* HDF5 1.10 cannot count or list datatype ids (H5Inmembers and H5Isearch refuse library
 * types), but it numbers the ids of each type one after the other: every id between two
 * probes that is still valid was leaked. */
static hid_t probe_type(void)
{
    hid_t tid = H5Tcopy(H5T_NATIVE_INT);
    CHECK(tid >= 0);
    H5Tclose(tid);
    return tid;
}

static int open_types_since(hid_t first)
{
    hid_t last = probe_type();
    int open = 0;
    for (hid_t id = first + 1; id < last; id++) {
        if (H5Iis_valid(id) > 0)
            open++;
    }
    CHECK(last - first > 200); /* the probes did see the ids of this test */
    return open;
}

int main(int argc, char **argv)
{
    CHECK(H5open() >= 0);
    hid_t first = probe_type();
    test_integers();
    test_floats();
    test_strings();
    test_vlen_opaque_array();
    test_enums();
    test_compounds();
    test_references();
    test_refusals();
    if (argc > 1)
        test_fixture_bucket(argv[1]);
    else
        CHECK(!"argv[1] (tests/data) missing");

    CHECK_INT(open_types_since(first), 0); /* every type built was closed */
    CHECK(H5close() >= 0);
    return check_done("h5type");
}
