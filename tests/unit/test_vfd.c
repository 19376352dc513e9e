/*
 * The image driver with the real HDF5 library: a file whose chunks are placeholders is
 * assembled from the extent map plus chunk bytes made on the spot, written to disk, and read
 * back with HDF5's own sec2 driver. Also: rebuilds are byte-identical, a rewritten chunk moves
 * (last write wins), variable-length data is kept as bytes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>

#include "check.h"
#include "extent.h"
#include "vfd.h"

#define N0 100
#define N1 60
#define C0 40
#define C1 30

/* Element value of chunk (i, j) at in-chunk position k: identifies chunk and position. */
static float chunk_value(uint64_t chunk, size_t k)
{
    return (float)(chunk * 100000 + k);
}

static hid_t make_file(struct vfd_target *t)
{
    hid_t fapl = vfd_fapl(t);
    CHECK(fapl >= 0);
    CHECK(H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110) >= 0);
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
    CHECK(H5Pset_obj_track_times(fcpl, 0) >= 0);
    hid_t f = H5Fcreate("image", H5F_ACC_TRUNC, fcpl, fapl);
    H5Pclose(fcpl);
    H5Pclose(fapl);
    return f;
}

/* Grid 3x2; chunk 4 (= (2,0)) is absent and must read as the fill value; chunk 1 is written
 * twice so the first placement is freed. */
static void build(struct vfd_target *t, const void *placeholder)
{
    hid_t f = make_file(t);
    CHECK(f >= 0);
    hsize_t dims[2] = { N0, N1 }, cdims[2] = { C0, C1 };
    hid_t space = H5Screate_simple(2, dims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    float fill = -1.5f;
    CHECK(H5Pset_chunk(dcpl, 2, cdims) >= 0);
    CHECK(H5Pset_fill_value(dcpl, H5T_NATIVE_FLOAT, &fill) >= 0);
    CHECK(H5Pset_obj_track_times(dcpl, 0) >= 0);
    hid_t d = H5Dcreate2(f, "data", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    CHECK(d >= 0);
    uint64_t order[] = { 0, 1, 2, 3, 5, 1 };
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        hsize_t offset[2] = { (order[i] / 2) * C0, (order[i] % 2) * C1 };
        t->tag = (struct extent_tag){ 0, order[i] };
        CHECK(H5Dwrite_chunk(d, H5P_DEFAULT, 0, offset, C0 * C1 * 4, placeholder) >= 0);
    }
    /* variable-length strings: their bytes live in the global heap and must be kept */
    const char *words[3] = { "alpha", "beta", "gamma" };
    hsize_t n = 3;
    hid_t vs = H5Tcopy(H5T_C_S1);
    CHECK(H5Tset_size(vs, H5T_VARIABLE) >= 0);
    hid_t wspace = H5Screate_simple(1, &n, NULL);
    /* no modification time either: two builds a second apart must still be equal */
    hid_t wdcpl = H5Pcreate(H5P_DATASET_CREATE);
    CHECK(H5Pset_obj_track_times(wdcpl, 0) >= 0);
    hid_t w = H5Dcreate2(f, "words", vs, wspace, H5P_DEFAULT, wdcpl, H5P_DEFAULT);
    H5Pclose(wdcpl);
    CHECK(H5Dwrite(w, vs, H5S_ALL, H5S_ALL, H5P_DEFAULT, words) >= 0);
    H5Dclose(w);
    H5Sclose(wspace);
    H5Tclose(vs);
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(space);
    CHECK(H5Fclose(f) >= 0);
    CHECK_INT(t->failed, 0);
    CHECK_INT(extent_finish(t->map, t->eoa), 0);
}

static unsigned char *assemble(const struct extent_map *map)
{
    size_t n;
    const struct segment *s = extent_segments(map, &n);
    unsigned char *file = calloc(1, extent_size(map));
    for (size_t i = 0; i < n; i++) {
        if (s[i].kind == SEGMENT_BYTES) {
            memcpy(file + s[i].off, s[i].u.bytes, s[i].len);
        } else if (s[i].kind == SEGMENT_CHUNK) {
            float *v = (float *)(file + s[i].off);
            CHECK_INT(s[i].len, C0 * C1 * 4);
            for (size_t k = 0; k < C0 * C1; k++)
                v[k] = chunk_value(s[i].u.chunk, k);
        }
        if (i > 0)
            CHECK(s[i].off >= s[i - 1].off + s[i - 1].len);
    }
    return file;
}

static void check_read_back(const char *path)
{
    static float data[N0][N1];
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    CHECK(f >= 0);
    hid_t d = H5Dopen2(f, "data", H5P_DEFAULT);
    CHECK(H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    int bad = 0;
    for (size_t i = 0; i < N0; i++)
        for (size_t j = 0; j < N1; j++) {
            uint64_t chunk = (i / C0) * 2 + j / C1;
            size_t k = (i % C0) * C1 + j % C1;
            float want = chunk == 4 ? -1.5f : chunk_value(chunk, k);
            bad += data[i][j] != want;
        }
    CHECK_INT(bad, 0);
    H5Dclose(d);
    char *words[3] = { 0 };
    hid_t w = H5Dopen2(f, "words", H5P_DEFAULT);
    hid_t vs = H5Dget_type(w);
    CHECK(H5Dread(w, vs, H5S_ALL, H5S_ALL, H5P_DEFAULT, words) >= 0);
    CHECK_STR(words[0], "alpha");
    CHECK_STR(words[2], "gamma");
    hsize_t n = 3;
    hid_t space = H5Screate_simple(1, &n, NULL);
    H5Dvlen_reclaim(vs, space, H5P_DEFAULT, words);
    H5Sclose(space);
    H5Tclose(vs);
    H5Dclose(w);
    H5Fclose(f);
}

int main(void)
{
    static unsigned char placeholder[C0 * C1 * 4];
    struct vfd_target t1 = { .map = extent_map_new(), .placeholder = placeholder };
    struct vfd_target t2 = { .map = extent_map_new(), .placeholder = placeholder };
    build(&t1, placeholder);
    sleep(1); /* a second apart: nothing time-dependent may be in the file */
    build(&t2, placeholder);
    CHECK_INT(t1.placeholders, 6);
    CHECK(extent_size(t1.map) > 5 * C0 * C1 * 4);

    size_t n;
    const struct segment *s = extent_segments(t1.map, &n);
    size_t chunks = 0;
    for (size_t i = 0; i < n; i++)
        chunks += s[i].kind == SEGMENT_CHUNK;
    CHECK_INT(chunks, 5); /* chunk 1's first placement was freed */

    unsigned char *a = assemble(t1.map), *b = assemble(t2.map);
    CHECK_INT(extent_size(t1.map), extent_size(t2.map));
    CHECK(memcmp(a, b, extent_size(t1.map)) == 0);

    char path[] = "/tmp/h5osfs-vfd-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    CHECK(write(fd, a, extent_size(t1.map)) == (ssize_t)extent_size(t1.map));
    close(fd);
    check_read_back(path);
    unlink(path);
    free(a);
    free(b);
    extent_map_free(t1.map);
    extent_map_free(t2.map);
    return check_done("vfd");
}
