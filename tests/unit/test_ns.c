/*
 * ns over a real posix store in a temporary bucket: which keys become files, directories,
 * hidden or broken entries, with which rights, and how the cache honours the ttl.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "h5osfs/util/log.h"
#include "h5osfs/ns/ns.h"
#include "h5osfs/store/store.h"

static char bucket[64];

#define ROOT_A "g-d64bf735-c43d061d-5ec3-7fbd4c-b58e95"
#define ACL_OWNER                                                       \
    "{\"alice\": {\"create\": true, \"read\": true, \"update\": true, " \
    "\"delete\": true, \"readACL\": true, \"updateACL\": true}, "       \
    "\"bob\": {\"read\": false}, \"default\": {\"read\": true}}"
#define DOMAIN_JSON                                                         \
    "{\"root\": \"" ROOT_A "\", \"owner\": \"alice\", \"acls\": " ACL_OWNER \
    ", \"created\": 1700000000.5, \"lastModified\": 1700000100.25}"
#define FOLDER_JSON                               \
    "{\"owner\": \"alice\", \"acls\": " ACL_OWNER \
    ", \"created\": 1600000000, \"lastModified\": 1600000001}"

static void put_file(const char *rel, const char *content)
{
    char path[512], dir[512];
    snprintf(path, sizeof path, "%s/%s", bucket, rel);
    /* mkdir -p of the parent */
    snprintf(dir, sizeof dir, "%s", path);
    for (char *p = dir + strlen(bucket) + 1; (p = strchr(p, '/')); p++) {
        *p = '\0';
        if (mkdir(dir, 0755) != 0 && errno != EEXIST)
            fprintf(stderr, "mkdir %s: %s\n", dir, strerror(errno));
        *p = '/';
    }
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(content, f);
        fclose(f);
    }
}

static void make_dir(const char *rel)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", bucket, rel);
    CHECK(mkdir(path, 0755) == 0);
}

static void build_bucket(void)
{
    snprintf(bucket, sizeof bucket, "/tmp/h5osfs-ns-XXXXXX");
    CHECK(mkdtemp(bucket) != NULL);
    put_file("home/.domain.json", FOLDER_JSON);
    put_file("home/alice/.domain.json", FOLDER_JSON);
    put_file("home/alice/a.h5/.domain.json", DOMAIN_JSON);
    put_file("home/alice/notobject.h5/.domain.json", "[1, 2, 3]");
    put_file("home/alice/truncated.h5/.domain.json", "{\"root\": \"g-d64b");
    put_file(
        "home/alice/badroot.h5/.domain.json",
        "{\"root\": \"d-d64bf735-c43d061d-5ec3-7fbd4c-b58e95\", \"owner\": \"x\", \"acls\": {}}");
    make_dir("home/alice/isdir.h5");
    make_dir("home/alice/isdir.h5/.domain.json");
    put_file("home/alice/bad\xff"
             "name.h5/.domain.json",
             DOMAIN_JSON);
    put_file("home/alice/.h5osfs-tmp.x/.domain.json", DOMAIN_JSON); /* a reserved name */
    put_file("home/alice/stray.txt", "not a domain");
    put_file("home/alice/empty/x", "no domain below");
    put_file("implicit/deeper/b.h5/.domain.json", DOMAIN_JSON);
    put_file("linked/file.h5", "HDF5 bytes");
    put_file("db/d64bf735-c43d061d/.group.json", "{}");
    put_file("db/d64bf735-c43d061d/.info.json",
             "{\"allocated_bytes\": 1000, \"metadata_bytes\": 24, \"num_groups\": 1}");
    put_file("db/.domain.json", FOLDER_JSON);
}

static void remove_bucket(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", bucket);
    CHECK(system(cmd) == 0);
}

static struct ns *open_ns(struct store *st, const char *user, double ttl)
{
    struct ns_config cfg = { .user = user, .admin_user = "admin", .ttl = ttl };
    struct ns *ns = NULL;
    CHECK_INT(ns_new(st, &cfg, &ns), 0);
    return ns;
}

static void test_kinds(struct store *st)
{
    struct ns *ns = open_ns(st, "alice", 60);
    struct ns_info info;

    CHECK_INT(ns_stat(ns, "/", &info), 0);
    CHECK_INT(info.kind, NS_DIR);
    CHECK_INT(ns_stat(ns, "/home", &info), 0);
    CHECK_INT(info.kind, NS_FOLDER);
    CHECK_INT(ns_stat(ns, "/home/alice/a.h5", &info), 0);
    CHECK_INT(info.kind, NS_DOMAIN);
    CHECK_STR(info.root, ROOT_A);
    CHECK_STR(info.owner, "alice");
    CHECK(info.mtime == 1700000100.25);
    CHECK(info.ctime == 1700000000.5);
    CHECK_INT(info.size, 0); /* the file's size comes from its image, not ns */
    CHECK_INT(ns_stat(ns, "/implicit", &info), 0);
    CHECK_INT(info.kind, NS_DIR);
    CHECK_INT(ns_stat(ns, "/implicit/deeper", &info), 0);
    CHECK_INT(info.kind, NS_DIR);

    for (const char *const *p =
             (const char *const[]){ "/home/alice/notobject.h5", "/home/alice/truncated.h5",
                                    "/home/alice/badroot.h5", "/home/alice/isdir.h5", NULL };
         *p; p++) {
        CHECK_INT(ns_stat(ns, *p, &info), 0);
        CHECK_INT(info.kind, NS_BROKEN);
        CHECK_INT(info.rights, 0);
    }
    for (const char *const *p =
             (const char *const[]){ "/db", "/db/d64bf735-c43d061d", "/linked", "/linked/file.h5",
                                    "/home/alice/stray.txt", "/home/alice/empty",
                                    "/home/alice/bad\xff"
                                    "name.h5",
                                    "/nothing", "/home/alice/a.h5/x", "/home//alice",
                                    "/home/alice/", "/home/./alice", "/home/alice/.h5osfs-tmp.x",
                                    "/home/alice/.domain.json", NULL };
         *p; p++) {
        CHECK_INT(ns_stat(ns, *p, &info), -ENOENT);
    }
    ns_free(ns);
}

static void test_rights(struct store *st)
{
    struct ns_info info;
    struct {
        const char *user;
        unsigned rights;
    } cases[] = {
        { "alice", SCHEMA_ACL_ALL },
        { "bob", 0 },                 /* own entry is authoritative over default */
        { "carol", SCHEMA_ACL_READ }, /* default */
        { "admin", SCHEMA_ACL_ALL },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct ns *ns = open_ns(st, cases[i].user, 0);
        CHECK_INT(ns_stat(ns, "/home/alice/a.h5", &info), 0);
        CHECK_INT(info.rights, cases[i].rights);
        CHECK_INT(ns_stat(ns, "/implicit", &info), 0);
        CHECK_INT(info.rights,
                  strcmp(cases[i].user, "admin") == 0 ? SCHEMA_ACL_ALL : SCHEMA_ACL_READ);
        ns_free(ns);
    }
}

/* One ns (one cache entry per path) answers for any user: the rights of each come from the
 * same ACL; the mount's user's (ns_stat) are not changed by asking for others. */
static void test_rights_as(struct store *st)
{
    struct ns_info info;
    struct {
        const char *user;
        unsigned rights;
    } cases[] = {
        { "alice", SCHEMA_ACL_ALL },  { "bob", 0 },
        { "carol", SCHEMA_ACL_READ }, { "admin", SCHEMA_ACL_ALL },
        { NULL, SCHEMA_ACL_READ }, /* no HSDS name: default's read */
    };
    put_file("implicit/open.h5/.domain.json",
             "{\"root\": \"" ROOT_A "\", \"owner\": \"alice\", \"acls\": {\"default\": "
             "{\"read\": true, \"update\": true, \"delete\": true}}}");
    for (double ttl = 0; ttl <= 60; ttl += 60) {
        struct ns *ns = open_ns(st, "carol", ttl);
        for (int round = 0; round < 2; round++) { /* from the store, then the cache */
            for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                CHECK_INT(ns_stat_as(ns, "/home/alice/a.h5", cases[i].user, &info), 0);
                CHECK_INT(info.kind, NS_DOMAIN);
                CHECK_INT(info.rights, cases[i].rights);
                CHECK_INT(ns_stat_as(ns, "/home/alice", cases[i].user, &info), 0);
                CHECK_INT(info.rights, cases[i].rights);
            }
            CHECK_INT(ns_stat(ns, "/home/alice/a.h5", &info), 0);
            CHECK_INT(info.rights, SCHEMA_ACL_READ);
            CHECK_INT(ns_stat_as(ns, "/implicit", "admin", &info), 0);
            CHECK_INT(info.rights, SCHEMA_ACL_ALL);
            CHECK_INT(ns_stat_as(ns, "/implicit", NULL, &info), 0);
            CHECK_INT(info.rights, SCHEMA_ACL_READ);
            CHECK_INT(ns_stat_as(ns, "/", NULL, &info), 0);
            CHECK_INT(info.rights, SCHEMA_ACL_READ);
            CHECK_INT(ns_stat_as(ns, "/implicit/open.h5", "dave", &info), 0);
            CHECK_INT(info.rights, SCHEMA_ACL_READ | SCHEMA_ACL_UPDATE | SCHEMA_ACL_DELETE);
            /* HSDS lets unauthenticated requests read at most */
            CHECK_INT(ns_stat_as(ns, "/implicit/open.h5", NULL, &info), 0);
            CHECK_INT(info.rights, SCHEMA_ACL_READ);
            CHECK_INT(ns_stat_as(ns, "/home/alice/notobject.h5", "admin", &info), 0);
            CHECK_INT(info.rights, 0);
            CHECK_INT(ns_stat_as(ns, "/nothing", "alice", &info), -ENOENT);
        }
        ns_free(ns);
    }
}

static int has_entry(const struct ns_dir *dir, const char *name, enum ns_kind kind)
{
    for (size_t i = 0; i < dir->n; i++)
        if (strcmp(dir->entries[i].name, name) == 0)
            return dir->entries[i].info.kind == kind;
    return 0;
}

static void test_readdir(struct store *st)
{
    struct ns *ns = open_ns(st, "alice", 60);
    struct ns_dir dir;

    CHECK_INT(ns_readdir(ns, "/", &dir), 0);
    CHECK_INT(dir.n, 2); /* home, implicit; not db, not linked */
    CHECK(has_entry(&dir, "home", NS_FOLDER));
    CHECK(has_entry(&dir, "implicit", NS_DIR));
    ns_dir_free(&dir);

    CHECK_INT(ns_readdir(ns, "/home/alice", &dir), 0);
    CHECK_INT(dir.n, 5);
    CHECK(has_entry(&dir, "a.h5", NS_DOMAIN));
    CHECK(has_entry(&dir, "notobject.h5", NS_BROKEN));
    CHECK(has_entry(&dir, "truncated.h5", NS_BROKEN));
    CHECK(has_entry(&dir, "badroot.h5", NS_BROKEN));
    CHECK(has_entry(&dir, "isdir.h5", NS_BROKEN));
    for (size_t i = 1; i < dir.n; i++)
        CHECK(strcmp(dir.entries[i - 1].name, dir.entries[i].name) < 0);
    ns_dir_free(&dir);

    CHECK_INT(ns_readdir(ns, "/home/alice/a.h5", &dir), -ENOTDIR);
    CHECK_INT(ns_readdir(ns, "/nothing", &dir), -ENOENT);
    ns_free(ns);
}

static void test_ttl(struct store *st)
{
    struct ns *cached = open_ns(st, "alice", 3600), *fresh = open_ns(st, "alice", 0);
    struct ns_info info;
    CHECK_INT(ns_stat(cached, "/home/alice/new.h5", &info), -ENOENT);
    put_file("home/alice/new.h5/.domain.json", DOMAIN_JSON);
    CHECK_INT(ns_stat(cached, "/home/alice/new.h5", &info), -ENOENT); /* negative entry */
    CHECK_INT(ns_stat(fresh, "/home/alice/new.h5", &info), 0);
    ns_invalidate(cached, "/home/alice/new.h5");
    CHECK_INT(ns_stat(cached, "/home/alice/new.h5", &info), 0);
    CHECK_INT(info.kind, NS_DOMAIN);
    ns_free(cached);
    ns_free(fresh);
}

int main(void)
{
    struct store *st = NULL;
    CHECK_INT(log_setup(LOG_LVL_ERROR, LOG_SINK_STDERR, NULL), 0);
    build_bucket();
    CHECK_INT(store_posix_open(bucket, &st), 0);
    if (st) {
        test_kinds(st);
        test_rights(st);
        test_rights_as(st);
        test_readdir(st);
        test_ttl(st);
        store_close(st);
    }
    remove_bucket();
    return check_done("ns");
}
