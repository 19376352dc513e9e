/*
 * Unit tests of .domain.json parsing and ACL decisions (spec/hsds-format.md §3.1, §9).
 * The valid documents are copied byte for byte from the fixture bucket
 * fixtures/hsds-v2/hsdstest, which real HSDS 0.9.4 wrote; they are embedded, not read.
 */
#include "h5osfs/schema/schema.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define WHY_LEN 128

#define ALL_TRUE                                                              \
    "{\"create\": true, \"read\": true, \"update\": true, \"delete\": true, " \
    "\"readACL\": true, \"updateACL\": true}"
#define READ_ONLY                                                                \
    "{\"create\": false, \"read\": true, \"update\": false, \"delete\": false, " \
    "\"readACL\": false, \"updateACL\": false}"
#define ALL_FALSE                                                                 \
    "{\"create\": false, \"read\": false, \"update\": false, \"delete\": false, " \
    "\"readACL\": false, \"updateACL\": false}"

/* hsdstest/home/.domain.json: a folder owned by admin, readable by everyone. */
static const char fixture_home[] =
    "{\"owner\": \"admin\", \"acls\": {\"admin\": " ALL_TRUE ", \"default\": " READ_ONLY
    "}, \"created\": 1795302882.8335726, \"lastModified\": 1795302882.8335726}";

/* hsdstest/home/test_user1/.domain.json */
static const char fixture_user_folder[] =
    "{\"owner\": \"test_user1\", \"acls\": {\"test_user1\": " ALL_TRUE ", \"default\": " READ_ONLY
    "}, \"created\": 1795302883.4599042, \"lastModified\": 1795302883.4599042}";

/* hsdstest/home/test_user1/sample1.h5/.domain.json */
static const char fixture_sample1[] =
    "{\"root\": \"g-d64bf735-c43d061d-5ec3-7fbd4c-b58e95\", \"owner\": \"test_user1\", "
    "\"acls\": {\"test_user1\": " ALL_TRUE "}, \"created\": 1795302886.3069947, "
    "\"lastModified\": 1795302886.3069947}";

/* hsdstest/home/test_user1/partial.h5/.domain.json */
static const char fixture_partial[] =
    "{\"root\": \"g-ed8fa543-b000e2e7-6507-2dcb38-886a6f\", \"owner\": \"test_user1\", "
    "\"acls\": {\"test_user1\": " ALL_TRUE "}, \"created\": 1795302893.746911, "
    "\"lastModified\": 1795302893.746911}";

static int parse(const char *json, struct schema_domain *dom, char *why)
{
    return schema_domain_parse(json, strlen(json), dom, why, WHY_LEN);
}

static const struct schema_acl *acl_of(const struct schema_domain *dom, const char *user)
{
    for (size_t i = 0; i < dom->n_acls; i++) {
        if (strcmp(dom->acls[i].user, user) == 0)
            return &dom->acls[i];
    }
    return NULL;
}

static int is_zeroed(const struct schema_domain *dom)
{
    return !dom->root && !dom->owner && !dom->acls && dom->n_acls == 0 && dom->created == 0 &&
           dom->last_modified == 0;
}

static void test_fixture_folder(void)
{
    struct schema_domain dom;
    char why[WHY_LEN] = "";
    CHECK_INT(parse(fixture_home, &dom, why), 0);
    CHECK(dom.root == NULL);
    CHECK_STR(dom.owner, "admin");
    CHECK_INT(dom.n_acls, 2);
    CHECK(acl_of(&dom, "admin") && acl_of(&dom, "admin")->rights == SCHEMA_ACL_ALL);
    CHECK(acl_of(&dom, "default") && acl_of(&dom, "default")->rights == SCHEMA_ACL_READ);
    CHECK(dom.created == 1795302882.8335726);
    CHECK(dom.last_modified == 1795302882.8335726);
    schema_domain_free(&dom);
    CHECK(is_zeroed(&dom));
    schema_domain_free(&dom); /* twice is harmless */

    CHECK_INT(parse(fixture_user_folder, &dom, why), 0);
    CHECK(dom.root == NULL);
    CHECK_STR(dom.owner, "test_user1");
    CHECK_INT(dom.n_acls, 2);
    schema_domain_free(&dom);
}

static void test_fixture_domains(void)
{
    struct schema_domain dom;
    char why[WHY_LEN] = "";
    CHECK_INT(parse(fixture_sample1, &dom, why), 0);
    CHECK_STR(dom.root, "g-d64bf735-c43d061d-5ec3-7fbd4c-b58e95");
    CHECK_STR(dom.owner, "test_user1");
    CHECK_INT(dom.n_acls, 1);
    CHECK_STR(dom.acls[0].user, "test_user1");
    CHECK_INT(dom.acls[0].rights, SCHEMA_ACL_ALL);
    CHECK(dom.created == 1795302886.3069947);
    schema_domain_free(&dom);

    CHECK_INT(parse(fixture_partial, &dom, why), 0);
    CHECK_STR(dom.root, "g-ed8fa543-b000e2e7-6507-2dcb38-886a6f");
    CHECK(dom.last_modified == 1795302893.746911);
    schema_domain_free(&dom);
}

static void test_valid_variants(void)
{
    struct schema_domain dom;
    char why[WHY_LEN] = "";

    /* after PUT /acls/<user>, HSDS stores a stray "domain" member in the entry (§3.1) */
    CHECK_INT(parse("{\"owner\": \"u\", \"acls\": {\"bob\": {\"create\": false, \"read\": true, "
                    "\"update\": true, \"delete\": false, \"readACL\": false, \"updateACL\": "
                    "false, \"domain\": \"hsdstest/home/u/x.h5\"}}}",
                    &dom, why),
              0);
    CHECK_INT(dom.n_acls, 1);
    CHECK_INT(dom.acls[0].rights, SCHEMA_ACL_READ | SCHEMA_ACL_UPDATE);
    CHECK(dom.created == 0 && dom.last_modified == 0);
    schema_domain_free(&dom);

    /* v1 root, integer timestamps, missing actions, empty acls, unknown members */
    CHECK_INT(parse("{\"root\": \"g-2428ae0e-a082-11e6-9d93-0242ac110005\", \"owner\": \"u\", "
                    "\"acls\": {\"u\": {\"read\": true}, \"g:staff\": {}}, \"created\": 17, "
                    "\"lastModified\": 18, \"extra\": [1, 2]}",
                    &dom, why),
              0);
    CHECK_STR(dom.root, "g-2428ae0e-a082-11e6-9d93-0242ac110005");
    CHECK(acl_of(&dom, "u") && acl_of(&dom, "u")->rights == SCHEMA_ACL_READ);
    CHECK(acl_of(&dom, "g:staff") && acl_of(&dom, "g:staff")->rights == 0);
    CHECK(dom.created == 17 && dom.last_modified == 18);
    schema_domain_free(&dom);

    CHECK_INT(parse("{\"owner\": \"\", \"acls\": {}}", &dom, why), 0);
    CHECK_STR(dom.owner, "");
    CHECK_INT(dom.n_acls, 0);
    CHECK(dom.acls == NULL);
    schema_domain_free(&dom);

    /* the length bounds the document: trailing bytes past len are not read */
    const char *json = "{\"owner\": \"u\", \"acls\": {}}garbage";
    CHECK_INT(schema_domain_parse(json, strlen(json) - 7, &dom, why, sizeof(why)), 0);
    schema_domain_free(&dom);

    /* a reason buffer is optional */
    CHECK_INT(schema_domain_parse("[]", 2, &dom, NULL, 0), -EINVAL);
    CHECK(is_zeroed(&dom));
}

static void test_malformed(void)
{
    static const struct {
        const char *json;
        const char *why;
    } cases[] = {
        { "[]", "not a JSON object" },
        { "[{\"owner\": \"u\", \"acls\": {}}]", "not a JSON object" },
        { "{\"owner\": \"u\", \"acls\": {\"u\": " ALL_TRUE "}", NULL }, /* truncated */
        { "{\"owner\": \"u\", \"acls\": {\"u\": {\"read\": tr", NULL },
        { "", NULL },
        { "\"owner\"", "not a JSON object" },
        { "42", "not a JSON object" },
        { "null", "not a JSON object" },
        { "{\"owner\": \"u\", \"acls\": {}} {}", NULL },
        { "{\"owner\": \"u\xff\", \"acls\": {}}", NULL }, /* bad UTF-8 */
        { "{\"owner\": \"u\", \"acls\": {\"\xc0\xaf\": {}}}", NULL },
        { "{\"acls\": {}}", "owner missing" },
        { "{\"owner\": 7, \"acls\": {}}", "owner is not a string" },
        { "{\"owner\": null, \"acls\": {}}", "owner is not a string" },
        { "{\"owner\": \"u\"}", "acls missing" },
        { "{\"owner\": \"u\", \"acls\": []}", "acls is not an object" },
        { "{\"owner\": \"u\", \"acls\": \"all\"}", "acls is not an object" },
        { "{\"owner\": \"u\", \"acls\": {\"u\": true}}", "ACL of \"u\" is not an object" },
        { "{\"owner\": \"u\", \"acls\": {\"u\": " ALL_TRUE ", \"v\": [true]}}",
          "ACL of \"v\" is not an object" },
        { "{\"owner\": \"u\", \"acls\": {\"u\": {\"read\": 1}}}",
          "ACL of \"u\": read is not a boolean" },
        { "{\"owner\": \"u\", \"acls\": {\"u\": {\"updateACL\": \"true\"}}}",
          "ACL of \"u\": updateACL is not a boolean" },
        { "{\"owner\": \"u\", \"acls\": {\"u\": {\"delete\": null}}}",
          "ACL of \"u\": delete is not a boolean" },
        { "{\"root\": 5, \"owner\": \"u\", \"acls\": {}}", "root is not a string" },
        { "{\"root\": null, \"owner\": \"u\", \"acls\": {}}", "root is not a string" },
        { "{\"root\": \"/home/u/x.h5\", \"owner\": \"u\", \"acls\": {}}",
          "root is not a root group id" },
        { "{\"root\": \"\", \"owner\": \"u\", \"acls\": {}}", "root is not a root group id" },
        /* a dataset id, a non-root v2 group, a v1 dataset, uppercase hex */
        { "{\"root\": \"d-b03b24ef-69f244b6-56e5-25125a-89ba79\", \"owner\": \"u\", "
          "\"acls\": {}}",
          "root is not a root group id" },
        { "{\"root\": \"g-d64bf735-c43d061d-ccec-b24d36-800ad8\", \"owner\": \"u\", "
          "\"acls\": {}}",
          "root is not a root group id" },
        { "{\"root\": \"d-4ab77230-9c0e-11e6-8fdd-0242ac110005\", \"owner\": \"u\", "
          "\"acls\": {}}",
          "root is not a root group id" },
        { "{\"root\": \"g-B03B24EF-69F244B6-38B3-AC67E1-7ACC3E\", \"owner\": \"u\", "
          "\"acls\": {}}",
          "root is not a root group id" },
        { "{\"owner\": \"u\", \"acls\": {}, \"created\": \"1795302886.3\"}",
          "created is not a number" },
        { "{\"owner\": \"u\", \"acls\": {}, \"created\": 1, \"lastModified\": true}",
          "lastModified is not a number" },
        { "{\"owner\": \"u\", \"acls\": {}, \"created\": NaN}", "created is not a number" },
    };
    for (size_t i = 0; i < N(cases); i++) {
        struct schema_domain dom;
        char why[WHY_LEN] = "";
        memset(&dom, 0xa5, sizeof(dom));
        CHECK_INT(parse(cases[i].json, &dom, why), -EINVAL);
        CHECK(is_zeroed(&dom));
        if (cases[i].why)
            CHECK_STR(why, cases[i].why);
        else
            CHECK(strncmp(why, "invalid JSON", 12) == 0);
        schema_domain_free(&dom); /* safe after a failed parse */
    }
}

static void test_malformed_after_allocation(void)
{
    /* The failing entry comes after valid ones, so the parse has already allocated. */
    struct schema_domain dom;
    char why[WHY_LEN];
    CHECK_INT(parse("{\"root\": \"g-d64bf735-c43d061d-5ec3-7fbd4c-b58e95\", \"owner\": \"u\", "
                    "\"acls\": {\"a\": " ALL_TRUE ", \"b\": " READ_ONLY ", \"c\": {\"read\": "
                    "\"yes\"}}}",
                    &dom, why),
              -EINVAL);
    CHECK(is_zeroed(&dom));
    CHECK_STR(why, "ACL of \"c\": read is not a boolean");
    CHECK_INT(parse("{\"root\": \"g-d64bf735-c43d061d-5ec3-7fbd4c-b58e95\", \"owner\": \"u\", "
                    "\"acls\": {\"a\": " ALL_TRUE "}, \"created\": [1]}",
                    &dom, why),
              -EINVAL);
    CHECK(is_zeroed(&dom));
    CHECK_STR(why, "created is not a number");
}

static void test_why_truncation(void)
{
    struct schema_domain dom;
    char why[8];
    memset(why, 'x', sizeof(why));
    CHECK_INT(schema_domain_parse("[]", 2, &dom, why, sizeof(why)), -EINVAL);
    CHECK_STR(why, "not a J");
    CHECK_INT(schema_domain_parse("[]", 2, NULL, why, sizeof(why)), -EINVAL);
    CHECK_INT(schema_domain_parse(NULL, 0, &dom, why, sizeof(why)), -EINVAL);
    CHECK(is_zeroed(&dom));
    struct schema_domain zero;
    memset(&zero, 0, sizeof(zero));
    schema_domain_free(&zero);
    schema_domain_free(NULL);
}

/* ---- ACL decisions ---- */

static const char acl_doc[] =
    "{\"root\": \"g-b03b24ef-69f244b6-38b3-ac67e1-7acc3e\", \"owner\": \"alice\", \"acls\": {"
    "\"alice\": " ALL_TRUE ", "
    "\"bob\": " ALL_FALSE ", "
    "\"carol\": {\"update\": true}, "
    "\"default\": " READ_ONLY ", "
    "\"g:staff\": {\"create\": true, \"update\": true}, "
    "\"g:audit\": {\"readACL\": true}, "
    "\"g:bob\": " ALL_TRUE "}}";

static void test_acl_decisions(void)
{
    static const char *const staff[] = { "staff" };
    static const char *const both[] = { "nobody", "staff", "audit" };
    static const char *const bob_group[] = { "bob" };
    struct schema_domain dom;
    char why[WHY_LEN];
    CHECK_INT(parse(acl_doc, &dom, why), 0);

    /* admin gets everything, with or without an entry */
    CHECK_INT(schema_acl_rights(&dom, "admin", "admin", NULL, 0), SCHEMA_ACL_ALL);
    CHECK_INT(schema_acl_rights(&dom, "bob", "bob", NULL, 0), SCHEMA_ACL_ALL);
    /* the user's own entry is authoritative, even all-false over a readable default */
    CHECK_INT(schema_acl_rights(&dom, "alice", "admin", NULL, 0), SCHEMA_ACL_ALL);
    CHECK_INT(schema_acl_rights(&dom, "bob", "admin", NULL, 0), 0);
    CHECK_INT(schema_acl_rights(&dom, "bob", "admin", bob_group, 1), 0);
    CHECK_INT(schema_acl_rights(&dom, "carol", "admin", staff, 1), SCHEMA_ACL_UPDATE);
    /* no entry: default, then the groups' entries, each action on its own */
    CHECK_INT(schema_acl_rights(&dom, "dave", "admin", NULL, 0), SCHEMA_ACL_READ);
    CHECK_INT(schema_acl_rights(&dom, "dave", "admin", staff, 1),
              SCHEMA_ACL_READ | SCHEMA_ACL_CREATE | SCHEMA_ACL_UPDATE);
    CHECK_INT(schema_acl_rights(&dom, "dave", "admin", both, 3),
              SCHEMA_ACL_READ | SCHEMA_ACL_CREATE | SCHEMA_ACL_UPDATE | SCHEMA_ACL_READ_ACL);
    /* an unauthenticated read runs as "default" */
    CHECK_INT(schema_acl_rights(&dom, "default", "admin", NULL, 0), SCHEMA_ACL_READ);
    /* a group name is not a user name, nor the other way round */
    CHECK_INT(schema_acl_rights(&dom, "staff", "admin", NULL, 0), SCHEMA_ACL_READ);
    CHECK_INT(schema_acl_rights(&dom, "dave", "admin", (const char *const[]){ "g:staff" }, 1),
              SCHEMA_ACL_READ);
    /* no admin configured */
    CHECK_INT(schema_acl_rights(&dom, "admin", NULL, NULL, 0), SCHEMA_ACL_READ);
    CHECK_INT(schema_acl_rights(&dom, "", "", NULL, 0), SCHEMA_ACL_READ);
    CHECK_INT(schema_acl_rights(&dom, NULL, "admin", NULL, 0), 0);
    CHECK_INT(schema_acl_rights(NULL, "alice", "admin", NULL, 0), 0);
    schema_domain_free(&dom);
}

static void test_acl_deny_and_folders(void)
{
    struct schema_domain dom;
    char why[WHY_LEN];
    /* a domain with only its owner's entry denies everyone else */
    CHECK_INT(parse(fixture_sample1, &dom, why), 0);
    CHECK_INT(schema_acl_rights(&dom, "test_user1", "admin", NULL, 0), SCHEMA_ACL_ALL);
    CHECK_INT(schema_acl_rights(&dom, "test_user2", "admin", NULL, 0), 0);
    CHECK_INT(schema_acl_rights(&dom, "default", "admin", NULL, 0), 0);
    CHECK_INT(
        schema_acl_rights(&dom, "test_user2", "admin", (const char *const[]){ "test_user1" }, 1),
        0);
    CHECK_INT(schema_acl_rights(&dom, "admin", "admin", NULL, 0), SCHEMA_ACL_ALL);
    schema_domain_free(&dom);

    /* folders get a read-only default, so anyone may list them */
    CHECK_INT(parse(fixture_user_folder, &dom, why), 0);
    CHECK_INT(schema_acl_rights(&dom, "test_user1", "admin", NULL, 0), SCHEMA_ACL_ALL);
    CHECK_INT(schema_acl_rights(&dom, "test_user2", "admin", NULL, 0), SCHEMA_ACL_READ);
    schema_domain_free(&dom);

    CHECK_INT(parse(fixture_home, &dom, why), 0);
    CHECK_INT(schema_acl_rights(&dom, "test_user1", "admin", NULL, 0), SCHEMA_ACL_READ);
    CHECK_INT(schema_acl_rights(&dom, "admin", "admin", NULL, 0), SCHEMA_ACL_ALL);
    schema_domain_free(&dom);
}

/* HSDS takes any string Python writes: a NUL or a lone surrogate in any string (an unknown
 * member, the owner, an ACL's user) costs nothing but itself. The owner is only shown: its
 * NUL as '?'. A root id is compared, so one with a NUL is no root. */
static void test_strings_hsds_takes(void)
{
    struct schema_domain dom;
    char why[WHY_LEN] = "";
    CHECK_INT(parse("{\"owner\": \"a\\u0000b\", \"acls\": {\"default\": {\"read\": true}}, "
                    "\"note\": \"\\u0000\", \"x\\u0000\": \"\\udc80\"}",
                    &dom, why),
              0);
    CHECK_STR(dom.owner, "a?b");
    CHECK(dom.root == NULL);
    CHECK(acl_of(&dom, "default") && acl_of(&dom, "default")->rights == SCHEMA_ACL_READ);
    schema_domain_free(&dom);

    CHECK_INT(parse("{\"owner\": \"u\\udc80\", \"acls\": {\"v\\udc80\": {\"read\": true}, "
                    "\"u\": {\"read\": true}}}",
                    &dom, why),
              0);
    CHECK_STR(dom.owner, "u\\udc80");
    /* the surrogate's user is nobody's name: it grants no one anything */
    CHECK_INT(schema_acl_rights(&dom, "v", NULL, NULL, 0), 0);
    CHECK_INT(schema_acl_rights(&dom, "u", NULL, NULL, 0), SCHEMA_ACL_READ);
    schema_domain_free(&dom);

    CHECK_INT(parse("{\"root\": \"g-d64bf735-c43d061d-5ec3-7fbd4c-b58e95\\u0000\", "
                    "\"owner\": \"u\", \"acls\": {}}",
                    &dom, why),
              -EINVAL);
    CHECK_STR(why, "root is not a root group id");
}

/* h5osfs's folder setting (user.h5osfs.ingest): read when it is one of the two words, else no
 * setting, and never a reason to refuse the folder. */
static void test_ingest_setting(void)
{
    static const char *const docs[] = {
        "{\"owner\": \"u\", \"acls\": {}, \"h5osfs\": {\"ingest\": \"link\"}}",
        "{\"owner\": \"u\", \"acls\": {}, \"h5osfs\": {\"ingest\": \"copy\"}}",
        "{\"owner\": \"u\", \"acls\": {}, \"h5osfs\": {\"ingest\": \"linked\"}}",
        "{\"owner\": \"u\", \"acls\": {}, \"h5osfs\": {\"ingest\": 1}}",
        "{\"owner\": \"u\", \"acls\": {}, \"h5osfs\": \"link\"}",
        "{\"owner\": \"u\", \"acls\": {}}",
    };
    static const enum schema_ingest want[] = { SCHEMA_INGEST_LINK,  SCHEMA_INGEST_COPY,
                                               SCHEMA_INGEST_UNSET, SCHEMA_INGEST_UNSET,
                                               SCHEMA_INGEST_UNSET, SCHEMA_INGEST_UNSET };
    for (size_t i = 0; i < N(docs); i++) {
        struct schema_domain dom;
        char why[WHY_LEN];
        CHECK_INT(parse(docs[i], &dom, why), 0);
        CHECK_INT(dom.ingest, want[i]);
        schema_domain_free(&dom);
    }
    CHECK(strcmp(schema_ingest_name(SCHEMA_INGEST_LINK), "link") == 0);
    CHECK(schema_ingest_name(SCHEMA_INGEST_UNSET) == NULL);
    CHECK_INT(schema_ingest_parse("link\n", 5), SCHEMA_INGEST_UNSET);
}

/* A kept version's ACL: every entry keeps its read and loses the rest; one without read stays
 * (it still overrides default); no acls: the owner reads. */
static void test_acls_read_only(void)
{
    json_t *acls = json_loads("{\"u\": {\"read\": true, \"update\": true, \"delete\": true},"
                              " \"x\": {\"read\": false, \"update\": true},"
                              " \"default\": {\"read\": true, \"create\": true}}",
                              JSON_PRESERVE_ORDER, NULL);
    CHECK(acls != NULL);
    json_t *got = schema_acls_read_only(acls, "owner");
    char *text = json_dumps(got, JSON_COMPACT);
    CHECK(text && strcmp(text, "{\"u\":{\"create\":false,\"read\":true,\"update\":false,"
                               "\"delete\":false,\"readACL\":false,\"updateACL\":false},"
                               "\"x\":{\"create\":false,\"read\":false,\"update\":false,"
                               "\"delete\":false,\"readACL\":false,\"updateACL\":false},"
                               "\"default\":{\"create\":false,\"read\":true,\"update\":false,"
                               "\"delete\":false,\"readACL\":false,\"updateACL\":false}}") == 0);
    free(text);
    json_decref(got);
    got = schema_acls_read_only(NULL, "owner");
    CHECK(json_object_size(got) == 1 &&
          json_is_true(json_object_get(json_object_get(got, "owner"), "read")) &&
          json_is_false(json_object_get(json_object_get(got, "owner"), "readACL")));
    json_decref(got);
    json_decref(acls);
}

int main(void)
{
    test_fixture_folder();
    test_fixture_domains();
    test_valid_variants();
    test_malformed();
    test_malformed_after_allocation();
    test_why_truncation();
    test_acl_decisions();
    test_acl_deny_and_folders();
    test_ingest_setting();
    test_strings_hsds_takes();
    test_acls_read_only();
    return check_done("schema_domain");
}
