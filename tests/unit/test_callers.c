/* callers: who a request acts as (the mounting uid, -o user_map, local names, nobody), the
 * check of -o user_map, and the creators of files not committed yet. */
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "h5osfs/fs/callers.h"

#define MOUNT_UID 4242

/* A uid with no local account (the name service is asked; the first free one from 54321). */
static uid_t unnamed_uid(void)
{
    for (uid_t uid = 54321; uid < 60000; uid++)
        if (!getpwuid(uid))
            return uid;
    return (uid_t)-1;
}

static void test_check_map(void)
{
    char why[200];
    CHECK_INT(callers_check_map("1001:alice", MOUNT_UID, why, sizeof why), 0);
    CHECK_INT(callers_check_map("1001:alice:1002:bob smith:0:admin", MOUNT_UID, why, sizeof why),
              0);
    const char *bad[] = {
        "",
        "1001",
        "1001:",
        "1001:alice:",
        "1001:alice:1002",
        ":alice",
        "x:alice",
        "-1:alice",
        "4294967295:alice",
        "99999999999999999999:alice",
        "1001:al\tice",
        "1001:alice:1001:bob", /* the same uid twice */
        "4242:alice",          /* the mounting uid: its name is -o user= */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = '\0';
        CHECK_INT(callers_check_map(bad[i], MOUNT_UID, why, sizeof why), -EINVAL);
        CHECK(why[0] != '\0');
    }
    char long_name[300] = "1001:"; /* a name of 294 bytes */
    memset(long_name + 5, 'n', sizeof long_name - 6);
    long_name[sizeof long_name - 1] = '\0';
    CHECK_INT(callers_check_map(long_name, MOUNT_UID, why, sizeof why), -EINVAL);
}

static void test_identify(void)
{
    struct callers_config cfg = { MOUNT_UID, "test_user1", "1001:test_user2:0:ops" };
    struct callers *c = NULL;
    struct caller who;
    CHECK_INT(callers_new(&cfg, &c), 0);
    if (!c)
        return;
    callers_identify(c, MOUNT_UID, &who);
    CHECK(caller_is_mounter(&who));
    CHECK_STR(caller_user(&who), "test_user1");

    callers_identify(c, 1001, &who);
    CHECK(!caller_is_mounter(&who));
    CHECK_STR(caller_user(&who), "test_user2");
    callers_identify(c, 0, &who); /* root is who the map says, nothing more */
    CHECK_STR(caller_user(&who), "ops");

    struct passwd *nobody = getpwnam("nobody");
    CHECK(nobody != NULL);
    if (nobody) {
        uid_t uid = nobody->pw_uid;
        callers_identify(c, uid, &who); /* not mapped: the local user name */
        CHECK_STR(caller_user(&who), "nobody");
    }
    uid_t unnamed = unnamed_uid();
    CHECK(unnamed != (uid_t)-1);
    callers_identify(c, unnamed, &who);
    CHECK(caller_user(&who) == NULL);
    CHECK(!caller_is_mounter(&who));
    callers_free(c);

    struct callers_config plain = { MOUNT_UID, "me", NULL };
    CHECK_INT(callers_new(&plain, &c), 0);
    callers_identify(c, 0, &who); /* without a map root is "root" */
    CHECK_STR(caller_user(&who), "root");
    callers_free(c);

    struct callers_config bad = { MOUNT_UID, "me", "1001" };
    c = NULL;
    CHECK_INT(callers_new(&bad, &c), -EINVAL);
    CHECK(c == NULL);
}

static int staged_none(void *ctx, const char *path)
{
    (void)ctx;
    return strcmp(path, "/keep.h5") == 0;
}

static void test_creators(void)
{
    struct callers_config cfg = { MOUNT_UID, "me", NULL };
    struct callers *c = NULL;
    char buf[CALLERS_NAME_MAX];
    CHECK_INT(callers_new(&cfg, &c), 0);
    if (!c)
        return;
    CHECK_INT(callers_creator(c, "/a.h5", buf, sizeof buf), -ENOENT);
    CHECK_INT(callers_set_creator(c, "/a.h5", "bob"), 0);
    CHECK_INT(callers_creator(c, "/a.h5", buf, sizeof buf), 0);
    CHECK_STR(buf, "bob");
    CHECK_INT(callers_creator(c, "/a.h5", buf, 3), -ENAMETOOLONG);
    CHECK_INT(callers_set_creator(c, "/a.h5", "carol"), 0);
    CHECK_INT(callers_creator(c, "/a.h5", buf, sizeof buf), 0);
    CHECK_STR(buf, "carol");
    callers_rename_creator(c, "/a.h5", "/b.h5");
    CHECK_INT(callers_creator(c, "/a.h5", buf, sizeof buf), -ENOENT);
    CHECK_INT(callers_creator(c, "/b.h5", buf, sizeof buf), 0);
    CHECK_STR(buf, "carol");
    callers_forget_creator(c, "/b.h5");
    CHECK_INT(callers_creator(c, "/b.h5", buf, sizeof buf), -ENOENT);

    /* many creators: set says when to prune; a prune keeps the staged ones */
    int asked = 0;
    char path[64];
    CHECK_INT(callers_set_creator(c, "/keep.h5", "bob"), 0);
    for (int i = 0; i < 5000 && !asked; i++) {
        snprintf(path, sizeof path, "/f%d.h5", i);
        int rc = callers_set_creator(c, path, "bob");
        CHECK(rc == 0 || rc == 1);
        asked = rc == 1;
    }
    CHECK(asked);
    callers_prune_creators(c, staged_none, NULL);
    CHECK_INT(callers_creator(c, "/keep.h5", buf, sizeof buf), 0);
    CHECK_INT(callers_creator(c, "/f0.h5", buf, sizeof buf), -ENOENT);
    CHECK_INT(callers_set_creator(c, "/again.h5", "bob"), 0); /* not asked again at once */
    callers_free(c);
}

int main(void)
{
    test_check_map();
    test_identify();
    test_creators();
    return check_done("callers");
}
