/* Unit tests of the version list (include/h5osfs/schema/vlist.h), the version keys and the
 * versions setting (include/h5osfs/schema/schema.h, issue 26). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "h5osfs/schema/pool.h"
#include "h5osfs/schema/schema.h"
#include "h5osfs/schema/vlist.h"

#define POOL "g-11111111-22222222-9999-9999aa-aaaaaa"
#define R1 "g-a1111111-22222222-2999-9999aa-aaaaaa"
#define R2 "g-b2222222-22222222-3aaa-aaaaaa-aaaaaa"
#define R3 "g-c3333333-22222222-4bbb-bbbbaa-aaaaaa"
#define BAD_ROOT "g-31111111-22222222-3333-444444-555555" /* fails the rotation rule */

static const char *entry(uint64_t n, const char *root, const char *names)
{
    /* More buffers than entry() calls in one argument list (5): the order C evaluates
     * arguments in is unspecified (gcc and clang differ), so a buffer reused within one call
     * gave each compiler another text. */
    static char buf[8][512];
    static int k;
    char *b = buf[k++ % 8];
    snprintf(b, 512,
             "{\"n\": %llu, \"root\": \"%s\", \"time\": 1764390000.5, \"by\": \"alice\", "
             "\"parent\": 0, \"size\": 4096, \"stamp\": \"s1\", \"names\": %s, \"state\": "
             "\"kept\"}",
             (unsigned long long)n, root, names);
    return b;
}

static int parse(const char *text, struct vlist *l)
{
    char why[200];
    return vlist_parse(text, strlen(text), l, why, sizeof why);
}

static void test_round_trip(void)
{
    struct vlist l, again;
    char *text = NULL, *text2 = NULL;
    uint64_t n = 0;
    CHECK_INT(vlist_init(&l, "/home/a.h5", POOL), 0);
    CHECK_INT(vlist_append(&l, R1, 100.25, "alice@host", 4096, "stamp", &n), 0);
    CHECK_INT(n, 1);
    CHECK_INT(vlist_append(&l, R2, 200.5, "bob", 8192, "stamp", &n), 0);
    CHECK_INT(n, 2);
    CHECK_INT(l.entries[1].parent, 1);
    CHECK_INT(vlist_dump(&l, &text), 0);
    CHECK_INT(parse(text, &again), 0);
    CHECK_INT(again.n_entries, 2);
    CHECK_INT(again.next, 3);
    CHECK_STR(again.pool, POOL);
    CHECK_STR(again.domain, "/home/a.h5");
    CHECK_STR(again.entries[0].root, R1);
    CHECK_STR(again.entries[0].by, "alice@host");
    CHECK(again.entries[0].time == 100.25);
    CHECK_INT(again.entries[1].size, 8192);
    CHECK_STR(again.entries[1].names[0], "2.h5");
    CHECK_INT(vlist_dump(&again, &text2), 0);
    CHECK_STR(text2, text);
    CHECK(vlist_lookup(&again, "2.h5") == &again.entries[1]);
    CHECK(vlist_lookup(&again, "3.h5") == NULL);
    CHECK(vlist_latest(&again) == &again.entries[1]);
    free(text);
    free(text2);
    vlist_free(&l);
    vlist_free(&again);
}

static void test_broken_frame(void)
{
    struct vlist l;
    CHECK_INT(parse("not json", &l), -EINVAL);
    CHECK_INT(parse("[]", &l), -EINVAL);
    CHECK_INT(parse("{\"format\": 2, \"pool\": \"" POOL "\", \"next\": 1, \"versions\": []}", &l),
              -EINVAL);
    CHECK_INT(
        parse("{\"format\": 1, \"pool\": \"" BAD_ROOT "\", \"next\": 1, \"versions\": []}", &l),
        -EINVAL);
    CHECK_INT(parse("{\"format\": 1, \"pool\": \"" POOL "\", \"next\": 1, \"versions\": {}}", &l),
              -EINVAL);
    CHECK_INT(parse("{\"format\": 1, \"pool\": \"" POOL "\", \"next\": -1, \"versions\": []}", &l),
              -EINVAL);
    CHECK_INT(parse("{\"format\": 1, \"pool\": \"" POOL "\", \"next\": 1, \"dropping\": 1, "
                    "\"versions\": []}",
                    &l),
              -EINVAL);
}

/* rm -r's mark survives a dump and a parse; a list without it is not dropping. */
static void test_dropping_mark(void)
{
    struct vlist l, again;
    char *text = NULL;
    CHECK_INT(vlist_init(&l, "/home/a.h5", POOL), 0);
    CHECK_INT(l.dropping, 0);
    CHECK_INT(vlist_dump(&l, &text), 0);
    CHECK(text && !strstr(text, "dropping"));
    free(text);
    l.dropping = 1;
    CHECK_INT(vlist_dump(&l, &text), 0);
    CHECK(text && strstr(text, "\"format\": 2")); /* unusable to a daemon without the mark */
    CHECK_INT(parse(text, &again), 0);
    CHECK_INT(again.dropping, 1);
    free(text);
    struct vlist bad;
    CHECK_INT(parse("{\"format\": 2, \"pool\": \"" POOL "\", \"next\": 1, \"versions\": []}", &bad),
              -EINVAL);
    CHECK_INT(parse("{\"format\": 1, \"pool\": \"" POOL "\", \"next\": 1, \"dropping\": true, "
                    "\"versions\": []}",
                    &bad),
              -EINVAL);
    vlist_free(&l);
    vlist_free(&again);
}

/* One bad entry costs that version only: the others read, its number stays taken, and it
 * is written back as it was. */
static void test_malformed_entries(void)
{
    char text[4096];
    struct vlist l;
    char *out = NULL;
    snprintf(text, sizeof text,
             "{\"format\": 1, \"domain\": \"/a.h5\", \"pool\": \"" POOL "\", \"next\": 2, "
             "\"versions\": [%s, %s, {\"n\": 3, \"root\": 7}, %s, %s, %s, \"junk\"]}",
             entry(1, R1, "[\"1.h5\"]"), entry(2, BAD_ROOT, "[\"2.h5\"]"),
             entry(4, R2, "[\"4.h5\", \"1.h5\"]"), entry(5, R3, "[\"5.h5\", \"9.h5\"]"),
             entry(1, R3, "[\"x.h5\"]"));
    CHECK_INT(parse(text, &l), 0);
    CHECK_INT(l.n_entries, 7);
    CHECK(l.entries[0].error == NULL);
    CHECK(l.entries[1].error != NULL); /* root fails the rotation rule */
    CHECK(l.entries[2].error != NULL); /* root is not text */
    CHECK(l.entries[3].error != NULL); /* a name of version 1 */
    CHECK(l.entries[4].error != NULL); /* another version's number as a name */
    CHECK(l.entries[5].error != NULL); /* number 1 again */
    CHECK(l.entries[6].error != NULL && l.entries[6].n == 0);
    CHECK_INT(l.next, 6); /* past every number seen, whatever next said */
    const struct vlist_entry *e = vlist_lookup(&l, "2.h5");
    CHECK(e && e->error && e->n == 2); /* a broken 2.h5, not a missing one */
    CHECK(vlist_lookup(&l, "3.h5") && vlist_lookup(&l, "3.h5")->error);
    CHECK(vlist_lookup(&l, "1.h5") == &l.entries[0]);
    CHECK(vlist_lookup(&l, "x.h5") == NULL);
    CHECK(vlist_latest(&l) == &l.entries[0]);
    CHECK_INT(vlist_dump(&l, &out), 0);
    CHECK(out && strstr(out, "\"junk\"") && strstr(out, "{\"n\": 3, \"root\": 7}"));
    CHECK(out && strstr(out, BAD_ROOT));
    free(out);
    vlist_free(&l);
}

/* Numbers stay below 2^53 - 1, so that "next", one more, is exact in the JSON a commit writes:
 * an entry numbered 2^53 once made the next commit's list unreadable (fuzz_vlist). */
static void test_numbers_near_2_to_the_53(void)
{
    char text[4096];
    struct vlist l;
    char *out = NULL;
    uint64_t n = 0;
    snprintf(text, sizeof text,
             "{\"format\": 1, \"domain\": \"/a.h5\", \"pool\": \"" POOL "\", \"next\": 1, "
             "\"versions\": [%s]}",
             entry(9007199254740992ull, R1, "[\"9007199254740992.h5\"]"));
    CHECK_INT(parse(text, &l), 0);
    CHECK(l.entries[0].error != NULL && l.entries[0].n == 0); /* 2^53: malformed */
    CHECK_INT(l.next, 1);
    vlist_free(&l);
    snprintf(text, sizeof text,
             "{\"format\": 1, \"domain\": \"/a.h5\", \"pool\": \"" POOL "\", \"next\": 1, "
             "\"versions\": [%s]}",
             entry(9007199254740990ull, R1, "[\"9007199254740990.h5\"]"));
    CHECK_INT(parse(text, &l), 0);
    CHECK(l.entries[0].error == NULL); /* 2^53 - 2: the largest number a version gets */
    CHECK_INT(l.next, 9007199254740991ull);
    CHECK_INT(vlist_append(&l, R2, 1764390000.5, "u", 0, "", &n), -EINVAL);
    CHECK_INT(vlist_dump(&l, &out), 0);
    vlist_free(&l);
    CHECK_INT(parse(out, &l), 0); /* what a commit would write reads back */
    free(out);
    vlist_free(&l);
}

/* The store side re-applies an operation on a list read again after losing a put_if: an
 * append then takes the number after the other writer's. */
static void test_merge_by_reapply(void)
{
    struct vlist mine, theirs;
    char *text = NULL;
    uint64_t n = 0;
    CHECK_INT(vlist_init(&theirs, "/a.h5", POOL), 0);
    CHECK_INT(vlist_append(&theirs, R1, 1, "a", 0, "", NULL), 0);
    CHECK_INT(vlist_append(&theirs, R2, 2, "b", 0, "", NULL), 0);
    CHECK_INT(vlist_dump(&theirs, &text), 0);
    CHECK_INT(parse(text, &mine), 0);
    CHECK_INT(vlist_append(&mine, R3, 3, "c", 0, "", &n), 0);
    CHECK_INT(n, 3);
    CHECK_INT(mine.entries[2].parent, 2);
    CHECK_INT(mine.n_entries, 3);
    free(text);
    vlist_free(&mine);
    vlist_free(&theirs);
}

/* Two writers committing on one base: the second finds the first's entry and loses. */
static void test_committed_on(void)
{
    struct vlist l, again;
    char *text = NULL;
    CHECK_INT(vlist_init(&l, "/a.h5", POOL), 0);
    CHECK_INT(vlist_append_on(&l, "", R1, R2, 1, "a", NULL), 0);
    CHECK_INT(vlist_append_on(&l, R1, R3, R2, 2, "b", NULL), 0);
    CHECK_INT(vlist_append_on(&l, "not an id", R1, R3, 3, "c", NULL), -EINVAL);
    CHECK_INT(vlist_dump(&l, &text), 0);
    CHECK_INT(parse(text, &again), 0);
    CHECK(vlist_committed_on(&again, R1) == &again.entries[1]);
    CHECK(vlist_committed_on(&again, R2) == NULL);
    CHECK(vlist_committed_on(&again, "") == NULL); /* new domains: no base to race on */
    CHECK(vlist_listed_as(&again, R3) == &again.entries[1]);
    CHECK(vlist_listed_as(&again, R2) == NULL);
    CHECK(text && !strstr(text, "\"base\": \"\"")); /* absent, not empty */
    free(text);
    vlist_free(&l);
    vlist_free(&again);
}

static void test_names(void)
{
    struct vlist l;
    CHECK_INT(vlist_init(&l, "/a.h5", POOL), 0);
    CHECK_INT(vlist_append(&l, R1, 1, "", 0, "", NULL), 0);
    CHECK_INT(vlist_append(&l, R2, 2, "", 0, "", NULL), 0);
    CHECK_INT(vlist_name(&l, "1.h5", "paper.h5"), 0);
    CHECK_INT(vlist_name(&l, "2.h5", "paper.h5"), -EEXIST);
    CHECK_INT(vlist_name(&l, "1.h5", "7.h5"), -EINVAL);
    CHECK_INT(vlist_name(&l, "1.h5", "a/b"), -EINVAL);
    CHECK_INT(vlist_name(&l, "1.h5", "a\nb"), -EINVAL);
    /* names whose domain objects would nest below the folder's or the list's own object */
    CHECK_INT(vlist_name(&l, "1.h5", ".domain.json"), -EINVAL);
    CHECK_INT(vlist_name(&l, "1.h5", VLIST_OBJECT_NAME), -EINVAL);
    CHECK_INT(vlist_name(&l, "1.h5", ".h5osfs-tmp.x.h5"), -EINVAL);
    CHECK_INT(vlist_name(&l, "9.h5", "t"), -ENOENT);
    CHECK(vlist_lookup(&l, "paper.h5") == &l.entries[0]);
    CHECK_INT(vlist_unname(&l, "2.h5", 2), -EBUSY); /* the head's number */
    CHECK_INT(vlist_unname(&l, "1.h5", 2), 0);
    CHECK(l.entries[0].state == VLIST_KEPT); /* still called paper.h5 */
    CHECK(vlist_lookup(&l, "1.h5") == NULL);
    CHECK_INT(vlist_unname(&l, "paper.h5", 2), 0);
    CHECK(l.entries[0].state == VLIST_REMOVING);
    CHECK_INT(vlist_unname(&l, "2.h5", 0), 0); /* the domain is gone: no head */
    CHECK_INT(vlist_unname(&l, "2.h5", 0), -ENOENT);
    CHECK_INT(vlist_drop(&l, 1), 0);
    CHECK_INT(vlist_drop(&l, 1), -ENOENT);
    CHECK_INT(l.n_entries, 1);
    CHECK_INT(l.next, 3); /* numbers are not reused */
    vlist_free(&l);
}

static void test_expire(void)
{
    struct vlist l;
    CHECK_INT(vlist_init(&l, "/a.h5", POOL), 0);
    for (int i = 0; i < 5; i++)
        CHECK_INT(vlist_append(&l, R1, i, "", 0, "", NULL), 0);
    CHECK_INT(vlist_name(&l, "1.h5", "tag"), 0);
    CHECK_INT(vlist_expire(&l, 0, 5), 0); /* keep all */
    CHECK_INT(vlist_expire(&l, 2, 5), 2); /* 2 and 3 go; 1 is tagged, 4 and 5 kept */
    CHECK(l.entries[0].state == VLIST_KEPT);
    CHECK(l.entries[1].state == VLIST_REMOVING);
    CHECK(l.entries[2].state == VLIST_REMOVING);
    CHECK(l.entries[3].state == VLIST_KEPT && l.entries[4].state == VLIST_KEPT);
    CHECK_INT(vlist_expire(&l, 1, 4), 0); /* 5 newest, 4 the head: neither goes */
    vlist_free(&l);
}

static void test_number_names(void)
{
    uint64_t n = 0;
    CHECK_INT(vlist_number_name("12.h5", &n), 1);
    CHECK_INT(n, 12);
    CHECK_INT(vlist_number_name("0.h5", &n), 0);
    CHECK_INT(vlist_number_name("012.h5", &n), 0);
    CHECK_INT(vlist_number_name("12.h5x", &n), 0);
    CHECK_INT(vlist_number_name("-1.h5", &n), 0);
    CHECK_INT(vlist_number_name("99999999999999999999999.h5", &n), 0);
}

static void test_keys(void)
{
    char buf[256];
    const char *key = NULL;
    CHECK_INT(schema_versions_dir("/home/u/a.h5", buf, sizeof buf), 0);
    CHECK_STR(buf, "/home/u/.versions/a.h5");
    CHECK_INT(schema_versions_dir("/a.h5", buf, sizeof buf), 0);
    CHECK_STR(buf, "/.versions/a.h5");
    CHECK_INT(schema_versions_dir("a.h5", buf, sizeof buf), -EINVAL);
    CHECK_INT(schema_version_domain_path("/home/a.h5", "3.h5", buf, sizeof buf), 0);
    CHECK_STR(buf, "/home/.versions/a.h5/3.h5");
    CHECK_INT(schema_version_domain_path("/home/a.h5", "x/y", buf, sizeof buf), -EINVAL);
    CHECK_INT(schema_version_domain_of("/home/.versions/a.h5/3.h5", buf, sizeof buf), 0);
    CHECK_STR(buf, "/home/a.h5");
    CHECK_INT(schema_version_domain_of("/.versions/a.h5/tag", buf, sizeof buf), 0);
    CHECK_STR(buf, "/a.h5");
    CHECK_INT(schema_version_domain_of("/home/.versions/a.h5", buf, sizeof buf), -EINVAL);
    CHECK_INT(schema_version_domain_of("/home/.versions/a.h5/x/y", buf, sizeof buf), -EINVAL);
    CHECK_INT(schema_version_domain_of("/.versions/.versions/a/x", buf, sizeof buf), -EINVAL);
    CHECK_INT(schema_version_domain_of("/a/.versions/b/.versions", buf, sizeof buf), -EINVAL);
    CHECK_INT(schema_vlist_key("/home/a.h5", buf, sizeof buf), 0);
    CHECK_STR(buf, "home/.versions/a.h5/.h5osfs-versions");
    CHECK_INT(schema_vlist_key("/home/a.h5", buf, 20), -ENAMETOOLONG);
    CHECK_INT(schema_pool_key(POOL, "0123456789abcdef0123456789abcdef", buf, sizeof buf), 0);
    CHECK_STR(buf, "db/11111111-22222222/c/0123456789abcdef0123456789abcdef");
    CHECK_INT(schema_pool_marker_key(POOL, buf, sizeof buf), 0);
    CHECK_STR(buf, "db/11111111-22222222/.h5osfs-pool");
    CHECK_INT(schema_pool_marker_key("d-11111111-22222222-9999-9999aa-aaaaaa", buf, sizeof buf),
              -EINVAL);
    CHECK_INT(schema_pool_key(POOL, "0123", buf, sizeof buf), -EINVAL);
    CHECK_INT(schema_pool_key(POOL, "0123456789ABCDEF0123456789abcdef", buf, sizeof buf), -EINVAL);
    CHECK_INT(schema_pool_uri_check("bkt/db/11111111-22222222/c/0123456789abcdef0123456789abcdef",
                                    "bkt", POOL, &key),
              0);
    CHECK_STR(key, "db/11111111-22222222/c/0123456789abcdef0123456789abcdef");
    /* another bucket, another pool, a root's object, a path that climbs out */
    CHECK_INT(schema_pool_uri_check("oth/db/11111111-22222222/c/0123456789abcdef0123456789abcdef",
                                    "bkt", POOL, NULL),
              -EINVAL);
    CHECK_INT(schema_pool_uri_check("bkt/db/a1111111-22222222/c/0123456789abcdef0123456789abcdef",
                                    "bkt", POOL, NULL),
              -EINVAL);
    CHECK_INT(schema_pool_uri_check("bkt/db/11111111-22222222/.group.json", "bkt", POOL, NULL),
              -EINVAL);
    CHECK_INT(
        schema_pool_uri_check("bkt/db/11111111-22222222/c/../../x/.domain.json", "bkt", POOL, NULL),
        -EINVAL);
    CHECK_INT(schema_is_versions_path("/a/.versions/b.h5"), 1);
    CHECK_INT(schema_is_versions_path("/.versions"), 1);
    CHECK_INT(schema_is_versions_path("/a/.versionsx/b.h5"), 0);
    CHECK_INT(schema_domain_path_allowed("/a/.versions/b.h5", NULL), -EPERM);
    CHECK_INT(schema_domain_path_allowed("/a/.versions", NULL), -EPERM);
    CHECK_INT(schema_domain_path_allowed("/a/versions", NULL), 0);
}

/* A pool object's bytes against the MD5 its key names (pool.h), with RFC 1321's vectors. */
static void test_pool_bytes(void)
{
    char key[128], why[200], md5[33];
    CHECK_INT(schema_md5_hex("", 0, md5), 0);
    CHECK_STR(md5, "d41d8cd98f00b204e9800998ecf8427e");
    CHECK_INT(schema_md5_hex("abc", 3, md5), 0);
    CHECK_STR(md5, "900150983cd24fb0d6963f7d28e17f72");
    CHECK_INT(schema_md5_hex("message digest", 14, md5), 0);
    CHECK_STR(md5, "f96b697d7cb7938d525a2f31aaf161d0");
    CHECK_INT(schema_pool_key(POOL, "900150983cd24fb0d6963f7d28e17f72", key, sizeof key), 0);
    CHECK_STR(schema_pool_key_md5(key), "900150983cd24fb0d6963f7d28e17f72");
    CHECK(schema_pool_key_md5("db/11111111-22222222/d/x/0_0") == NULL);
    CHECK(schema_pool_key_md5("db/11111111-22222222/c/900150983CD24FB0D6963F7D28E17F72") == NULL);
    CHECK(schema_pool_key_md5("c/900150983cd24fb0d6963f7d28e17f72") == NULL);
    CHECK(schema_pool_key_md5(NULL) == NULL);
    /* a local bucket's etag proves nothing: the bytes are hashed */
    CHECK_INT(schema_pool_bytes_check(key, "abc", 3, "123-3-1700000000", why, sizeof why), 0);
    CHECK_INT(schema_pool_bytes_check(key, "abd", 3, "123-3-1700000000", why, sizeof why), -EIO);
    CHECK(strstr(why, "900150983cd24fb0d6963f7d28e17f72") != NULL);
    CHECK_INT(schema_pool_bytes_check(key, "abcd", 4, "", why, sizeof why), -EIO);
    CHECK_INT(schema_pool_bytes_check(key, "ab", 2, "", why, sizeof why), -EIO);
    /* an ETag that is the key's MD5 is the server's hash of the whole object: any range of it */
    CHECK_INT(
        schema_pool_bytes_check(key, "ab", 2, "900150983cd24fb0d6963f7d28e17f72", why, sizeof why),
        0);
    /* another MD5 as ETag (a forged object, or a server whose ETags are no MD5s): hashed */
    CHECK_INT(
        schema_pool_bytes_check(key, "abc", 3, "f96b697d7cb7938d525a2f31aaf161d0", why, sizeof why),
        0);
    CHECK_INT(
        schema_pool_bytes_check(key, "abd", 3, "f96b697d7cb7938d525a2f31aaf161d0", why, sizeof why),
        -EIO);
    CHECK_INT(schema_pool_bytes_check("db/11111111-22222222/d/x/0", "abc", 3, "", why, sizeof why),
              -EINVAL);
    CHECK(schema_is_md5_hex("d41d8cd98f00b204e9800998ecf8427e"));
    CHECK(!schema_is_md5_hex("d41d8cd98f00b204e9800998ecf8427e-2"));
    CHECK(!schema_is_md5_hex("D41D8CD98F00B204E9800998ECF8427E"));
    CHECK(!schema_is_md5_hex(NULL));
}

static void test_setting(void)
{
    struct schema_versions v;
    char buf[SCHEMA_VERSIONS_TEXT_MAX];
    CHECK_INT(schema_versions_parse("on", 2, &v), 0);
    CHECK(v.mode == SCHEMA_VERSIONS_ON && v.keep == 0);
    CHECK_INT(schema_versions_parse("off", 3, &v), 0);
    CHECK(v.mode == SCHEMA_VERSIONS_OFF);
    CHECK_INT(schema_versions_parse("keep:12", 7, &v), 0);
    CHECK(v.mode == SCHEMA_VERSIONS_ON && v.keep == 12);
    CHECK_INT(schema_versions_text(&v, buf, sizeof buf), 0);
    CHECK_STR(buf, "keep:12");
    CHECK_INT(schema_versions_parse("ref", 3, &v), 0);
    CHECK(v.mode == SCHEMA_VERSIONS_ON && v.keep == 0 && v.ref);
    CHECK_INT(schema_versions_text(&v, buf, sizeof buf), 0);
    CHECK_STR(buf, "ref");
    CHECK_INT(schema_versions_parse("keep:999999999", 14, &v), 0);
    CHECK_INT(schema_versions_text(&v, buf, sizeof buf), 0);
    CHECK_STR(buf, "keep:999999999");
    const char *bad[] = { "",        "On",      "keep:", "keep:0", "keep:01", "keep:1000000000",
                          "keep:-1", "keep:1x", "onn",   "Ref",    "refs" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_INT(schema_versions_parse(bad[i], strlen(bad[i]), &v), -EINVAL);
        CHECK(v.mode == SCHEMA_VERSIONS_UNSET);
    }
    CHECK_INT(schema_versions_text(&v, buf, sizeof buf), -EINVAL);
}

/* The folder's setting is the string member; a domain's head object of that name is not. */
static void test_setting_in_domain_json(void)
{
    struct schema_domain dom;
    char why[200];
    const char *folder = "{\"owner\": \"u\", \"acls\": {}, \"h5osfs\": {\"versions\": \"keep:3\"}}";
    const char *odd = "{\"owner\": \"u\", \"acls\": {}, \"h5osfs\": {\"versions\": {\"head\": 1}}}";
    CHECK_INT(schema_domain_parse(folder, strlen(folder), &dom, why, sizeof why), 0);
    CHECK(dom.versions.mode == SCHEMA_VERSIONS_ON && dom.versions.keep == 3);
    schema_domain_free(&dom);
    CHECK_INT(schema_domain_parse(odd, strlen(odd), &dom, why, sizeof why), 0);
    CHECK(dom.versions.mode == SCHEMA_VERSIONS_UNSET);
    schema_domain_free(&dom);
}

int main(void)
{
    test_round_trip();
    test_broken_frame();
    test_dropping_mark();
    test_malformed_entries();
    test_numbers_near_2_to_the_53();
    test_merge_by_reapply();
    test_committed_on();
    test_names();
    test_expire();
    test_number_names();
    test_keys();
    test_pool_bytes();
    test_setting();
    test_setting_in_domain_json();
    return check_done("vlist");
}
