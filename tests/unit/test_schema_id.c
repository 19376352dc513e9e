/*
 * Unit tests of schema ids, keys and domain names (spec/hsds-format.md §1, §2, §11).
 * Vectors are the spec's worked examples and ids/keys copied from the fixture bucket
 * fixtures/hsds-v2/hsdstest, which real HSDS 0.9.4 wrote; they are embedded, not read.
 */
#include "h5osfs/schema/schema.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "h5osfs/schema/pool.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define KEY_BUF 1024

/* Spec §2.1 worked example. */
#define SPEC_ROOT "g-b03b24ef-69f244b6-38b3-ac67e1-7acc3e"
#define SPEC_DSET "d-b03b24ef-69f244b6-56e5-25125a-89ba79"
/* Spec §11 v1 examples. */
#define V1_GROUP "g-2428ae0e-a082-11e6-9d93-0242ac110005"
#define V1_CHUNK "c-2428ae0e-a082-11e6-9d93-0242ac110005_0_1"
#define V1_DSET "d-4ab77230-9c0e-11e6-8fdd-0242ac110005"

/* The nine domain roots of the fixture bucket (home/test_user1/<x>.h5/.domain.json). */
static const char *const fixture_roots[] = {
    "g-1e526a9c-e25565c6-96da-e2146a-dded4e", "g-5081627e-84cc3427-d809-eaf60c-44bcaf",
    "g-5897df5c-0a297b92-d01f-57d482-a1f31a", "g-f9b4b1c7-5fba90ae-713c-394fd7-321826",
    "g-55dd170e-0f0e83c7-dd55-9f8687-860b4f", "g-2dd05233-5ca263d5-a558-dabbd4-2aeb5d",
    "g-fe3c62cd-1fb6bfc1-76b4-ea4597-3e3749", "g-d64bf735-c43d061d-5ec3-7fbd4c-b58e95",
    "g-ed8fa543-b000e2e7-6507-2dcb38-886a6f",
};

/* id -> key, v1 and v2, every class; v2 rows are real objects of the fixture bucket. */
static const struct {
    const char *id;
    const char *key;
} obj_keys[] = {
    { SPEC_ROOT, "db/b03b24ef-69f244b6/.group.json" },
    { SPEC_DSET, "db/b03b24ef-69f244b6/d/56e5-25125a-89ba79/.dataset.json" },
    { "c-b03b24ef-69f244b6-56e5-25125a-89ba79_3_0_12",
      "db/b03b24ef-69f244b6/d/56e5-25125a-89ba79/3_0_12" },
    { "c7-b03b24ef-69f244b6-56e5-25125a-89ba79_3_0_12",
      "db/b03b24ef-69f244b6/d/56e5-25125a-89ba79/p7/3_0_12" },
    { "g-d64bf735-c43d061d-5ec3-7fbd4c-b58e95", "db/d64bf735-c43d061d/.group.json" },
    { "g-d64bf735-c43d061d-ccec-b24d36-800ad8",
      "db/d64bf735-c43d061d/g/ccec-b24d36-800ad8/.group.json" },
    { "t-d64bf735-c43d061d-6399-239b79-fca97e",
      "db/d64bf735-c43d061d/t/6399-239b79-fca97e/.datatype.json" },
    { "t-d64bf735-c43d061d-90df-34ef80-05e3bd",
      "db/d64bf735-c43d061d/t/90df-34ef80-05e3bd/.datatype.json" },
    { "d-5081627e-84cc3427-2676-fe3c22-f7924f",
      "db/5081627e-84cc3427/d/2676-fe3c22-f7924f/.dataset.json" },
    { "c-5081627e-84cc3427-2676-fe3c22-f7924f_0", "db/5081627e-84cc3427/d/2676-fe3c22-f7924f/0" },
    { "c-5897df5c-0a297b92-3429-31a752-46224c_2_1",
      "db/5897df5c-0a297b92/d/3429-31a752-46224c/2_1" },
    { "c-5897df5c-0a297b92-f06f-e42827-c1f664_0_0_0",
      "db/5897df5c-0a297b92/d/f06f-e42827-c1f664/0_0_0" },
    { "c-ed8fa543-b000e2e7-854a-e2de3c-877306_1_2",
      "db/ed8fa543-b000e2e7/d/854a-e2de3c-877306/1_2" },
    { V1_GROUP, "a860f-" V1_GROUP },
    { V1_CHUNK, "e89bb-" V1_CHUNK },
    { V1_DSET, "4feb1-" V1_DSET },
    /* MD5 prefixes below computed with Python's hashlib, as idUtil.getIdHash does. */
    { "t-4ab77230-9c0e-11e6-8fdd-0242ac110005", "220de-t-4ab77230-9c0e-11e6-8fdd-0242ac110005" },
    { "c7-4ab77230-9c0e-11e6-8fdd-0242ac110005_3_0_12",
      "a30a9-c7-4ab77230-9c0e-11e6-8fdd-0242ac110005_3_0_12" },
};

static void test_versions(void)
{
    static const struct {
        const char *id;
        int version;
    } cases[] = {
        { SPEC_ROOT, 2 },
        { SPEC_DSET, 2 },
        { "t-d64bf735-c43d061d-6399-239b79-fca97e", 2 },
        { "c-b03b24ef-69f244b6-56e5-25125a-89ba79_3_0_12", 2 },
        { "c12-b03b24ef-69f244b6-56e5-25125a-89ba79_3_0_12", 2 },
        { "c0-b03b24ef-69f244b6-56e5-25125a-89ba79_0", 2 },
        { "c-b03b24ef-69f244b6-56e5-25125a-89ba79_18446744073709551615", 2 },
        { V1_GROUP, 1 },
        { V1_DSET, 1 },
        { V1_CHUNK, 1 },
        { "c3-2428ae0e-a082-11e6-9d93-0242ac110005_0_1", 1 },
        { "t-2428ae0e-a082-11e6-9d93-0242ac110005", 1 },
        /* uppercase hex: HSDS mints lowercase only and compares characters */
        { "g-B03B24EF-69f244b6-38b3-ac67e1-7acc3e", -EINVAL },
        { "g-2428AE0E-a082-11e6-9d93-0242ac110005", -EINVAL },
        /* wrong grouping, wrong length, non-hex */
        { "g-b03b24ef69f244b6-38b3-ac67e1-7acc3e", -EINVAL },
        { "g-b03b24ef-69f244b6-38b3a-c67e1-7acc3e", -EINVAL },
        { "g-b03b24e-f69f244b6-38b3-ac67e1-7acc3e", -EINVAL },
        { "g-2428ae0e-a082-11e6-9d93-0242ac11000", -EINVAL },
        { "g-2428ae0e-a082-11e6-9d93-0242ac1100055", -EINVAL },
        { "g-b03b24ef-69f244b6-38b3-ac67e1-7acc3", -EINVAL },
        { "g-b03b24ef-69f244b6-38b3-ac67e1-7acc3e0", -EINVAL },
        { "g-b03b24ef-69f244b6-38b3-ac67e1-7acc3g", -EINVAL },
        { "g-b03b24ef-69f244b6-38b3-ac67e1-7acc3e-", -EINVAL },
        { "g-b03b24ef-69f244b6-38b3-ac67e1-7acc-3e", -EINVAL },
        { "g-b03b24ef-69f2-44b6-38b3-ac67e17acc3e", 1 }, /* regrouped v2 digits are a v1 id */
        /* bad prefixes */
        { "x-b03b24ef-69f244b6-38b3-ac67e1-7acc3e", -EINVAL },
        { "G-b03b24ef-69f244b6-38b3-ac67e1-7acc3e", -EINVAL },
        { "gg-b03b24ef-69f244b6-38b3-ac67e1-7acc3e", -EINVAL },
        { "g1-b03b24ef-69f244b6-38b3-ac67e1-7acc3e", -EINVAL },
        { "-b03b24ef-69f244b6-38b3-ac67e1-7acc3e", -EINVAL },
        { "b03b24ef-69f244b6-38b3-ac67e1-7acc3e", -EINVAL },
        { "g_b03b24ef-69f244b6-38b3-ac67e1-7acc3e", -EINVAL },
        /* suffixes: only chunks have one, and it must be decimal indices */
        { "d-b03b24ef-69f244b6-56e5-25125a-89ba79_3", -EINVAL },
        { "c-b03b24ef-69f244b6-56e5-25125a-89ba79", -EINVAL },
        { "c-b03b24ef-69f244b6-56e5-25125a-89ba79_", -EINVAL },
        { "c-b03b24ef-69f244b6-56e5-25125a-89ba79_3_", -EINVAL },
        { "c-b03b24ef-69f244b6-56e5-25125a-89ba79__3", -EINVAL },
        { "c-b03b24ef-69f244b6-56e5-25125a-89ba79_3_x", -EINVAL },
        { "c-b03b24ef-69f244b6-56e5-25125a-89ba79_-3", -EINVAL },
        { "c-b03b24ef-69f244b6-56e5-25125a-89ba79_03", -EINVAL },
        { "c-b03b24ef-69f244b6-56e5-25125a-89ba79_3/0", -EINVAL },
        { "c-b03b24ef-69f244b6-56e5-25125a-89ba79_184467440737095516150", -EINVAL },
        { "c07-b03b24ef-69f244b6-56e5-25125a-89ba79_3", -EINVAL },
        { "c1234567890-b03b24ef-69f244b6-56e5-25125a-89ba79_3", -EINVAL },
        { "cx-b03b24ef-69f244b6-56e5-25125a-89ba79_3", -EINVAL },
        /* neither v1 nor v2; domain ids are not object ids */
        { "", -EINVAL },
        { "g", -EINVAL },
        { "g-", -EINVAL },
        { "/home/test_user1/sample1.h5", -EINVAL },
        { "g-b03b24ef-69f244b6-38b3-ac67e1-7acc3e\n", -EINVAL },
        { " g-b03b24ef-69f244b6-38b3-ac67e1-7acc3e", -EINVAL },
    };
    for (size_t i = 0; i < N(cases); i++)
        CHECK_INT(schema_id_version(cases[i].id), cases[i].version);
    CHECK_INT(schema_id_version(NULL), -EINVAL);
    for (size_t i = 0; i < N(fixture_roots); i++)
        CHECK_INT(schema_id_version(fixture_roots[i]), 2);
}

static void test_classes(void)
{
    CHECK_INT(schema_id_class(SPEC_ROOT), 'g');
    CHECK_INT(schema_id_class(SPEC_DSET), 'd');
    CHECK_INT(schema_id_class("t-d64bf735-c43d061d-90df-34ef80-05e3bd"), 't');
    CHECK_INT(schema_id_class("c12-b03b24ef-69f244b6-56e5-25125a-89ba79_3_0_12"), 'c');
    CHECK_INT(schema_id_class(V1_GROUP), 'g');
    CHECK_INT(schema_id_class(V1_CHUNK), 'c');
    CHECK_INT(schema_id_class("x-b03b24ef-69f244b6-38b3-ac67e1-7acc3e"), -EINVAL);
    CHECK_INT(schema_id_class(NULL), -EINVAL);
}

static void test_hex_rot(void)
{
    static const char from[] = "0123456789abcdef";
    static const char to[] = "89abcdef01234567";
    for (int i = 0; i < 16; i++) {
        CHECK_INT(schema_hex_rot(from[i]), to[i]);
        CHECK_INT(schema_hex_rot(schema_hex_rot(from[i])), from[i]);
    }
    static const int bad[] = { 'g', 'A',     'F',     'x',     '-', '_', ' ',
                               '/', '0' - 1, '9' + 1, 'a' - 1, 0,   -1,  256 + '0' };
    for (size_t i = 0; i < N(bad); i++)
        CHECK_INT(schema_hex_rot(bad[i]), -EINVAL);
}

static void test_is_root(void)
{
    CHECK_INT(schema_id_is_root(SPEC_ROOT), 1);
    for (size_t i = 0; i < N(fixture_roots); i++)
        CHECK_INT(schema_id_is_root(fixture_roots[i]), 1);
    /* same domain, not the root: non-root group, dataset, datatype, chunk */
    CHECK_INT(schema_id_is_root("g-d64bf735-c43d061d-ccec-b24d36-800ad8"), 0);
    CHECK_INT(schema_id_is_root(SPEC_DSET), 0);
    CHECK_INT(schema_id_is_root("t-d64bf735-c43d061d-6399-239b79-fca97e"), 0);
    CHECK_INT(schema_id_is_root("c-b03b24ef-69f244b6-56e5-25125a-89ba79_3"), 0);
    /* rotation-valid digits under another class are still not a root group */
    CHECK_INT(schema_id_is_root("d-b03b24ef-69f244b6-38b3-ac67e1-7acc3e"), 0);
    /* one digit off in either half */
    CHECK_INT(schema_id_is_root("g-b03b24ef-69f244b6-38b3-ac67e1-7acc3f"), 0);
    CHECK_INT(schema_id_is_root("g-c03b24ef-69f244b6-38b3-ac67e1-7acc3e"), 0);
    /* the rule does not apply to v1; invalid ids */
    CHECK_INT(schema_id_is_root(V1_GROUP), -EINVAL);
    CHECK_INT(schema_id_is_root(V1_DSET), -EINVAL);
    CHECK_INT(schema_id_is_root("g-B03B24EF-69F244B6-38B3-AC67E1-7ACC3E"), -EINVAL);
    CHECK_INT(schema_id_is_root(""), -EINVAL);
    CHECK_INT(schema_id_is_root(NULL), -EINVAL);
}

static void test_root_of(void)
{
    static const struct {
        const char *id;
        const char *root;
    } cases[] = {
        { SPEC_DSET, SPEC_ROOT },
        { SPEC_ROOT, SPEC_ROOT },
        { "c-b03b24ef-69f244b6-56e5-25125a-89ba79_3_0_12", SPEC_ROOT },
        { "c7-b03b24ef-69f244b6-56e5-25125a-89ba79_3_0_12", SPEC_ROOT },
        { "d-b03b24ef-69f244b6-00fb-61ce15-4f1a0c", SPEC_ROOT }, /* spec §1.2 */
        { "t-d64bf735-c43d061d-6399-239b79-fca97e", "g-d64bf735-c43d061d-5ec3-7fbd4c-b58e95" },
        { "g-d64bf735-c43d061d-ccec-b24d36-800ad8", "g-d64bf735-c43d061d-5ec3-7fbd4c-b58e95" },
        { "d-5897df5c-0a297b92-3429-31a752-46224c", "g-5897df5c-0a297b92-d01f-57d482-a1f31a" },
        { "c-ed8fa543-b000e2e7-854a-e2de3c-877306_1_2", "g-ed8fa543-b000e2e7-6507-2dcb38-886a6f" },
    };
    char out[SCHEMA_ID_BUF];
    for (size_t i = 0; i < N(cases); i++) {
        memset(out, 'x', sizeof(out));
        CHECK_INT(schema_root_of(cases[i].id, out), 0);
        CHECK_STR(out, cases[i].root);
        CHECK_INT(schema_id_is_root(out), 1);
    }
    CHECK_INT(schema_root_of(V1_DSET, out), -EINVAL);
    CHECK_INT(schema_root_of(V1_GROUP, out), -EINVAL);
    CHECK_INT(schema_root_of("d-b03b24ef-69f244b6-56e5-25125a-89ba7", out), -EINVAL);
    CHECK_INT(schema_root_of(NULL, out), -EINVAL);
}

static void test_obj_keys(void)
{
    char key[KEY_BUF];
    for (size_t i = 0; i < N(obj_keys); i++) {
        CHECK_INT(schema_obj_key(obj_keys[i].id, key, sizeof(key)), 0);
        CHECK_STR(key, obj_keys[i].key);
    }
    CHECK_INT(schema_obj_key("g-B03B24EF-69f244b6-38b3-ac67e1-7acc3e", key, sizeof(key)), -EINVAL);
    CHECK_STR(key, "");
    CHECK_INT(schema_obj_key("/home/test_user1/sample1.h5", key, sizeof(key)), -EINVAL);
    CHECK_INT(schema_obj_key(NULL, key, sizeof(key)), -EINVAL);
}

/* Every byte count short of the key is -ENAMETOOLONG, and the buffer stays a C string. */
static void check_too_small(const char *id, const char *want)
{
    char key[KEY_BUF];
    size_t need = strlen(want) + 1;
    for (size_t len = 1; len < need; len++) {
        memset(key, 'x', sizeof(key));
        CHECK_INT(schema_obj_key(id, key, len), -ENAMETOOLONG);
        CHECK_STR(key, "");
    }
    CHECK_INT(schema_obj_key(id, key, need), 0);
    CHECK_STR(key, want);
    CHECK_INT(schema_obj_key(id, NULL, 0), -ENAMETOOLONG);
}

static void test_key_buffer_sizes(void)
{
    check_too_small(SPEC_ROOT, "db/b03b24ef-69f244b6/.group.json");
    check_too_small(SPEC_DSET, "db/b03b24ef-69f244b6/d/56e5-25125a-89ba79/.dataset.json");
    check_too_small("c7-b03b24ef-69f244b6-56e5-25125a-89ba79_3_0_12",
                    "db/b03b24ef-69f244b6/d/56e5-25125a-89ba79/p7/3_0_12");
    check_too_small(V1_CHUNK, "e89bb-" V1_CHUNK);
}

static void test_chunk_keys(void)
{
    static const uint64_t idx3[] = { 3, 0, 12 };
    static const uint64_t idx2[] = { 2, 1 };
    static const uint64_t idx1[] = { 0 };
    static const uint64_t big[] = { UINT64_MAX };
    char key[KEY_BUF], via_id[KEY_BUF];

    CHECK_INT(schema_chunk_key(SPEC_DSET, idx3, 3, -1, key, sizeof(key)), 0);
    CHECK_STR(key, "db/b03b24ef-69f244b6/d/56e5-25125a-89ba79/3_0_12");
    CHECK_INT(schema_chunk_key(SPEC_DSET, idx3, 3, 7, key, sizeof(key)), 0);
    CHECK_STR(key, "db/b03b24ef-69f244b6/d/56e5-25125a-89ba79/p7/3_0_12");
    CHECK_INT(schema_chunk_key(SPEC_DSET, idx3, 3, 0, key, sizeof(key)), 0);
    CHECK_STR(key, "db/b03b24ef-69f244b6/d/56e5-25125a-89ba79/p0/3_0_12");
    CHECK_INT(
        schema_chunk_key("d-5897df5c-0a297b92-3429-31a752-46224c", idx2, 2, -1, key, sizeof(key)),
        0);
    CHECK_STR(key, "db/5897df5c-0a297b92/d/3429-31a752-46224c/2_1");
    /* scalar datasets have the single chunk "0" (§2.4) */
    CHECK_INT(
        schema_chunk_key("d-5081627e-84cc3427-2676-fe3c22-f7924f", idx1, 1, -1, key, sizeof(key)),
        0);
    CHECK_STR(key, "db/5081627e-84cc3427/d/2676-fe3c22-f7924f/0");
    CHECK_INT(schema_chunk_key(SPEC_DSET, big, 1, -1, key, sizeof(key)), 0);
    CHECK_STR(key, "db/b03b24ef-69f244b6/d/56e5-25125a-89ba79/18446744073709551615");

    /* v1: the hash covers the chunk id, partition digits included (§11) */
    static const uint64_t idx01[] = { 0, 1 };
    CHECK_INT(
        schema_chunk_key("d-2428ae0e-a082-11e6-9d93-0242ac110005", idx01, 2, -1, key, sizeof(key)),
        0);
    CHECK_STR(key, "e89bb-" V1_CHUNK);
    CHECK_INT(schema_chunk_key(V1_DSET, idx3, 3, -1, key, sizeof(key)), 0);
    CHECK_STR(key, "b67f3-c-4ab77230-9c0e-11e6-8fdd-0242ac110005_3_0_12");
    CHECK_INT(schema_chunk_key(V1_DSET, idx3, 3, 7, key, sizeof(key)), 0);
    CHECK_STR(key, "a30a9-c7-4ab77230-9c0e-11e6-8fdd-0242ac110005_3_0_12");
    CHECK_INT(schema_chunk_key(V1_DSET, big, 1, -1, key, sizeof(key)), 0);
    CHECK_STR(key, "d1e1a-c-4ab77230-9c0e-11e6-8fdd-0242ac110005_18446744073709551615");

    /* the chunk key of a dataset and the object key of its chunk id agree */
    CHECK_INT(schema_chunk_key(SPEC_DSET, idx3, 3, 7, key, sizeof(key)), 0);
    CHECK_INT(
        schema_obj_key("c7-b03b24ef-69f244b6-56e5-25125a-89ba79_3_0_12", via_id, sizeof(via_id)),
        0);
    CHECK_STR(key, via_id);

    /* only dataset ids; sane rank; buffer bounds */
    CHECK_INT(schema_chunk_key(SPEC_ROOT, idx3, 3, -1, key, sizeof(key)), -EINVAL);
    CHECK_STR(key, "");
    CHECK_INT(
        schema_chunk_key("c-b03b24ef-69f244b6-56e5-25125a-89ba79_3", idx3, 3, -1, key, sizeof(key)),
        -EINVAL);
    CHECK_INT(schema_chunk_key(SPEC_DSET, idx3, 0, -1, key, sizeof(key)), -EINVAL);
    CHECK_INT(schema_chunk_key(SPEC_DSET, idx3, -1, -1, key, sizeof(key)), -EINVAL);
    CHECK_INT(schema_chunk_key(SPEC_DSET, NULL, 3, -1, key, sizeof(key)), -EINVAL);
    static const uint64_t zeros[33];
    CHECK_INT(schema_chunk_key(SPEC_DSET, zeros, 32, -1, key, sizeof(key)), 0);
    CHECK_INT(schema_chunk_key(SPEC_DSET, zeros, 33, -1, key, sizeof(key)), -EINVAL);
    /* partitions the id grammar can spell back ("c<N>-", up to 9 digits) */
    CHECK_INT(schema_chunk_key(SPEC_DSET, idx3, 3, 999999999, key, sizeof(key)), 0);
    CHECK_STR(key, "db/b03b24ef-69f244b6/d/56e5-25125a-89ba79/p999999999/3_0_12");
    CHECK_INT(schema_chunk_key(SPEC_DSET, idx3, 3, 1000000000, key, sizeof(key)), -EINVAL);
    CHECK_INT(schema_chunk_key(SPEC_DSET, idx3, 3, -5, key, sizeof(key)), 0);
    CHECK_STR(key, "db/b03b24ef-69f244b6/d/56e5-25125a-89ba79/3_0_12");
    CHECK_INT(schema_chunk_key(NULL, idx3, 3, -1, key, sizeof(key)), -EINVAL);
    CHECK_INT(schema_chunk_key(SPEC_DSET, idx3, 3, 7, key, 30), -ENAMETOOLONG);
    CHECK_STR(key, "");
    CHECK_INT(schema_chunk_key(V1_DSET, idx3, 3, 7, key, 20), -ENAMETOOLONG);
    CHECK_STR(key, "");
}

static void test_info_key(void)
{
    char key[KEY_BUF];
    CHECK_INT(schema_info_key(SPEC_ROOT, key, sizeof(key)), 0);
    CHECK_STR(key, "db/b03b24ef-69f244b6/.info.json");
    CHECK_INT(schema_info_key("g-5897df5c-0a297b92-d01f-57d482-a1f31a", key, sizeof(key)), 0);
    CHECK_STR(key, "db/5897df5c-0a297b92/.info.json");
    CHECK_INT(schema_info_key(SPEC_DSET, key, sizeof(key)), -EINVAL);
    CHECK_INT(schema_info_key(V1_GROUP, key, sizeof(key)), -EINVAL);
    CHECK_INT(schema_info_key(NULL, key, sizeof(key)), -EINVAL);
    CHECK_INT(schema_info_key(SPEC_ROOT, key, 31), -ENAMETOOLONG);
    CHECK_INT(schema_info_key(SPEC_ROOT, key, 32), 0);
}

static void test_domain_keys(void)
{
    static const struct {
        const char *path;
        const char *key;
    } good[] = {
        { "/home/test_user1/sample1.h5", "home/test_user1/sample1.h5/.domain.json" },
        { "/home/test_user1", "home/test_user1/.domain.json" },
        { "/home", "home/.domain.json" },
        { "/linked/sample_link.h5", "linked/sample_link.h5/.domain.json" },
        { "/a b/caf\xc3\xa9 \xe2\x82\xac/\xf0\x9f\x98\x80.h5",
          "a b/caf\xc3\xa9 \xe2\x82\xac/\xf0\x9f\x98\x80.h5/.domain.json" },
        { "/.hidden/..x/...", ".hidden/..x/.../.domain.json" },
    };
    static const char *const bad_paths[] = {
        "",
        "/",
        "//",
        "home/test_user1",
        "/home/",
        "/home//x",
        "//home",
        "/./home",
        "/home/.",
        "/home/..",
        "/home/../etc",
        "/home/x\n",
        "/home/\x7f",
        "/home/\xff",
        "/home/\xc0\xaf",
        "/\xed\xa0\x80",
    };
    char buf[KEY_BUF];
    for (size_t i = 0; i < N(good); i++) {
        CHECK_INT(schema_domain_key(good[i].path, buf, sizeof(buf)), 0);
        CHECK_STR(buf, good[i].key);
        CHECK_INT(schema_domain_path(good[i].key, buf, sizeof(buf)), 0);
        CHECK_STR(buf, good[i].path);
    }
    for (size_t i = 0; i < N(bad_paths); i++) {
        CHECK_INT(schema_domain_key(bad_paths[i], buf, sizeof(buf)), -EINVAL);
        CHECK_STR(buf, "");
    }
    CHECK_INT(schema_domain_key(NULL, buf, sizeof(buf)), -EINVAL);
    CHECK_INT(schema_domain_key("/home", buf, 17), -ENAMETOOLONG);
    CHECK_STR(buf, "");
    CHECK_INT(schema_domain_key("/home", buf, 18), 0);
    CHECK_STR(buf, "home/.domain.json");
}

static void test_domain_paths_hostile(void)
{
    static const char *const bad_keys[] = {
        "",
        ".domain.json",
        "/.domain.json",
        "/home/.domain.json",
        "home/domain.json",
        "home/.domain.json/",
        "home/.domain.jsonx",
        "home//.domain.json",
        "home/./.domain.json",
        "home/../.domain.json",
        "../.domain.json",
        "home/.group.json",
        "db/b03b24ef-69f244b6/.group.json",
        "home/\x01/.domain.json",
        "home/\xc3/.domain.json",
        "home/\xf4\x90\x80\x80/.domain.json",
        "home/.domain.json/.domain.json/",
    };
    char buf[KEY_BUF];
    for (size_t i = 0; i < N(bad_keys); i++) {
        CHECK_INT(schema_domain_path(bad_keys[i], buf, sizeof(buf)), -EINVAL);
        CHECK_STR(buf, "");
    }
    CHECK_INT(schema_domain_path(NULL, buf, sizeof(buf)), -EINVAL);
    /* nested .domain.json names are plain names above the last component */
    CHECK_INT(schema_domain_path("a/.domain.json/b/.domain.json", buf, sizeof(buf)), 0);
    CHECK_STR(buf, "/a/.domain.json/b");
    CHECK_INT(schema_domain_path("home/test_user1/.domain.json", buf, 16), -ENAMETOOLONG);
    CHECK_STR(buf, "");
    CHECK_INT(schema_domain_path("home/test_user1/.domain.json", buf, 17), 0);
    CHECK_STR(buf, "/home/test_user1");
}

static void test_name_lengths(void)
{
    char name[300];
    memset(name, 'a', sizeof(name));
    CHECK_INT(schema_name_valid(name, 255), 1);
    CHECK_INT(schema_name_valid(name, 256), 0);
    CHECK_INT(schema_name_valid(name, 1), 1);
    CHECK_INT(schema_name_valid(name, 0), 0);
    CHECK_INT(schema_name_valid(NULL, 3), 0);
    /* 85 three-byte characters are 255 bytes; one more byte is too many */
    for (int i = 0; i < 85; i++)
        memcpy(name + 3 * i, "\xe2\x82\xac", 3);
    CHECK_INT(schema_name_valid(name, 255), 1);
    name[255] = 'a';
    CHECK_INT(schema_name_valid(name, 256), 0);
    /* a sequence cut by the length is invalid even if the bytes go on */
    CHECK_INT(schema_name_valid("\xe2\x82\xac", 2), 0);

    char path[600] = "/";
    memset(path + 1, 'a', 256);
    path[257] = '\0';
    char key[KEY_BUF];
    CHECK_INT(schema_domain_key(path, key, sizeof(key)), -EINVAL);
    path[256] = '\0';
    CHECK_INT(schema_domain_key(path, key, sizeof(key)), 0);
}

static void test_names(void)
{
    static const struct {
        const char *name;
        int valid;
    } cases[] = {
        { "sample1.h5", 1 },
        { "test_user1", 1 },
        { "a b", 1 },
        { ".hidden", 1 },
        { "...", 1 },
        { "..a", 1 },
        { "~", 1 },
        { "\\", 1 },
        { "caf\xc3\xa9", 1 },      /* U+00E9 */
        { "\xc2\x80", 1 },         /* U+0080, smallest 2-byte */
        { "\xdf\xbf", 1 },         /* U+07FF */
        { "\xe0\xa0\x80", 1 },     /* U+0800, smallest 3-byte */
        { "\xed\x9f\xbf", 1 },     /* U+D7FF, just below surrogates */
        { "\xee\x80\x80", 1 },     /* U+E000, just above surrogates */
        { "\xef\xbf\xbd", 1 },     /* U+FFFD */
        { "\xf0\x90\x80\x80", 1 }, /* U+10000, smallest 4-byte */
        { "\xf4\x8f\xbf\xbf", 1 }, /* U+10FFFF, the last code point */
        { "", 0 },
        { ".", 0 },
        { "..", 0 },
        { "a/b", 0 },
        { "/", 0 },
        { "a\tb", 0 },
        { "\n", 0 },
        { "\x1f", 0 },
        { "a\x7f", 0 },
        { "\x80", 0 }, /* lone continuation byte */
        { "\xbf", 0 },
        { "\xc0\x80", 0 },                 /* overlong NUL */
        { "\xc0\xaf", 0 },                 /* overlong '/' */
        { "\xc1\xbf", 0 },                 /* overlong 2-byte */
        { "\xe0\x80\xaf", 0 },             /* overlong 3-byte '/' */
        { "\xe0\x9f\xbf", 0 },             /* overlong 3-byte */
        { "\xf0\x80\x80\xaf", 0 },         /* overlong 4-byte '/' */
        { "\xf0\x8f\xbf\xbf", 0 },         /* overlong 4-byte */
        { "\xed\xa0\x80", 0 },             /* U+D800, high surrogate */
        { "\xed\xbf\xbf", 0 },             /* U+DFFF, low surrogate */
        { "\xed\xa0\xbd\xed\xb8\x80", 0 }, /* CESU-8 surrogate pair */
        { "\xf4\x90\x80\x80", 0 },         /* U+110000 */
        { "\xf5\x80\x80\x80", 0 },
        { "\xf8\x88\x80\x80\x80", 0 }, /* 5-byte form */
        { "\xfe", 0 },
        { "\xff", 0 },
        { "\xc3", 0 },         /* truncated 2-byte */
        { "\xe2\x82", 0 },     /* truncated 3-byte */
        { "\xf0\x9f\x98", 0 }, /* truncated 4-byte */
        { "\xe2\x28\xa1", 0 }, /* bad second byte */
        { "\xe2\x82\x28", 0 }, /* bad third byte */
        { "\xf0\x9f\x28\x80", 0 },
        { "\xf0\x9f\x98\x28", 0 },
    };
    for (size_t i = 0; i < N(cases); i++)
        CHECK_INT(schema_name_valid(cases[i].name, strlen(cases[i].name)), cases[i].valid);
    /* an embedded NUL is a control character, not an end */
    CHECK_INT(schema_name_valid("a\0b", 3), 0);
}

/* The one rule for new (and visible) domain and folder paths: reserved names at any depth
 * are EINVAL, HSDS's object tree at the top EPERM, and the names right beside them are fine. */
static void test_domain_path_allowed(void)
{
    static const struct {
        const char *path;
        int rc;
    } cases[] = {
        { "/home/test_user1/sample1.h5", 0 },
        { "/home", 0 },
        { "/.hidden/..x/...", 0 },
        { "/home/db", 0 }, /* db is reserved at the top only */
        { "/dbx", 0 },
        { "/d", 0 },
        { "/DB", 0 },
        { "/home/.domain.jsonx", 0 },
        { "/home/x.domain.json", 0 },
        { "/home/domain.json", 0 }, /* HSDS's pre-2017 name: never read today */
        { "/home/.h5osfs-tmp", 0 }, /* the prefix needs its final dot */
        { "/home/h5osfs-tmp.x", 0 },
        { "/home/x.h5osfs-tmp.y", 0 },
        { "/db", -EPERM },
        { "/db/x.h5", -EPERM },
        { "/db/b03b24ef-69f244b6", -EPERM },
        { "/.domain.json", -EINVAL },
        { "/home/.domain.json", -EINVAL },
        { "/home/.domain.json/x.h5", -EINVAL },
        { "/.h5osfs-tmp.", -EINVAL },
        { "/home/.h5osfs-tmp.0123456789abcdef", -EINVAL },
        { "/home/.h5osfs-tmp.x/y", -EINVAL },
        { "/db/.domain.json", -EINVAL }, /* never a domain anywhere: EINVAL first */
        { "/", -EINVAL },
        { "", -EINVAL },
        { "home/x.h5", -EINVAL },
        { "/home/", -EINVAL },
        { "/home//x", -EINVAL },
        { "/home/./x", -EINVAL },
        { "/home/..", -EINVAL },
        { "/home/\xff", -EINVAL },
        { "/home/a\nb", -EINVAL },
    };
    for (size_t i = 0; i < N(cases); i++) {
        const char *why = "unset";
        int rc = schema_domain_path_allowed(cases[i].path, &why);
        if (rc != cases[i].rc)
            fprintf(stderr, "schema_domain_path_allowed(\"%s\")\n", cases[i].path);
        CHECK_INT(rc, cases[i].rc);
        CHECK(rc == 0 ? why == NULL : why != NULL && why[0] != '\0');
    }
    CHECK_INT(schema_domain_path_allowed(NULL, NULL), -EINVAL);
    CHECK_INT(schema_domain_path_allowed("/db", NULL), -EPERM);
    /* every path the rule allows has a key, and the key maps back to it */
    char key[KEY_BUF], back[KEY_BUF];
    for (size_t i = 0; i < N(cases); i++) {
        if (cases[i].rc != 0)
            continue;
        CHECK_INT(schema_domain_key(cases[i].path, key, sizeof(key)), 0);
        CHECK_INT(schema_domain_path(key, back, sizeof(back)), 0);
        CHECK_STR(back, cases[i].path);
    }
}

/* One name (a version's tag, which no path rule sees whole): the same rule and reasons as
 * schema_domain_path_allowed's for each part, and db is an ordinary name. */
static void test_name_allowed(void)
{
    static const char *allowed[] = { "x.h5", "db", ".domain.jsonx", ".h5osfs-tmp", "paper.h5" };
    static const char *refused[] = { ".domain.json", ".h5osfs-tmp.x.h5", "", ".", "..", "a\nb",
                                     "\xff" };
    char path[300];
    for (size_t i = 0; i < N(allowed); i++) {
        const char *why = "unset";
        CHECK_INT(schema_name_allowed(allowed[i], &why), 0);
        CHECK(why == NULL);
    }
    for (size_t i = 0; i < N(refused); i++) {
        const char *why = NULL, *path_why = NULL;
        CHECK_INT(schema_name_allowed(refused[i], &why), -EINVAL);
        snprintf(path, sizeof path, "/home/%s", refused[i]);
        CHECK_INT(schema_domain_path_allowed(path, &path_why), -EINVAL);
        CHECK(why != NULL && path_why != NULL && strcmp(why, path_why) == 0);
    }
    char long_name[257];
    memset(long_name, 'L', 256);
    long_name[256] = '\0';
    CHECK_INT(schema_name_allowed(long_name, NULL), -EINVAL);
    long_name[255] = '\0';
    CHECK_INT(schema_name_allowed(long_name, NULL), 0);
    CHECK_INT(schema_name_allowed("a/b", NULL), -EINVAL); /* two names, not one */
    CHECK_INT(schema_name_allowed(NULL, NULL), -EINVAL);
}

/* file_uri -> key (spec §8): only keys of this bucket, and of no domain but the root's own. */
static void test_linked_uri_key(void)
{
    const char *key = NULL;
    CHECK_INT(schema_linked_uri_key("s3://bkt/data/f.h5", "bkt", SPEC_ROOT, 0, &key), 0);
    CHECK_STR(key, "data/f.h5");
    CHECK_INT(schema_linked_uri_key("file://bkt/data/f.h5", "bkt", SPEC_ROOT, 0, &key), 0);
    CHECK_STR(key, "data/f.h5");
    CHECK_INT(schema_linked_uri_key("bkt/data/f.h5", "bkt", SPEC_ROOT, 0, &key), 0);
    CHECK_STR(key, "data/f.h5");
    /* the root's own linked file */
    CHECK_INT(
        schema_linked_uri_key("bkt/db/b03b24ef-69f244b6/.h5osfs-file", "bkt", SPEC_ROOT, 0, &key),
        0);
    CHECK_STR(key, "db/b03b24ef-69f244b6/.h5osfs-file");
    /* outside the bucket, not a key */
    CHECK_INT(schema_linked_uri_key("s3://other/data/f.h5", "bkt", SPEC_ROOT, 0, &key), -EINVAL);
    CHECK_INT(schema_linked_uri_key("s3://bk/data/f.h5", "bkt", SPEC_ROOT, 0, &key), -EINVAL);
    CHECK_INT(schema_linked_uri_key("bkt", "bkt", SPEC_ROOT, 0, &key), -EINVAL);
    CHECK_INT(schema_linked_uri_key("bkt/a/../../x", "bkt", SPEC_ROOT, 0, &key), -EINVAL);
    CHECK_INT(schema_linked_uri_key("bkt//x", "bkt", SPEC_ROOT, 0, &key), -EINVAL);
    CHECK_INT(schema_linked_uri_key("bkt/x", NULL, SPEC_ROOT, 0, &key), -EINVAL);
    /* objects of domains: another root's, a .domain.json, a v1 object */
    CHECK_INT(
        schema_linked_uri_key("bkt/db/a03b24ef-69f244b6/.h5osfs-file", "bkt", SPEC_ROOT, 0, &key),
        -EPERM);
    CHECK_INT(schema_linked_uri_key("bkt/home/u/x.h5/.domain.json", "bkt", SPEC_ROOT, 0, &key),
              -EPERM);
    CHECK_INT(schema_linked_uri_key("bkt/.domain.json", "bkt", SPEC_ROOT, 0, &key), -EPERM);
    CHECK_INT(schema_linked_uri_key("bkt/0a1b2-d-5e3c", "bkt", SPEC_ROOT, 0, &key), -EPERM);
    CHECK_INT(schema_linked_uri_key("bkt/db/b03b24ef-69f244b6/x", "bkt", NULL, 0, &key), -EPERM);
    /* a version's pool object: any object, once its table checked it */
    CHECK_INT(schema_linked_uri_key("bkt/db/a03b24ef-69f244b6/c/x", "bkt", SPEC_ROOT, 1, &key), 0);
}

/* What a kept version may read its linked bytes from: its own root's file, in any form of the
 * URI, and a chunk table of its own root; nothing else in the bucket. */
static void test_version_linked_ok(void)
{
    const char *own = "bkt/db/b03b24ef-69f244b6/.h5osfs-file";
    CHECK_INT(schema_linked_own_file(own, "bkt", SPEC_ROOT), 1);
    CHECK_INT(
        schema_linked_own_file("s3://bkt/db/b03b24ef-69f244b6/.h5osfs-file", "bkt", SPEC_ROOT), 1);
    CHECK_INT(
        schema_linked_own_file("file://bkt/db/b03b24ef-69f244b6/.h5osfs-file", "bkt", SPEC_ROOT),
        1);
    CHECK_INT(schema_linked_own_file("bkt/db/a03b24ef-69f244b6/.h5osfs-file", "bkt", SPEC_ROOT), 0);
    CHECK_INT(schema_linked_own_file("other/db/b03b24ef-69f244b6/.h5osfs-file", "bkt", SPEC_ROOT),
              0);
    CHECK_INT(schema_linked_own_file("bkt/data/f.h5", "bkt", SPEC_ROOT), 0);
    CHECK_INT(schema_linked_own_file("bkt/db/b03b24ef-69f244b6/x", "bkt", SPEC_ROOT), 0);
    CHECK_INT(schema_linked_own_file(NULL, "bkt", SPEC_ROOT), 0);

    json_t *contig = json_pack("{s:s,s:s}", "class", "H5D_CONTIGUOUS_REF", "file_uri", own);
    json_t *elsewhere =
        json_pack("{s:s,s:s}", "class", "H5D_CHUNKED_REF", "file_uri", "bkt/data/f.h5");
    json_t *own_table = json_pack("{s:s,s:s,s:s}", "class", "H5D_CHUNKED_REF_INDIRECT", "file_uri",
                                  own, "chunk_table", "d-b03b24ef-69f244b6-0000-000000-000001");
    json_t *other_table =
        json_pack("{s:s,s:s,s:s}", "class", "H5D_CHUNKED_REF_INDIRECT", "file_uri", own,
                  "chunk_table", "d-a03b24ef-69f244b6-0000-000000-000001");
    json_t *no_table = json_pack("{s:s,s:s}", "class", "H5D_CHUNKED_REF_INDIRECT", "file_uri", own);
    json_t *no_file = json_pack("{s:s,s:s}", "class", "H5D_CHUNKED_REF_INDIRECT", "chunk_table",
                                "d-b03b24ef-69f244b6-0000-000000-000001");
    CHECK_INT(schema_version_linked_ok(contig, "bkt", SPEC_ROOT, NULL), 1);
    CHECK_INT(schema_version_linked_ok(elsewhere, "bkt", SPEC_ROOT, NULL), 0);
    CHECK_INT(schema_version_linked_ok(own_table, "bkt", SPEC_ROOT, NULL), 1);
    CHECK_INT(schema_version_linked_ok(other_table, "bkt", SPEC_ROOT, NULL), 0);
    CHECK_INT(schema_version_linked_ok(no_table, "bkt", SPEC_ROOT, NULL), 0);
    CHECK_INT(schema_version_linked_ok(no_file, "bkt", SPEC_ROOT, NULL), 0);
    CHECK_INT(schema_version_linked_ok(NULL, "bkt", SPEC_ROOT, NULL), 0);
    /* a pool file: the shape alone here; which pool, the reader checks (test_pool_file_check) */
    const char *pooled = "bkt/db/c03b24ef-69f244b6/f/0123456789abcdef0123456789abcdef";
    const char *key = NULL;
    json_t *pool_table = json_pack("{s:s,s:s,s:s}", "class", "H5D_CHUNKED_REF_INDIRECT", "file_uri",
                                   pooled, "chunk_table", "d-b03b24ef-69f244b6-0000-000000-000001");
    CHECK_INT(schema_version_linked_ok(pool_table, "bkt", SPEC_ROOT, &key),
              SCHEMA_LINKED_POOL_FILE);
    CHECK_STR(key, pooled + 4);
    json_object_set_new(pool_table, "chunk_table",
                        json_string("d-a03b24ef-69f244b6-0000-000000-000001"));
    CHECK_INT(schema_version_linked_ok(pool_table, "bkt", SPEC_ROOT, &key), 0);
    CHECK(key == NULL); /* no pool file to check once the table is refused */
    json_object_set_new(pool_table, "class", json_string("H5D_CONTIGUOUS_REF"));
    const char *not_pool[] = { "bkt/db/c03b24ef-69f244b6/f/0123456789abcdef0123456789abcde",
                               "bkt/db/c03b24ef-69f244b6/c/0123456789abcdef0123456789abcdef",
                               "bkt/db/c03b24ef-69f244b6/f/0123456789ABCDEF0123456789abcdef",
                               "bkt/db/c03b24ef/69f244b6/f/0123456789abcdef0123456789abcdef",
                               "bkt/db/c03b24ef-69f244b6/f/../f/0123456789abcdef0123456789ab",
                               "other/db/c03b24ef-69f244b6/f/0123456789abcdef0123456789abcdef" };
    for (size_t i = 0; i < sizeof not_pool / sizeof *not_pool; i++) {
        json_object_set_new(pool_table, "file_uri", json_string(not_pool[i]));
        CHECK_INT(schema_version_linked_ok(pool_table, "bkt", SPEC_ROOT, &key), 0);
    }
    json_object_set_new(pool_table, "file_uri", json_string(pooled));
    CHECK_INT(schema_version_linked_ok(pool_table, "bkt", SPEC_ROOT, NULL),
              SCHEMA_LINKED_POOL_FILE);
    json_decref(pool_table);
    char buf[128];
    CHECK_INT(schema_pool_file_key(SPEC_ROOT, "0123456789abcdef0123456789abcdef", buf, sizeof buf),
              0);
    CHECK_STR(buf, "db/b03b24ef-69f244b6/f/0123456789abcdef0123456789abcdef");
    CHECK_INT(schema_pool_file_key(SPEC_ROOT, "0123", buf, sizeof buf), -EINVAL);
    CHECK_INT(schema_pool_file_key("d-b03b24ef-69f244b6-0000-000000-000001",
                                   "0123456789abcdef0123456789abcdef", buf, sizeof buf),
              -EINVAL);
    CHECK(schema_pool_file_name(pooled + 4) == pooled + 4 + strlen(pooled + 4) - 32);
    CHECK(schema_pool_file_name("db/c03b24ef-69f244b6/c/0123456789abcdef0123456789abcdef") == NULL);
    json_decref(contig);
    json_decref(elsewhere);
    json_decref(own_table);
    json_decref(other_table);
    json_decref(no_table);
    json_decref(no_file);
}

/* A version root group's "h5osfs" member as a commit writes it, and forged ones: each is
 * read as what it names, or refused whole (name and etag left empty). */
static json_t *pool_member(const char *file, const char *etag)
{
    json_t *own = json_object();
    if (file)
        json_object_set_new(own, SCHEMA_POOL_FILE, json_string(file));
    if (etag)
        json_object_set_new(own, SCHEMA_POOL_FILE_ETAG, json_string(etag));
    json_t *group = json_object();
    json_object_set_new(group, SCHEMA_H5OSFS_MEMBER, own);
    return group;
}

static int named(const char *file, const char *etag, char name[33], char kept[SCHEMA_POOL_ETAG_BUF])
{
    char why[200] = "";
    json_t *group = pool_member(file, etag);
    int rc = schema_pool_file_named(group, name, kept, why, sizeof why);
    CHECK(rc == 0 ? why[0] == '\0' : why[0] != '\0');
    json_decref(group);
    return rc;
}

static void test_pool_file_named(void)
{
    const char *md5 = "0123456789abcdef0123456789abcdef";
    char name[33] = "x", kept[SCHEMA_POOL_ETAG_BUF] = "x", long_etag[SCHEMA_POOL_ETAG_BUF + 1];
    CHECK_INT(named(md5, "\"9e107d9d372bb6826bd81d3542a419d6\"", name, kept), 0);
    CHECK_STR(name, md5);
    CHECK_STR(kept, "\"9e107d9d372bb6826bd81d3542a419d6\"");
    CHECK_INT(named(md5, NULL, name, kept), 0); /* kept before etags */
    CHECK_STR(name, md5);
    CHECK_STR(kept, "");
    CHECK_INT(named(NULL, NULL, name, kept), 0); /* no linked file */
    CHECK(name[0] == '\0' && kept[0] == '\0');
    strcpy(kept, "x");
    CHECK_INT(named(NULL, "e", name, kept), 0); /* an etag of no file names nothing */
    CHECK(name[0] == '\0' && kept[0] == '\0');
    memset(long_etag, 'e', SCHEMA_POOL_ETAG_BUF);
    long_etag[SCHEMA_POOL_ETAG_BUF] = '\0';
    const char *forged[][2] = { { "../f/0123456789abcdef0123456789ab", "e" },
                                { "0123456789ABCDEF0123456789ABCDEF", "e" },
                                { md5, "" },
                                { md5, long_etag } };
    for (size_t i = 0; i < N(forged); i++) {
        strcpy(name, "x");
        strcpy(kept, "x");
        CHECK_INT(named(forged[i][0], forged[i][1], name, kept), -EINVAL);
        CHECK(name[0] == '\0' && kept[0] == '\0');
    }
    char why[200];
    json_t *not_a_group = json_string("g");
    CHECK_INT(schema_pool_file_named(not_a_group, name, kept, why, sizeof why), 0);
    CHECK(name[0] == '\0' && kept[0] == '\0');
    json_decref(not_a_group);

    /* a reader's check: the etag kept for the file its layout names, and only that file */
    char key[128];
    snprintf(key, sizeof key, "db/b03b24ef-69f244b6/f/%s", md5);
    json_t *group = pool_member(md5, "etag-1");
    CHECK_INT(schema_pool_file_recorded(group, key, kept, why, sizeof why), 0);
    CHECK_STR(kept, "etag-1");
    CHECK_INT(schema_pool_file_recorded(group,
                                        "db/b03b24ef-69f244b6/f/ffffffffffffffffffffffffffffffff",
                                        kept, why, sizeof why),
              -EINVAL);
    CHECK_STR(kept, "");
    json_decref(group);
    group = pool_member(md5, NULL);
    strcpy(kept, "x");
    CHECK_INT(schema_pool_file_recorded(group,
                                        "db/b03b24ef-69f244b6/f/ffffffffffffffffffffffffffffffff",
                                        kept, why, sizeof why),
              0); /* nothing kept to check against: read as before etags */
    CHECK_STR(kept, "");
    json_decref(group);
}

int main(void)
{
    test_versions();
    test_classes();
    test_hex_rot();
    test_is_root();
    test_root_of();
    test_obj_keys();
    test_key_buffer_sizes();
    test_chunk_keys();
    test_info_key();
    test_domain_keys();
    test_domain_paths_hostile();
    test_name_lengths();
    test_names();
    test_domain_path_allowed();
    test_name_allowed();
    test_linked_uri_key();
    test_version_linked_ok();
    test_pool_file_named();
    return check_done("schema_id");
}
