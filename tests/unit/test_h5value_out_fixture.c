/*
 * h5value_to_json and h5value_to_stored on values the real HDF5 library reads, the way the
 * writing side uses them: the file's type gives the type JSON (h5type_to_json), the JSON gives
 * the memory type (h5type_from_json), HDF5 converts the file's values into it (padded compounds
 * packed, big-endian kept, vlen data allocated by HDF5), and the value is written as HSDS
 * stores it.
 *
 * argv[1] is tests/data. The fixture bucket hsds-v2/hsdstest was loaded by real HSDS (hsload)
 * from the files in hsds-v2/source: every attribute value and fill value made from a source
 * file must equal, as hjson_dumps writes it, the JSON HSDS stored; every uncompressed
 * single-chunk dataset must give the bytes of HSDS's chunk object (§6.2, §6.3), object
 * references included (resolved through the bucket's ids).
 */
#include "h5osfs/h5json/h5value.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "h5osfs/h5json/h5type.h"
#include "h5osfs/schema/hjson.h"

#include "check.h"
#include "fixture_walk.h"

#define WHY_LEN 256

/* The JSON and memory type of a file type. 0 or -1. */
static int mem_type_of(hid_t file_type, json_t **json, hid_t *mem)
{
    char why[WHY_LEN] = "";
    *json = h5type_to_json(file_type, why, sizeof(why));
    *mem = *json ? h5type_from_json(*json, why, sizeof(why)) : H5I_INVALID_HID;
    if (*mem < 0)
        fprintf(stderr, "no memory type: %s\n", why);
    CHECK(*mem >= 0);
    return *mem >= 0 ? 0 : -1;
}

/* The shape of a dataspace: 1 for H5S_NULL (no value), 0 otherwise. */
static int shape_of(hid_t space, int *rank, hsize_t dims[H5S_MAX_RANK], size_t *n)
{
    H5S_class_t cls = H5Sget_simple_extent_type(space);
    CHECK(cls != H5S_NO_CLASS);
    *rank = H5Sget_simple_extent_ndims(space);
    CHECK(*rank >= 0 && H5Sget_simple_extent_dims(space, dims, NULL) == *rank);
    *n = 1;
    for (int k = 0; k < *rank; k++)
        *n *= (size_t)dims[k];
    return cls == H5S_NULL;
}

/* ---- values HDF5 writes and reads in file types ---- */

struct padded {
    char c;
    double d;
    short a[2][3];
    const char *s;
};

/* A padded compound in native layout, written and read back through the JSON's memory type. */
static void test_hdf5_compound(hid_t fid)
{
    hid_t vstr = H5Tcopy(H5T_C_S1);
    CHECK(vstr >= 0 && H5Tset_size(vstr, H5T_VARIABLE) >= 0);
    hsize_t adims[2] = { 2, 3 }, dims[1] = { 2 };
    hid_t arr = H5Tarray_create2(H5T_NATIVE_SHORT, 2, adims);
    hid_t ct = H5Tcreate(H5T_COMPOUND, sizeof(struct padded));
    CHECK(H5Tinsert(ct, "c", HOFFSET(struct padded, c), H5T_NATIVE_SCHAR) >= 0);
    CHECK(H5Tinsert(ct, "d", HOFFSET(struct padded, d), H5T_IEEE_F64BE) >= 0);
    CHECK(H5Tinsert(ct, "a", HOFFSET(struct padded, a), arr) >= 0);
    CHECK(H5Tinsert(ct, "s", HOFFSET(struct padded, s), vstr) >= 0);
    struct padded rows[2] = { { -3, 0.5, { { 1, 2, 3 }, { 4, 5, 6 } }, "ab" },
                              { 7, -1e300, { { -1, 0, 0 }, { 0, 0, 32767 } }, "\xc3\xa9" } };
    hid_t native = H5Tcreate(H5T_COMPOUND, sizeof(struct padded)); /* with a native double */
    CHECK(H5Tinsert(native, "c", HOFFSET(struct padded, c), H5T_NATIVE_SCHAR) >= 0);
    CHECK(H5Tinsert(native, "d", HOFFSET(struct padded, d), H5T_NATIVE_DOUBLE) >= 0);
    CHECK(H5Tinsert(native, "a", HOFFSET(struct padded, a), arr) >= 0);
    CHECK(H5Tinsert(native, "s", HOFFSET(struct padded, s), vstr) >= 0);
    hid_t space = H5Screate_simple(1, dims, NULL);
    hid_t dset = H5Dcreate2(fid, "padded", ct, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(dset >= 0 && H5Dwrite(dset, native, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows) >= 0);

    json_t *json;
    hid_t mem;
    hid_t file_type = H5Dget_type(dset);
    if (mem_type_of(file_type, &json, &mem) == 0) {
        CHECK_INT(H5Tget_size(mem), 1 + 8 + 12 + sizeof(char *)); /* packed */
        unsigned char *buf = calloc(2, H5Tget_size(mem));         /* h5value_free frees it */
        CHECK(buf && H5Dread(dset, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
        json_t *value = NULL;
        char why[WHY_LEN] = "";
        CHECK_INT(h5value_to_json(json, mem, buf, 1, dims, NULL, &value, why, sizeof(why)), 0);
        char *text = fixture_dumps(value);
        CHECK_STR(text, "[[-3, 0.5, [[1, 2, 3], [4, 5, 6]], \"ab\"], [7, -1e+300, [[-1, 0, 0], "
                        "[0, 0, 32767]], \"\\u00e9\"]]");
        unsigned char *stored = NULL;
        size_t len = 0;
        CHECK_INT(h5value_to_stored(json, mem, buf, 2, NULL, &stored, &len, why, sizeof(why)), 0);
        /* c, d big-endian, a little-endian (native short), s as count + bytes */
        /* clang-format off */
        static const unsigned char want[] = {
            0xfd,                                           /* c */
            0x3f, 0xe0, 0, 0, 0, 0, 0, 0,                   /* d: 0.5, big-endian */
            1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0,             /* a */
            2, 0, 0, 0, 'a', 'b',                           /* s */
            7,                                              /* c */
            0xfe, 0x37, 0xe4, 0x3c, 0x88, 0x00, 0x75, 0x9c, /* d: -1e300 */
            0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0x7f, /* a */
            2, 0, 0, 0, 0xc3, 0xa9};                        /* s */
        /* clang-format on */
        CHECK_INT(len, sizeof(want));
        CHECK(stored && memcmp(stored, want, sizeof(want)) == 0);
        free(stored);
        free(text);
        json_decref(value);
        h5value_free(mem, buf, 2);
        CHECK(H5Tclose(mem) >= 0);
    }
    json_decref(json);
    CHECK(H5Tclose(file_type) >= 0 && H5Dclose(dset) >= 0 && H5Sclose(space) >= 0);
    CHECK(H5Tclose(ct) >= 0 && H5Tclose(native) >= 0 && H5Tclose(arr) >= 0);
    CHECK(H5Tclose(vstr) >= 0);
}

/* ---- the fixture bucket ---- */

struct tally {
    int values, fills, chunks;
};

static void compare_value(const char *where, const char *name, const json_t *ours,
                          const json_t *theirs)
{
    char *a = fixture_dumps(ours), *b = fixture_dumps(theirs);
    if (strcmp(a, b) != 0)
        fprintf(stderr, "%s %s:\n  ours   %s\n  bucket %s\n", where, name, a, b);
    CHECK(strcmp(a, b) == 0);
    free(a);
    free(b);
}

static void compare_attr(struct tally *t, struct fixture *fx, const struct fixture_object *o,
                         const char *name, const json_t *attr)
{
    hid_t aid = H5Aopen_by_name(fx->fid, o->path, name, H5P_DEFAULT, H5P_DEFAULT);
    hid_t space = aid >= 0 ? H5Aget_space(aid) : H5I_INVALID_HID;
    hid_t file_type = aid >= 0 ? H5Aget_type(aid) : H5I_INVALID_HID;
    int rank;
    hsize_t dims[H5S_MAX_RANK];
    size_t n;
    json_t *json = NULL;
    hid_t mem = H5I_INVALID_HID;
    CHECK(space >= 0 && file_type >= 0);
    if (space >= 0 && shape_of(space, &rank, dims, &n) == 0 &&
        mem_type_of(file_type, &json, &mem) == 0) {
        void *buf = calloc(n ? n : 1, H5Tget_size(mem));
        json_t *value = NULL;
        char why[WHY_LEN] = "";
        struct h5value_ids ids = { fixture_id_of, fx };
        CHECK(buf && H5Aread(aid, mem, buf) >= 0);
        CHECK_INT(h5value_to_json(json, mem, buf, rank, dims, &ids, &value, why, sizeof(why)), 0);
        compare_value(o->path, name, value, json_object_get(attr, "value"));
        json_decref(value);
        h5value_free(mem, buf, n);
        t->values++;
    }
    json_decref(json);
    CHECK(mem < 0 || H5Tclose(mem) >= 0);
    CHECK(file_type < 0 || H5Tclose(file_type) >= 0);
    CHECK(space < 0 || H5Sclose(space) >= 0);
    CHECK(aid >= 0 && H5Aclose(aid) >= 0);
}

static void compare_fill(struct tally *t, hid_t dset, const json_t *json, hid_t mem,
                         const struct fixture_object *o)
{
    const json_t *fill =
        json_object_get(json_object_get(o->doc, "creationProperties"), "fillValue");
    if (!fill)
        return;
    hid_t dcpl = H5Dget_create_plist(dset);
    void *buf = calloc(1, H5Tget_size(mem));
    json_t *value = NULL;
    char why[WHY_LEN] = "";
    CHECK(dcpl >= 0 && buf && H5Pget_fill_value(dcpl, mem, buf) >= 0);
    CHECK_INT(h5value_to_json(json, mem, buf, 0, NULL, NULL, &value, why, sizeof(why)), 0);
    compare_value(o->path, "fillValue", value, fill);
    json_decref(value);
    h5value_free(mem, buf, 1);
    CHECK(H5Pclose(dcpl) >= 0);
    t->fills++;
}

/* The bytes of the dataset's only chunk object if the dataset is stored uncompressed in a
 * single chunk of exactly its shape; NULL otherwise. */
static unsigned char *single_chunk(struct fixture *fx, const struct fixture_object *o, int rank,
                                   const hsize_t *dims, size_t *len)
{
    const json_t *layout = json_object_get(o->doc, "layout");
    const json_t *props = json_object_get(o->doc, "creationProperties");
    const char *cls = json_string_value(json_object_get(layout, "class"));
    const json_t *cdims = json_object_get(layout, "dims");
    if (!cls || strcmp(cls, "H5D_CHUNKED") != 0 ||
        json_array_size(json_object_get(props, "filters")) > 0)
        return NULL;
    if (rank == 0 &&
        !(json_array_size(cdims) == 1 && json_integer_value(json_array_get(cdims, 0)) == 1))
        return NULL;
    for (int k = 0; k < rank; k++) {
        if (json_array_size(cdims) != (size_t)rank ||
            json_integer_value(json_array_get(cdims, (size_t)k)) != (json_int_t)dims[k])
            return NULL;
    }
    uint64_t index[H5S_MAX_RANK] = { 0 };
    char key[512], path[4096 + 512];
    CHECK_INT(schema_chunk_key(o->id, index, rank ? rank : 1, -1, key, sizeof(key)), 0);
    snprintf(path, sizeof(path), "%s/%s", fx->bucket, key);
    struct stat st;
    if (stat(path, &st) != 0)
        return NULL; /* never written: all fill value */
    unsigned char *bytes = malloc((size_t)st.st_size + 1);
    FILE *fp = fopen(path, "rb");
    *len = fp && bytes ? fread(bytes, 1, (size_t)st.st_size, fp) : 0;
    if (fp)
        fclose(fp);
    CHECK(*len == (size_t)st.st_size);
    return bytes;
}

static void compare_chunk(struct tally *t, struct fixture *fx, const struct fixture_object *o,
                          hid_t dset, const json_t *json, hid_t mem)
{
    hid_t space = H5Dget_space(dset);
    int rank = 0; /* defined even after a failed CHECK (which goes on) */
    hsize_t dims[H5S_MAX_RANK];
    size_t n = 0, len = 0;
    CHECK(space >= 0 && shape_of(space, &rank, dims, &n) == 0);
    unsigned char *chunk = single_chunk(fx, o, rank, dims, &len);
    if (chunk) {
        void *buf = calloc(n ? n : 1, H5Tget_size(mem));
        unsigned char *stored = NULL;
        size_t stored_len = 0;
        char why[WHY_LEN] = "";
        struct h5value_ids ids = { fixture_id_of, fx };
        CHECK(buf && H5Dread(dset, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
        CHECK_INT(
            h5value_to_stored(json, mem, buf, n, &ids, &stored, &stored_len, why, sizeof(why)), 0);
        if (stored_len != len || memcmp(stored, chunk, len) != 0)
            fprintf(stderr, "%s: %zu stored bytes differ from the %zu of HSDS's chunk\n", o->path,
                    stored_len, len);
        CHECK(stored_len == len && memcmp(stored, chunk, len) == 0);
        free(stored);
        h5value_free(mem, buf, n);
        t->chunks++;
    }
    free(chunk);
    CHECK(space >= 0 && H5Sclose(space) >= 0);
}

static void compare_dataset(struct tally *t, struct fixture *fx, const struct fixture_object *o)
{
    hid_t dset = H5Dopen2(fx->fid, o->path, H5P_DEFAULT);
    hid_t file_type = dset >= 0 ? H5Dget_type(dset) : H5I_INVALID_HID;
    json_t *json = NULL;
    hid_t mem = H5I_INVALID_HID;
    CHECK(file_type >= 0);
    if (file_type >= 0 && mem_type_of(file_type, &json, &mem) == 0) {
        compare_fill(t, dset, json, mem, o);
        compare_chunk(t, fx, o, dset, json, mem);
    }
    json_decref(json);
    CHECK(mem < 0 || H5Tclose(mem) >= 0);
    CHECK(file_type < 0 || H5Tclose(file_type) >= 0);
    CHECK(dset >= 0 && H5Dclose(dset) >= 0);
}

static void test_fixture(const char *data)
{
    static const char *const domains[][2] = {
        { "sample1.h5", "sample1.h5" },         { "sample2.h5", "sample2.h5" },
        { "sample2_z_zstd.h5", "sample2.h5" },  { "sample3.h5", "sample3.h5" },
        { "sample_link.h5", "sample_link.h5" }, { "partial.h5", "partial_expected.h5" },
    };
    struct tally t = { 0, 0, 0 };
    for (size_t k = 0; k < sizeof(domains) / sizeof(domains[0]); k++) {
        struct fixture fx;
        if (fixture_open(&fx, data, domains[k][0], domains[k][1]) == 0) {
            for (size_t j = 0; j < fx.n; j++) {
                const struct fixture_object *o = &fx.objects[j];
                const char *name;
                json_t *attr;
                json_object_foreach(json_object_get(o->doc, "attributes"), name, attr)
                    compare_attr(&t, &fx, o, name, attr);
                if (o->id[0] == 'd')
                    compare_dataset(&t, &fx, o);
            }
        }
        fixture_close(&fx);
    }
    printf("fixture: %d attribute values, %d fill values, %d chunks\n", t.values, t.fills,
           t.chunks);
    CHECK(t.values >= 80);
    CHECK(t.fills >= 6);
    CHECK(t.chunks >= 20);
}

int main(int argc, char **argv)
{
    CHECK(H5open() >= 0);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    CHECK(fapl >= 0 && H5Pset_fapl_core(fapl, 1 << 16, 0) >= 0);
    hid_t fid = H5Fcreate("h5value-out-test.h5", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    CHECK(fid >= 0 && H5Pclose(fapl) >= 0);
    test_hdf5_compound(fid);
    CHECK_INT(H5Fget_obj_count(fid, H5F_OBJ_ALL), 1);
    CHECK(H5Fclose(fid) >= 0);
    if (argc > 1)
        test_fixture(argv[1]);
    else
        CHECK(!"argv[1] (tests/data) missing");
    CHECK_INT(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL), 0);
    CHECK(H5close() >= 0);
    return check_done("h5value_out_fixture");
}
