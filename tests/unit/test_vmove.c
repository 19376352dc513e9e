/* Unit tests of vmove (include/h5osfs/domops/vmove.h): versions follow a renamed domain, over the
 * memory store. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "h5osfs/store/store_test.h"
#include "h5osfs/schema/vlist.h"
#include "h5osfs/domops/vmove.h"

#define POOL "g-11111111-22222222-9999-9999aa-aaaaaa"
#define OTHER_POOL "g-b2222222-22222222-3aaa-aaaaaa-aaaaaa"
#define R1 "g-a1111111-22222222-2999-9999aa-aaaaaa"

static void put_text(struct store *st, const char *key, const char *text)
{
    CHECK_INT(store_put(st, key, text, strlen(text)), 0);
}

static void put_list(struct store *st, const char *domain, const char *key, const char *pool)
{
    struct vlist l;
    char *text = NULL;
    CHECK_INT(vlist_init(&l, domain, pool), 0);
    CHECK_INT(vlist_append(&l, R1, 1764390000.5, "alice", 4096, "s1", NULL), 0);
    CHECK_INT(vlist_dump(&l, &text), 0);
    put_text(st, key, text);
    free(text);
    vlist_free(&l);
}

static int exists(struct store *st, const char *key)
{
    struct store_stat s;
    return store_head(st, key, &s) == 0;
}

static void test_list_keys(void)
{
    CHECK_INT(vmove_is_list_key("a/.versions/x.h5/.h5osfs-versions"), 1);
    CHECK_INT(vmove_is_list_key(".versions/x.h5/.h5osfs-versions"), 1);
    CHECK_INT(vmove_is_list_key("a/b.versions/x.h5/.h5osfs-versions"), 0);
    CHECK_INT(vmove_is_list_key("a/.versions/.h5osfs-versions"), 0);
    CHECK_INT(vmove_is_list_key("x.h5/.h5osfs-versions"), 0);
    CHECK_INT(vmove_is_list_key("a/.versions/x.h5/1.h5/.domain.json"), 0);
}

/* A versioned /a/x.h5: folder objects, one name, the list. */
static void versioned(struct store *st)
{
    put_text(st, "a/.versions/.domain.json", "{\"owner\": \"alice\"}");
    put_text(st, "a/.versions/x.h5/.domain.json", "{\"owner\": \"alice\"}");
    put_text(st, "a/.versions/x.h5/1.h5/.domain.json", "{\"root\": \"" R1 "\"}");
    put_list(st, "/a/x.h5", "a/.versions/x.h5/.h5osfs-versions", POOL);
}

static void test_move_and_drop(void)
{
    struct store *st;
    enum vmove_plan plan;
    struct store_buf buf = { 0 };
    struct vlist l;
    char why[100];
    CHECK_INT(store_mem_open(&st), 0);
    versioned(st);
    CHECK_INT(vmove_plan(st, "/a/x.h5", "/b/y.h5", &plan), 0);
    CHECK_INT(plan, VMOVE_MOVE);
    CHECK_INT(vmove_copy(st, "/a/x.h5", "/b/y.h5"), 0);
    CHECK(exists(st, "b/.versions/.domain.json"));
    CHECK(exists(st, "b/.versions/y.h5/.domain.json"));
    CHECK(exists(st, "b/.versions/y.h5/1.h5/.domain.json"));
    CHECK_INT(store_get(st, "b/.versions/y.h5/.h5osfs-versions", 1 << 20, &buf), 0);
    CHECK_INT(vlist_parse((const char *)buf.data, buf.len, &l, why, sizeof why), 0);
    CHECK_STR(l.domain, "/b/y.h5");
    CHECK_STR(l.pool, POOL);
    vlist_free(&l);
    store_buf_free(&buf);
    /* a copy with the source's pool is an interrupted move: mv again moves */
    CHECK_INT(vmove_plan(st, "/a/x.h5", "/b/y.h5", &plan), 0);
    CHECK_INT(plan, VMOVE_MOVE);
    vmove_drop(st, "/a/x.h5");
    CHECK(!exists(st, "a/.versions/x.h5/.h5osfs-versions"));
    CHECK(!exists(st, "a/.versions/x.h5/1.h5/.domain.json"));
    CHECK(!exists(st, "a/.versions/x.h5/.domain.json"));
    CHECK(!exists(st, "a/.versions/.domain.json")); /* nothing left below it */
    CHECK_INT(vmove_plan(st, "/a/x.h5", "/b/y.h5", &plan), 0);
    CHECK_INT(plan, VMOVE_TARGET_KEEPS); /* now b/y.h5's own */
    store_close(st);
}

static void test_plans(void)
{
    struct store *st;
    enum vmove_plan plan;
    CHECK_INT(store_mem_open(&st), 0);
    CHECK_INT(vmove_plan(st, "/a/x.h5", "/b/y.h5", &plan), 0);
    CHECK_INT(plan, VMOVE_NONE);
    versioned(st);
    put_list(st, "/b/y.h5", "b/.versions/y.h5/.h5osfs-versions", OTHER_POOL);
    CHECK_INT(vmove_plan(st, "/a/x.h5", "/b/y.h5", &plan), 0);
    CHECK_INT(plan, VMOVE_TARGET_KEEPS);
    CHECK_INT(vmove_plan(st, "/c/z.h5", "/b/y.h5", &plan), 0);
    CHECK_INT(plan, VMOVE_TARGET_KEEPS); /* an unversioned domain moved onto a versioned one */
    /* a second domain's versions keep DIR/.versions/ when one leaves */
    put_list(st, "/a/w.h5", "a/.versions/w.h5/.h5osfs-versions", OTHER_POOL);
    vmove_drop(st, "/a/x.h5");
    CHECK(exists(st, "a/.versions/.domain.json"));
    store_close(st);
}

int main(void)
{
    test_list_keys();
    test_move_and_drop();
    test_plans();
    return check_done("vmove");
}
