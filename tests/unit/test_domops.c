/*
 * test_domops: changes to the namespace (h5osfs/domops/domops.h) over a memory bucket behind
 * the faulty store, with rights from the domains' ACLs: mkdir, rmdir, unlink and rename of
 * domains and folders, each errno the header names for them, and what each leaves in the
 * bucket (which .domain.json objects exist, who owns them, which root they name, whether a
 * deleted domain's objects go to the collector).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "check.h"
#include "h5osfs/domops/domops.h"
#include "h5osfs/domops/gc.h"
#include "h5osfs/ns/ns.h"
#include "h5osfs/store/store_test.h"
#include "h5osfs/util/log.h"

#define ROOT_A "g-d64bf735-c43d061d-5ec3-7fbd4c-b58e95"
#define ROOT_B "g-a1111111-22222222-2999-9999aa-aaaaaa"
#define ROOT_C "g-b2222222-33333333-3aaa-aaaabb-bbbbbb"
#define KEYS_A "db/d64bf735-c43d061d/*"
#define KEYS_B "db/a1111111-22222222/*"

#define ALL_RIGHTS                                                            \
    "{\"create\": true, \"read\": true, \"update\": true, \"delete\": true, " \
    "\"readACL\": true, \"updateACL\": true}"
#define READ_ONLY                                                                \
    "{\"create\": false, \"read\": true, \"update\": false, \"delete\": false, " \
    "\"readACL\": false, \"updateACL\": false}"
/* u's own: u may do everything; alice's: u may only read */
#define ACLS_U "{\"u\": " ALL_RIGHTS ", \"default\": " READ_ONLY "}"
#define ACLS_ALICE "{\"alice\": " ALL_RIGHTS ", \"default\": " READ_ONLY "}"
#define FOLDER(owner, acls) \
    "{\"owner\": \"" owner "\", \"acls\": " acls ", \"created\": 1, \"lastModified\": 1}"
#define DOMAIN(root, owner, acls)                                        \
    "{\"root\": \"" root "\", \"owner\": \"" owner "\", \"acls\": " acls \
    ", \"created\": 1, \"lastModified\": 1}"

struct bucket {
    struct store *mem, *st;
    struct ns *ns;
    struct gc *gc;
    struct domops ops;
};

static void put_text(struct store *st, const char *key, const char *text)
{
    CHECK_INT(store_put(st, key, text, strlen(text)), 0);
}

static int exists(struct store *st, const char *key)
{
    struct store_stat s;
    return store_head(st, key, &s) == 0;
}

/* Objects whose key matches glob (a prefix and a star). */
static size_t count_prefix(struct store *st, const char *prefix)
{
    struct store_list l;
    size_t n = 0;
    if (store_list(st, prefix, NULL, NULL, 0, &l) != 0)
        return 0;
    n = l.n_objects;
    store_list_free(&l);
    return n;
}

/* The member name of the JSON object at key, as a string ("" when none). */
static void member_of(struct store *st, const char *key, const char *name, char *out, size_t len)
{
    struct store_buf b;
    out[0] = '\0';
    if (store_get(st, key, 1 << 20, &b) != 0)
        return;
    json_t *j = json_loadb((const char *)b.data, b.len, 0, NULL);
    const char *v = json_string_value(json_object_get(j, name));
    snprintf(out, len, "%s", v ? v : "");
    json_decref(j);
    store_buf_free(&b);
}

/*
 * /home (u's folder) with /home/a.h5 (ROOT_A, two objects) and /home/b.h5 (ROOT_B), u's;
 * /home/sub (u's folder) with /home/sub/c.h5 (ROOT_C); /shared (alice's folder) with
 * /shared/d.h5 (alice's); /plain/e.h5 below a plain directory (no folder object).
 */
static void bucket_open(struct bucket *b, int with_gc)
{
    struct ns_config nc = { .user = "u", .admin_user = "admin", .ttl = 0 };
    memset(b, 0, sizeof *b);
    if (store_mem_open(&b->mem) != 0 || store_faulty_open(b->mem, &b->st) != 0 ||
        ns_new(b->st, &nc, &b->ns) != 0) {
        fprintf(stderr, "cannot set up the bucket\n");
        exit(2);
    }
    if (with_gc && (gc_new(b->st, 0, NULL, NULL, &b->gc) != 0 || gc_start(b->gc) != 0)) {
        fprintf(stderr, "cannot set up the collector\n");
        exit(2);
    }
    put_text(b->mem, "home/.domain.json", FOLDER("u", ACLS_U));
    put_text(b->mem, "home/a.h5/.domain.json", DOMAIN(ROOT_A, "u", ACLS_U));
    put_text(b->mem, "db/d64bf735-c43d061d/.group.json", "{}");
    put_text(b->mem, "db/d64bf735-c43d061d/d/x/0", "chunk");
    put_text(b->mem, "home/b.h5/.domain.json", DOMAIN(ROOT_B, "u", ACLS_U));
    put_text(b->mem, "db/a1111111-22222222/.group.json", "{}");
    put_text(b->mem, "home/sub/.domain.json", FOLDER("u", ACLS_U));
    put_text(b->mem, "home/sub/c.h5/.domain.json", DOMAIN(ROOT_C, "u", ACLS_U));
    put_text(b->mem, "shared/.domain.json", FOLDER("alice", ACLS_ALICE));
    put_text(b->mem, "shared/d.h5/.domain.json", DOMAIN(ROOT_A, "alice", ACLS_ALICE));
    put_text(b->mem, "plain/e.h5/.domain.json", DOMAIN(ROOT_B, "u", ACLS_U));
    b->ops = (struct domops){
        .store = b->st, .ns = b->ns, .user = "u", .admin_user = "admin", .gc = b->gc
    };
}

static void bucket_close(struct bucket *b)
{
    gc_free(b->gc);
    ns_free(b->ns);
    store_close(b->st);
    store_close(b->mem);
}

static void test_mkdir(void)
{
    struct bucket b;
    char owner[64];
    bucket_open(&b, 0);
    CHECK_INT(domops_mkdir(&b.ops, "u", "/home/new"), 0);
    CHECK(exists(b.mem, "home/new/.domain.json"));
    member_of(b.mem, "home/new/.domain.json", "owner", owner, sizeof owner);
    CHECK_STR(owner, "u");
    member_of(b.mem, "home/new/.domain.json", "root", owner, sizeof owner);
    CHECK_STR(owner, ""); /* a folder: no root */
    struct ns_info info;
    CHECK_INT(ns_stat(b.ns, "/home/new", &info), 0);
    CHECK_INT(info.kind, NS_FOLDER);

    CHECK_INT(domops_mkdir(&b.ops, "u", "/home/new"), -EEXIST);
    CHECK_INT(domops_mkdir(&b.ops, "u", "/home/a.h5"), -EEXIST); /* a domain has the name */
    CHECK_INT(domops_mkdir(&b.ops, "u", "/nowhere/x"), -ENOENT);
    CHECK_INT(domops_mkdir(&b.ops, "u", "/home/a.h5/x"), -ENOTDIR);
    /* rights: alice's folder, the bucket root and plain directories are not u's to create in;
     * a caller without an HSDS name creates nothing */
    CHECK_INT(domops_mkdir(&b.ops, "u", "/shared/x"), -EACCES);
    CHECK_INT(domops_mkdir(&b.ops, "u", "/top"), -EACCES);
    CHECK_INT(domops_mkdir(&b.ops, "u", "/plain/x"), -EACCES);
    CHECK_INT(domops_mkdir(&b.ops, NULL, "/home/anon"), -EACCES);
    CHECK(!exists(b.mem, "shared/x/.domain.json"));
    CHECK(!exists(b.mem, "top/.domain.json"));
    CHECK(!exists(b.mem, "plain/x/.domain.json"));
    CHECK(!exists(b.mem, "home/anon/.domain.json"));
    CHECK_INT(domops_mkdir(&b.ops, "alice", "/shared/x"), 0);
    member_of(b.mem, "shared/x/.domain.json", "owner", owner, sizeof owner);
    CHECK_STR(owner, "alice"); /* the caller's, not the mount's user */
    CHECK_INT(domops_mkdir(&b.ops, "admin", "/top"), 0);
    CHECK(exists(b.mem, "top/.domain.json"));

    /* an object that is no domain holds the name's key: refused before anything is written */
    put_text(b.mem, "home/stray", "x");
    CHECK_INT(domops_mkdir(&b.ops, "u", "/home/stray"), -EEXIST);
    CHECK(!exists(b.mem, "home/stray/.domain.json"));

    /* the put fails: -EIO and no folder */
    struct faulty_rule fail = { .ops = FAULTY_MASK(FAULTY_PUT) | FAULTY_MASK(FAULTY_PUT_IF),
                                .mode = FAULTY_FAIL,
                                .err = -EIO };
    CHECK_INT(store_faulty_add(b.st, &fail), 0);
    CHECK_INT(domops_mkdir(&b.ops, "u", "/home/failed"), -EIO);
    CHECK(!exists(b.mem, "home/failed/.domain.json"));
    bucket_close(&b);
}

static void test_rmdir(void)
{
    struct bucket b;
    bucket_open(&b, 0);
    CHECK_INT(domops_rmdir(&b.ops, "u", "/home/sub"), -ENOTEMPTY);
    CHECK_INT(domops_rmdir(&b.ops, "u", "/home"), -ENOTEMPTY);
    CHECK_INT(domops_rmdir(&b.ops, "u", "/plain"), -ENOTEMPTY); /* a plain directory */
    CHECK_INT(domops_rmdir(&b.ops, "u", "/home/a.h5"), -ENOTDIR);
    CHECK_INT(domops_rmdir(&b.ops, "u", "/home/none"), -ENOENT);
    put_text(b.mem, "shared/empty/.domain.json", FOLDER("alice", ACLS_ALICE));
    CHECK_INT(domops_rmdir(&b.ops, "u", "/shared/empty"), -EACCES);
    CHECK(exists(b.mem, "shared/empty/.domain.json"));
    CHECK_INT(domops_rmdir(&b.ops, "alice", "/shared/empty"), 0);
    CHECK(!exists(b.mem, "shared/empty/.domain.json"));

    CHECK_INT(domops_unlink(&b.ops, "u", "/home/sub/c.h5"), 0);
    CHECK_INT(domops_rmdir(&b.ops, "u", "/home/sub"), 0);
    CHECK(!exists(b.mem, "home/sub/.domain.json"));
    CHECK_INT(domops_rmdir(&b.ops, "u", "/home/sub"), -ENOENT);

    /* kept versions below an empty folder: not removed with it */
    put_text(b.mem, "home/v/.domain.json", FOLDER("u", ACLS_U));
    put_text(b.mem, "home/v/.versions/x.h5/.h5osfs-versions", "{}");
    CHECK_INT(domops_rmdir(&b.ops, "u", "/home/v"), -ENOTEMPTY);
    CHECK(exists(b.mem, "home/v/.domain.json"));
    bucket_close(&b);
}

static void test_unlink(void)
{
    struct bucket b;
    bucket_open(&b, 0);
    CHECK_INT(domops_unlink(&b.ops, "u", "/home/a.h5"), 0);
    CHECK(!exists(b.mem, "home/a.h5/.domain.json"));
    CHECK_INT(count_prefix(b.mem, "db/d64bf735-c43d061d/"), 2); /* no collector: left */
    CHECK_INT(domops_unlink(&b.ops, "u", "/home/a.h5"), -ENOENT);
    CHECK_INT(domops_unlink(&b.ops, "u", "/home/sub"), -EISDIR);
    CHECK_INT(domops_unlink(&b.ops, "u", "/shared/d.h5"), -EACCES);
    CHECK(exists(b.mem, "shared/d.h5/.domain.json"));
    CHECK_INT(domops_unlink(&b.ops, NULL, "/home/b.h5"), -EACCES);
    CHECK(exists(b.mem, "home/b.h5/.domain.json"));

    /* the delete fails: -EIO, the domain stays */
    struct faulty_rule fail = { .ops = FAULTY_MASK(FAULTY_DELETE),
                                .mode = FAULTY_FAIL,
                                .err = -EIO };
    CHECK_INT(store_faulty_add(b.st, &fail), 0);
    CHECK_INT(domops_unlink(&b.ops, "u", "/home/b.h5"), -EIO);
    CHECK(exists(b.mem, "home/b.h5/.domain.json"));
    store_faulty_clear(b.st);
    /* the reply is lost though the delete took effect: the caller gets -EIO, the domain is
     * gone (a retry then finds nothing: -ENOENT) */
    fail.mode = FAULTY_AFTER;
    CHECK_INT(store_faulty_add(b.st, &fail), 0);
    CHECK_INT(domops_unlink(&b.ops, "u", "/home/b.h5"), -EIO);
    CHECK(!exists(b.mem, "home/b.h5/.domain.json"));
    store_faulty_clear(b.st);
    CHECK_INT(domops_unlink(&b.ops, "u", "/home/b.h5"), -ENOENT);
    bucket_close(&b);
}

/* With a collector, a deleted domain's objects go once it has run. */
static void test_unlink_collects(void)
{
    struct bucket b;
    bucket_open(&b, 1);
    CHECK_INT(domops_unlink(&b.ops, "u", "/home/a.h5"), 0);
    gc_drain(b.gc);
    CHECK_INT(count_prefix(b.mem, "db/d64bf735-c43d061d/"), 0);
    CHECK_INT(count_prefix(b.mem, "db/a1111111-22222222/"), 1); /* b's: untouched */
    bucket_close(&b);
}

/* A version's root is queued under the version's path; a versions_current=ref domain names
 * its head version's root itself, and a commit whose swap failed after its list expired
 * that version leaves it named there: what the current domain names is never collected. */
static void test_a_version_root_its_current_domain_names_is_kept(void)
{
    struct bucket b;
    bucket_open(&b, 1);
    /* before the gc_add: the collector (grace 0) may take ROOT_C at once */
    put_text(b.mem, "db/b2222222-33333333/.group.json", "{}");
    CHECK_INT(gc_add(b.gc, ROOT_A, "/home/.versions/a.h5/1.h5", ""), 0);
    CHECK_INT(gc_add(b.gc, ROOT_C, "/home/.versions/gone.h5/1.h5", ""), 0);
    gc_drain(b.gc);
    CHECK_INT(count_prefix(b.mem, "db/d64bf735-c43d061d/"), 2); /* /home/a.h5 names it */
    CHECK_INT(count_prefix(b.mem, "db/b2222222-33333333/"), 0); /* named by no domain */
    bucket_close(&b);
}

static void test_rename_domain(void)
{
    struct bucket b;
    char root[64];
    bucket_open(&b, 1);
    CHECK_INT(domops_rename(&b.ops, "u", "/home/a.h5", "/home/x.h5", 0), 0);
    CHECK(!exists(b.mem, "home/a.h5/.domain.json"));
    member_of(b.mem, "home/x.h5/.domain.json", "root", root, sizeof root);
    CHECK_STR(root, ROOT_A);
    CHECK_INT(domops_rename(&b.ops, "u", "/home/x.h5", "/home/x.h5", 0), 0); /* onto itself */
    CHECK(exists(b.mem, "home/x.h5/.domain.json"));

    /* onto an existing domain: NOREPLACE refuses, else it is replaced and its root collected */
    CHECK_INT(domops_rename(&b.ops, "u", "/home/x.h5", "/home/b.h5", RENAME_NOREPLACE), -EEXIST);
    CHECK_INT(domops_rename(&b.ops, "u", "/home/x.h5", "/home/b.h5", RENAME_EXCHANGE), -EINVAL);
    CHECK_INT(domops_rename(&b.ops, "u", "/home/x.h5", "/home/b.h5", 0), 0);
    member_of(b.mem, "home/b.h5/.domain.json", "root", root, sizeof root);
    CHECK_STR(root, ROOT_A);
    CHECK(!exists(b.mem, "home/x.h5/.domain.json"));
    gc_drain(b.gc);
    CHECK_INT(count_prefix(b.mem, "db/a1111111-22222222/"), 0);
    CHECK_INT(count_prefix(b.mem, "db/d64bf735-c43d061d/"), 2);

    CHECK_INT(domops_rename(&b.ops, "u", "/home/none.h5", "/home/y.h5", 0), -ENOENT);
    CHECK_INT(domops_rename(&b.ops, "u", "/home/b.h5", "/home/sub", 0), -EISDIR);
    CHECK_INT(domops_rename(&b.ops, "u", "/home/b.h5", "/nowhere/b.h5", 0), -ENOENT);
    /* rights: alice's domain cannot be moved away by u, nor can u move into alice's folder */
    CHECK_INT(domops_rename(&b.ops, "u", "/shared/d.h5", "/home/d.h5", 0), -EACCES);
    CHECK_INT(domops_rename(&b.ops, "u", "/home/b.h5", "/shared/b.h5", 0), -EACCES);
    CHECK(exists(b.mem, "shared/d.h5/.domain.json"));
    CHECK(exists(b.mem, "home/b.h5/.domain.json"));
    CHECK(!exists(b.mem, "shared/b.h5/.domain.json"));
    /* a version keeps its name, and a domain has one name: no hard link */
    CHECK_INT(domops_rename(&b.ops, "u", "/home/.versions/b.h5/1.h5", "/home/z.h5", 0), -EROFS);
    CHECK_INT(domops_link(&b.ops, "u", "/home/b.h5", "/home/z.h5"), -EROFS);
    CHECK(!exists(b.mem, "home/z.h5/.domain.json"));

    /* the copy fails: -EIO, the domain keeps its old name only */
    struct faulty_rule fail = { .ops = FAULTY_MASK(FAULTY_PUT), .mode = FAULTY_FAIL, .err = -EIO };
    CHECK_INT(store_faulty_add(b.st, &fail), 0);
    CHECK_INT(domops_rename(&b.ops, "u", "/home/b.h5", "/home/w.h5", 0), -EIO);
    CHECK(exists(b.mem, "home/b.h5/.domain.json"));
    CHECK(!exists(b.mem, "home/w.h5/.domain.json"));
    bucket_close(&b);
}

static void test_rename_folder(void)
{
    struct bucket b;
    char root[64];
    bucket_open(&b, 0);
    CHECK_INT(domops_rename(&b.ops, "u", "/home/sub", "/home/sub/in", 0), -EINVAL);
    CHECK_INT(domops_rename(&b.ops, "u", "/home/sub", "/home/a.h5", 0), -ENOTDIR);
    put_text(b.mem, "home/full/.domain.json", FOLDER("u", ACLS_U));
    put_text(b.mem, "home/full/f.h5/.domain.json", DOMAIN(ROOT_B, "u", ACLS_U));
    CHECK_INT(domops_rename(&b.ops, "u", "/home/sub", "/home/full", 0), -ENOTEMPTY);
    CHECK(exists(b.mem, "home/sub/c.h5/.domain.json"));

    /* the folder and every domain below it move; the domains' objects stay where they are */
    CHECK_INT(domops_rename(&b.ops, "u", "/home/sub", "/home/moved", 0), 0);
    CHECK(!exists(b.mem, "home/sub/.domain.json"));
    CHECK(!exists(b.mem, "home/sub/c.h5/.domain.json"));
    CHECK(exists(b.mem, "home/moved/.domain.json"));
    member_of(b.mem, "home/moved/c.h5/.domain.json", "root", root, sizeof root);
    CHECK_STR(root, ROOT_C);

    /* onto an empty folder: replaced */
    put_text(b.mem, "home/empty/.domain.json", FOLDER("u", ACLS_U));
    CHECK_INT(domops_rename(&b.ops, "u", "/home/moved", "/home/empty", 0), 0);
    CHECK(exists(b.mem, "home/empty/c.h5/.domain.json"));
    CHECK(!exists(b.mem, "home/moved/.domain.json"));
    bucket_close(&b);
}

static void test_may_create_and_domain_json(void)
{
    struct bucket b;
    char *json = NULL;
    bucket_open(&b, 0);
    CHECK_INT(domops_may_create(&b.ops, "u", "/home/new.h5"), 0);
    CHECK_INT(domops_may_create(&b.ops, "u", "/shared/new.h5"), -EACCES);
    CHECK_INT(domops_may_create(&b.ops, "u", "/nowhere/new.h5"), -ENOENT);
    CHECK_INT(domops_may_create(&b.ops, "u", "/home/db"), 0); /* only the top level is kept */
    CHECK(domops_may_create(&b.ops, "admin", "/db") != 0);    /* the objects' own prefix */
    CHECK_INT(domops_domain_json(&b.ops, "/home/new.h5", ROOT_B, &json), 0);
    json_t *j = json ? json_loads(json, 0, NULL) : NULL;
    CHECK_STR(json_string_value(json_object_get(j, "root")), ROOT_B);
    CHECK_STR(json_string_value(json_object_get(j, "owner")), "u");
    /* the parent folder's ACLs are inherited: u keeps every right there */
    json_t *acls = json_object_get(j, "acls");
    CHECK(json_is_true(json_object_get(json_object_get(acls, "u"), "delete")));
    json_decref(j);
    free(json);
    bucket_close(&b);
}

int main(void)
{
    if (log_setup(LOG_LVL_ERROR, LOG_SINK_FILE, "/dev/null") != 0)
        return 1;
    test_mkdir();
    test_rmdir();
    test_unlink();
    test_unlink_collects();
    test_a_version_root_its_current_domain_names_is_kept();
    test_rename_domain();
    test_rename_folder();
    test_may_create_and_domain_json();
    log_teardown();
    return check_done("domops");
}
