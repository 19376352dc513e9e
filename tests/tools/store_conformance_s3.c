/*
 * store_conformance_s3: the checks every store backend passes (tests/unit/store_conformance.h,
 * which the unit tests run over posix, memory and the faulty wrapper) run over a real S3
 * server, for tests/integration/test_store_conformance.py (s3rver and Ceph RGW).
 *
 *   store_conformance_s3 [-x CHECK]... ENDPOINT BUCKET
 *
 * -x: do not run check CHECK (cf_list, ...), for a test server that gets it wrong; the caller
 * says why.
 *
 * Each check gets a fresh, empty store: the bucket below a prefix of its own
 * ("conformance-PID-N/"), emptied and closed after the check. Credentials come from
 * AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY. Failed checks are printed on stderr; stdout
 * ends with "store_conformance_s3: P passed, F failed". Exit status 0 when none failed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h5osfs/util/log.h"
#include "h5osfs/store/store.h"
#include "h5osfs/store/store_s3.h"
#include "store_conformance.h"

static struct store_s3_config base_cfg;

/* What one check's store needs to be emptied and closed. */
struct s3_bucket_part {
    char prefix[64];
};

static struct store *open_s3(void **ctx)
{
    static unsigned opened; /* the checks run one after another */
    struct s3_bucket_part *part = calloc(1, sizeof *part);
    struct store_s3_config cfg = base_cfg;
    struct store *st = NULL;
    if (!part)
        return NULL;
    snprintf(part->prefix, sizeof part->prefix, "conformance-%ld-%u/", (long)getpid(), ++opened);
    cfg.prefix = part->prefix;
    int rc = store_s3_open(&cfg, &st);
    if (rc != 0) {
        fprintf(stderr, "store_s3_open %s: %s\n", part->prefix, strerror(-rc));
        free(part);
        return NULL;
    }
    *ctx = part;
    return st;
}

static int delete_key(void *ctx, const char *key, const struct store_stat *stat)
{
    (void)stat;
    int rc = store_delete(ctx, key);
    if (rc != 0 && rc != -ENOENT)
        fprintf(stderr, "cleanup: delete %s: %s\n", key, strerror(-rc));
    return 0;
}

static void close_s3(struct store *st, void *ctx)
{
    int rc = store_list_keys(st, "", delete_key, st);
    if (rc != 0)
        fprintf(stderr, "cleanup: list %s: %s\n", ((struct s3_bucket_part *)ctx)->prefix,
                strerror(-rc));
    store_close(st);
    free(ctx);
}

static int usage(void)
{
    fprintf(stderr, "usage: store_conformance_s3 [-x CHECK]... ENDPOINT BUCKET\n");
    return 2;
}

int main(int argc, char **argv)
{
    static const char *skip[16];
    size_t n_skip = 0;
    int opt;
    while ((opt = getopt(argc, argv, "x:")) != -1) {
        if (opt != 'x' || n_skip + 1 == sizeof skip / sizeof *skip)
            return usage();
        skip[n_skip++] = optarg;
    }
    if (argc - optind != 2)
        return usage();
    /* S3's differences from the local stores, as store_conformance.h describes them */
    const struct conformance_backend s3 = { .name = "s3",
                                            .open = open_s3,
                                            .close = close_s3,
                                            .opaque_tokens = 1,
                                            .delete_missing_ok = 1,
                                            .head_mtime_whole = 1,
                                            .skip = skip };
    base_cfg = (struct store_s3_config){
        .endpoint = argv[optind],
        .bucket = argv[optind + 1],
        .region = "us-east-1",
        .path_style = 1,
        .access_key_id = getenv("AWS_ACCESS_KEY_ID"),
        .secret_access_key = getenv("AWS_SECRET_ACCESS_KEY"),
        .max_requests = 16,
        .timeout = 30,
        .retries = 5,
        .retry_time = 60,
    };
    if (log_setup(LOG_LVL_ERROR, LOG_SINK_STDERR, NULL) != 0)
        return 1;
    store_conformance(&s3);
    log_teardown();
    return check_done("store_conformance_s3");
}
