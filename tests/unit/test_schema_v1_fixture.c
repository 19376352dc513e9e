/*
 * The schema v1 fixture (tests/data/hsds-v1/hsdstest, made by tools/v2_to_v1.py in Python)
 * against the daemon's own key functions: every top-level object key must be schema_obj_key
 * of the id in its JSON, and every chunk key schema_chunk_key of its dataset and index. Two
 * implementations of spec §11 that must agree on every key of the bucket.
 */
#include "h5osfs/schema/schema.h"
#include "h5osfs/schema/hjson.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "check.h"

#define MAX_RANK 32

/* "3_0_12" -> {3, 0, 12}; the rank, or -1. */
static int parse_index(const char *s, uint64_t *index)
{
    int rank = 0;
    for (;;) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (end == s || errno || rank == MAX_RANK)
            return -1;
        index[rank++] = v;
        if (*end == '\0')
            return rank;
        if (*end != '_')
            return -1;
        s = end + 1;
    }
}

/* A chunk key "hhhhh-c-<uuid>_i_j": its dataset "d-<uuid>" and index give the same key. */
static void check_chunk_key(const char *name)
{
    char dset[SCHEMA_ID_BUF], key[1024];
    uint64_t index[MAX_RANK];
    const char *id = name + 6, *under = strchr(id, '_');
    CHECK(under != NULL && under - id == SCHEMA_ID_LEN);
    if (!under || under - id != SCHEMA_ID_LEN)
        return;
    snprintf(dset, sizeof dset, "d%.*s", SCHEMA_ID_LEN - 1, id + 1);
    int rank = parse_index(under + 1, index);
    CHECK(rank > 0);
    CHECK_INT(schema_chunk_key(dset, index, rank, -1, key, sizeof key), 0);
    CHECK_STR(key, name);
}

/* An object key: the id inside the JSON gives the key, and is a v1 id. */
static void check_object_key(const char *dir, const char *name)
{
    char path[4096 + 512], key[1024];
    static char text[1 << 16];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "rb");
    size_t n = fp ? fread(text, 1, sizeof text, fp) : 0;
    if (fp)
        fclose(fp);
    CHECK(n > 0 && n < sizeof text);
    /* hjson: HSDS's JSON may hold NaN and Infinity, which jansson alone refuses */
    json_t *doc = n > 0 ? hjson_loadb(text, n, NULL, 0) : NULL;
    const char *id = json_string_value(json_object_get(doc, "id"));
    CHECK(id != NULL);
    if (id) {
        CHECK_INT(schema_id_version(id), 1);
        CHECK_INT(schema_obj_key(id, key, sizeof key), 0);
        CHECK_STR(key, name);
    }
    json_decref(doc);
}

int main(int argc, char **argv)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/hsds-v1/hsdstest", argc > 1 ? argv[1] : "tests/data");
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    int objects = 0, chunks = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (strlen(e->d_name) < 8 || e->d_name[5] != '-')
            continue; /* ".", "..", home/, linked/ */
        if (e->d_name[6] == 'c') {
            check_chunk_key(e->d_name);
            chunks++;
        } else {
            check_object_key(dir, e->d_name);
            objects++;
        }
    }
    if (d)
        closedir(d);
    /* tests/data/hsds-v1/LISTING.txt: 94 objects and 82 chunks */
    CHECK_INT(objects, 94);
    CHECK_INT(chunks, 82);
    return check_done("schema_v1_fixture");
}
