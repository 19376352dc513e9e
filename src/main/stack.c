/* stack: see stack.h. */
#include "stack.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h5osfs/fs/callers.h"
#include "h5osfs/util/dirs.h"
#include "h5osfs/domops/domops.h"
#include "h5osfs/domops/gc.h"
#include "h5osfs/image/image_table.h"
#include "h5osfs/commit/info.h"
#include "h5osfs/commit/journal.h"
#include "h5osfs/util/log.h"
#include "h5osfs/ns/ns.h"
#include "h5osfs/cache/prefetch.h"
#include "h5osfs/staging/staging.h"
#include "h5osfs/store/store.h"
#include "h5osfs/store/store_s3.h"
#include "h5osfs/domops/sweep.h"
#include "h5osfs/commit/versions.h"
#include "h5osfs/credentials/credentials.h"
#include "h5osfs/zarr/zarr.h"

#define CHUNK_RETRY_AFTER 1.0 /* seconds a chunk that failed to load fails without a retry */
#define GC_GRACE 30.0         /* seconds a deleted domain's objects stay for open readers */
#define WRITE_WORKERS 4       /* chunk objects a commit encodes and puts at once */
#define PREFETCH_WORKERS 4
#define PREFETCH_QUEUE 256

struct stack {
    const struct options *opts; /* the command line's: outlives the stack */
    struct store *store;
    char *bucket_name;
    struct ns *ns;
    struct chunk_cache *cache;
    struct prefetcher *prefetch; /* NULL until stack_start, or without read-ahead */
    char *image_dir;             /* NULL: built files are not kept */
    struct image_table *images;
    struct callers *callers;
    struct domops ops;       /* complete before anything uses it (stack_start) */
    struct journal *journal; /* these two: NULL on a read-only mount */
    struct staging *staging;
    struct info_queue *info; /* domain summaries after commits */
    struct gc *gc;
    struct sweeper *sweeper; /* removed versions' collection; NULL on a read-only mount */
    struct fs *fs;
    char *refs_base;             /* MOUNT/.kerchunk's URL base */
    struct zarr_view *refs_view; /* -o bucket_refs=on: makes the references commits put */
};

/* "s3://bucket/a/b" -> bucket "bucket", prefix "a/b/". 0 or -1 (reported). */
static int split_s3_url(const char *url, char **bucket, char **prefix)
{
    const char *b = url + 5, *slash = strchr(b, '/');
    size_t blen = slash ? (size_t)(slash - b) : strlen(b);
    const char *p = slash ? slash + 1 : "";
    size_t plen = strlen(p);
    while (plen > 0 && p[plen - 1] == '/')
        plen--;
    int ok = blen >= 3 && blen <= 63;
    for (size_t i = 0; i < blen && ok; i++)
        ok = (b[i] >= 'a' && b[i] <= 'z') || (b[i] >= '0' && b[i] <= '9') || b[i] == '.' ||
             b[i] == '-' || b[i] == '_' || (b[i] >= 'A' && b[i] <= 'Z');
    if (!ok) {
        fprintf(stderr, "h5osfs: '%s' does not name an S3 bucket (s3://bucket[/prefix])\n", url);
        return -1;
    }
    if (asprintf(bucket, "%.*s", (int)blen, b) < 0 ||
        asprintf(prefix, "%.*s%s", (int)plen, p, plen ? "/" : "") < 0) {
        fprintf(stderr, "h5osfs: out of memory\n");
        return -1;
    }
    return 0;
}

/* An object store answers many requests at once; a local disk gains little past a few. */
static unsigned requests_at_once(const struct options *opts)
{
    return strncmp(opts->bucket, "s3://", 5) == 0 ? opts->max_requests : PREFETCH_WORKERS;
}

/* The bucket's name is its directory's name: linked layouts name files as "bucket/key". */
static char *bucket_name(const char *dir)
{
    char *real = realpath(dir, NULL);
    if (!real)
        return strdup(dir);
    char *slash = strrchr(real, '/');
    char *name = strdup(slash && slash[1] ? slash + 1 : real);
    free(real);
    return name;
}

/* Wrong credentials, a missing bucket or a wrong endpoint would fail every request of the
 * mount: one request finds them, and the mount is refused with one line. 0 or -1. */
static int check_s3(const struct options *opts, struct store *store)
{
    char why[640];
    int rc = store_s3_check(store, why, sizeof why);
    if (rc != 0)
        fprintf(stderr, "h5osfs: S3 bucket '%s': %s\n", opts->bucket, why);
    else if (why[0])
        log_warn("S3 bucket '%s': %s", opts->bucket, why);
    return rc == 0 ? 0 : -1;
}

static int open_s3(const struct options *opts, struct store **store, char **name)
{
    char *prefix = NULL, why[400];
    struct credentials cred = { 0 };
    int rc = -1;
    if (split_s3_url(opts->bucket, name, &prefix) != 0)
        goto out;
    rc = credentials_load(opts->profile, opts->region, &cred, why, sizeof why);
    if (rc != 0 && !(rc == -ENOENT && opts->no_sign)) {
        fprintf(stderr, "h5osfs: %s\n", rc == -ENOENT ? why : strerror(-rc));
        rc = -1;
        goto out;
    }
    struct store_s3_config cfg = {
        .bucket = *name,
        .prefix = prefix,
        .endpoint = opts->endpoint,
        .region = cred.region,
        .path_style = opts->path_style >= 0 ? opts->path_style
                                            : opts->endpoint != NULL || strchr(*name, '.') != NULL,
        .no_sign = opts->no_sign,
        .access_key_id = cred.access_key_id,
        .secret_access_key = cred.secret_access_key,
        .session_token = cred.session_token,
        .ca_file = opts->ca_file,
        .max_requests = opts->max_requests,
        .timeout = opts->timeout,
        .retries = opts->retries,
        .retry_time = opts->retry_time,
        .multipart_threshold = opts->multipart_threshold,
        .multipart_part_size = opts->multipart_part_size,
    };
    rc = store_s3_open(&cfg, store);
    if (rc != 0) {
        fprintf(stderr, "h5osfs: S3 bucket '%s': %s\n", opts->bucket, strerror(-rc));
        rc = -1;
    } else if ((rc = check_s3(opts, *store)) != 0) {
        store_close(*store);
        *store = NULL;
    }
out:
    credentials_free(&cred);
    free(prefix);
    return rc;
}

static int open_store(const struct options *opts, struct store **store, char **name)
{
    if (strncmp(opts->bucket, "s3://", 5) == 0)
        return open_s3(opts, store, name);
    *name = bucket_name(opts->bucket);
    int rc = *name ? store_posix_open(opts->bucket, store) : -ENOMEM;
    if (rc != 0) {
        fprintf(stderr, "h5osfs: bucket directory '%s': %s\n", opts->bucket, strerror(-rc));
        return -1;
    }
    return 0;
}

/* cache_dir/images, where built files are kept (made now), or NULL: none kept. */
static char *image_dir(const struct options *opts)
{
    char *dir = NULL;
    if (opts->image_cache == 0 || asprintf(&dir, "%s/images", opts->cache_dir) < 0)
        return NULL;
    int rc = make_dirs(dir);
    if (rc != 0) {
        log_warn("%s: cannot make it (%s): built files are not kept for the next mount", dir,
                 strerror(-rc));
        free(dir);
        return NULL;
    }
    return dir;
}

/* The collector asks: may root's objects go? Not while an open file reads them. */
static int root_in_use(void *ctx, const char *root)
{
    struct stack *s = ctx;
    return image_table_root_in_use(s->images, root) ||
           (s->staging && staging_root_in_use(s->staging, root)) ||
           (s->info && info_queue_has(s->info, root));
}

/* r+ starts from a version of the domain: its image (staging keeps its chunks in the store). */
static int staging_base(void *ctx, const char *path, const char *root, struct image **img)
{
    struct stack *s = ctx;
    int reused;
    int rc = image_table_get(s->images, path, root, img, &reused);
    if (rc != 0)
        log_error("%s: the version with root %s cannot be staged: %s", path, root, strerror(-rc));
    return rc;
}

/* A kept version's file size, built now (and kept in the image table for its first reads). */
static int measure_version(void *ctx, const char *path, const char *vroot, uint64_t *size,
                           char *stamp, size_t stamp_len)
{
    struct stack *s = ctx;
    struct image *img;
    int reused;
    char mine[IMAGE_STAMP_BUF];
    int rc = image_table_get(s->images, path, vroot, &img, &reused);
    if (rc != 0)
        return rc;
    *size = image_size(img);
    image_put(img);
    image_table_stamp(s->images, mine);
    snprintf(stamp, stamp_len, "%s", mine);
    return 0;
}

/* Do size bytes of fd equal the file img? 1, 0, or -errno. */
static int same_bytes(struct stack *s, struct image *img, int fd, uint64_t size)
{
    enum { BLOCK = 1 << 20 };
    struct image_reader reader = { .cache = s->cache };
    char *mine = malloc(BLOCK), *theirs = malloc(BLOCK);
    int rc = mine && theirs ? 1 : -ENOMEM;
    for (uint64_t off = 0; rc == 1 && off < size; off += BLOCK) {
        size_t want = size - off < BLOCK ? (size_t)(size - off) : BLOCK;
        ssize_t got = image_read(img, &reader, off, theirs, want);
        ssize_t have = got == (ssize_t)want ? pread(fd, mine, want, (off_t)off) : 0;
        if (got < 0 || have < 0)
            rc = got < 0 ? (int)got : -errno;
        else if ((size_t)got != want || (size_t)have != want || memcmp(mine, theirs, want) != 0)
            rc = 0;
    }
    free(mine);
    free(theirs);
    return rc;
}

/* restore.h: is the staged file at fd the file of the kept version path (root vroot)? Its
 * file is built (or found in the image table) and compared byte for byte. */
static int same_as_version(void *ctx, const char *path, const char *vroot, int fd, uint64_t size)
{
    struct stack *s = ctx;
    struct image *img;
    int reused;
    int rc = image_table_get(s->images, path, vroot, &img, &reused);
    if (rc != 0)
        return rc;
    rc = image_size(img) == size ? same_bytes(s, img, fd, size) : 0;
    image_put(img);
    return rc;
}

/* A commit made a new version of path: its ACL decides from now on, not who created it; the
 * next open builds the new version, and the next lookup must find it, not the kernel's cached
 * name of the old version's node. fs is NULL only once it is gone (stack_close). */
/* -o bucket_refs=on: the references of the domain at path, as committed, put beside it
 * (domops.h). A failure fails no commit: it is logged, and the next commit puts them again. */
static void put_bucket_refs(struct stack *s, const char *path)
{
    struct ns_info info;
    char key[STORE_KEY_MAX + 1], *text = NULL;
    size_t len = 0;
    if (!s->refs_view || !s->refs_base || domops_refs_key(path, key, sizeof key) != 0)
        return;
    ns_invalidate(s->ns, path);
    int rc = ns_stat(s->ns, path, &info);
    if (rc == 0 && info.kind != NS_DOMAIN)
        return; /* gone again already */
    if (rc == 0)
        rc = zarr_refs(s->refs_view, path, info.root, s->refs_base, &text, &len);
    if (rc == 0)
        rc = store_put(s->store, key, text, len);
    if (rc == 0)
        zarr_forget(s->refs_view, info.root); /* the next commit has another root */
    else
        log_error("%s: its references %s were not put in the bucket: %s", path, key, strerror(-rc));
    free(text);
}

static void committed(void *ctx, const char *path)
{
    struct stack *s = ctx;
    put_bucket_refs(s, path);
    callers_forget_creator(s->callers, path);
    image_table_expire(s->images, path);
    if (s->fs)
        fs_forget_name(s->fs, path);
}

/* A commit making a new domain asks domops who owns it: whoever created the file. */
static int creator_of(void *ctx, const char *path, char *buf, size_t len)
{
    return callers_creator(ctx, path, buf, len);
}

/* A test hook's number of seconds in place of a built-in one (tests that must not depend on
 * how soon a loaded machine gets to the next step): the environment's NAME, or fallback. */
static double test_seconds(const char *name, double fallback)
{
    const char *text = getenv(name);
    double seconds;
    if (!text || options_parse_seconds(text, &seconds) != 0)
        return fallback;
    log_warn("test hook %s=%s: in place of %g s", name, text, fallback);
    return seconds;
}

/* What every mount reads through: the namespace, the chunk cache, the image table, and who
 * each request acts as. 0 or -errno. */
static int open_reading(struct stack *s)
{
    const struct options *opts = s->opts;
    struct ns_config ns_cfg = { .user = opts->user,
                                .admin_user = opts->admin_user,
                                .ttl = opts->ttl,
                                .requests = requests_at_once(opts) };
    int rc = ns_new(s->store, &ns_cfg, &s->ns);
    if (rc != 0)
        return rc;
    s->cache = chunk_cache_new(opts->cache_size);
    if (!s->cache)
        return -ENOMEM;
    chunk_cache_set_retry_after(s->cache,
                                test_seconds("H5OSFS_TEST_CHUNK_RETRY_AFTER", CHUNK_RETRY_AFTER));
    s->image_dir = image_dir(opts);
    struct image_source src = { .store = s->store,
                                .bucket_name = s->bucket_name,
                                .requests = requests_at_once(opts),
                                .bucket_id = opts->bucket_id,
                                .image_dir = s->image_dir,
                                .image_dir_max = opts->image_cache,
                                .no_repairs = opts->no_repairs,
                                .bucket_images = opts->bucket_images,
                                .paged = opts->paged_images };
    rc = image_table_new(&src, opts->ttl, &s->images);
    if (rc != 0)
        return rc;
    struct callers_config callers_cfg = { getuid(), opts->user, opts->user_map };
    return callers_new(&callers_cfg, &s->callers);
}

/* The nearest folder above domain that says how new files below it are stored decides
 * (user.h5osfs.ingest, inherited by everything below, subfolders too, until one says
 * otherwise); none: the mount's -o ingest. */
static int link_for(void *ctx, const char *domain, int link)
{
    struct stack *s = ctx;
    char *dir = strdup(domain);
    for (char *slash = dir ? strrchr(dir, '/') : NULL; slash; slash = strrchr(dir, '/')) {
        struct ns_info info;
        slash[slash == dir ? 1 : 0] = '\0';
        if (ns_stat(s->ns, dir, &info) == 0 && info.kind == NS_FOLDER &&
            info.ingest != SCHEMA_INGEST_UNSET) {
            link = info.ingest == SCHEMA_INGEST_LINK;
            break;
        }
        if (slash == dir)
            break; /* "/" was the last */
    }
    free(dir);
    return link;
}

/* The nearest folder above domain with user.h5osfs.versions decides (inherited like
 * user.h5osfs.ingest), its keep:N too ("on" keeps all) and "ref" (on, the current domain its
 * head version; "on" and keep:N take the mount's -o versions_current); none: the mount's
 * -o versions, -o versions_keep and -o versions_current. ref may be NULL. */
static int versions_for(void *ctx, const char *domain, unsigned *keep, int *ref)
{
    struct stack *s = ctx;
    int on = s->opts->versions, is_ref = s->opts->versions_ref;
    *keep = s->opts->versions_keep;
    char *dir = strdup(domain);
    for (char *slash = dir ? strrchr(dir, '/') : NULL; slash; slash = strrchr(dir, '/')) {
        struct ns_info info;
        slash[slash == dir ? 1 : 0] = '\0';
        if (ns_stat(s->ns, dir, &info) == 0 && info.kind == NS_FOLDER &&
            info.versions.mode != SCHEMA_VERSIONS_UNSET) {
            on = info.versions.mode == SCHEMA_VERSIONS_ON;
            *keep = info.versions.keep;
            is_ref = info.versions.ref || (on && is_ref);
            break;
        }
        if (slash == dir)
            break; /* "/" was the last */
    }
    free(dir);
    if (ref)
        *ref = on && is_ref;
    return on;
}

/* A domain renamed onto path, which has kept versions of its own: root becomes path's next
 * version (doc/versions.md §4.7), as a commit replacing path would make it. */
static int keep_moved(void *ctx, const char *path, const char *root)
{
    struct stack *s = ctx;
    char vroot[SCHEMA_ID_BUF] = "";
    uint64_t n = 0;
    unsigned keep = 0;
    versions_for(s, path, &keep, NULL);
    struct versions_commit vc = { .store = s->store,
                                  .bucket_name = s->bucket_name,
                                  .domain = path,
                                  .root = root,
                                  .base_root = "", /* not a commit on path's root: no race */
                                  .user = s->opts->user,
                                  .workers = WRITE_WORKERS,
                                  .keep = keep,
                                  .measure = measure_version,
                                  .measure_ctx = s };
    int rc = versions_commit(&vc, &n, vroot);
    if (rc == 0)
        log_info("%s: the domain moved here is kept as its version %llu", path,
                 (unsigned long long)n);
    else if (vroot[0] && s->ops.gc && gc_add(s->ops.gc, vroot, path, "") != 0) /* not listed */
        log_warn("%s: version root %s, not listed, stays in the bucket", path, vroot);
    return rc == -EOPNOTSUPP ? 0 : rc;
}

/* A read-write mount's journal and staging area, in its cache_dir (claimed by main). The
 * collector is not made yet: ops.gc is set with it, before anything commits. 0 or -errno. */
static int open_writing(struct stack *s)
{
    s->ops = (struct domops){ .store = s->store,
                              .ns = s->ns,
                              .user = s->opts->user,
                              .admin_user = s->opts->admin_user,
                              .creator_of = creator_of,
                              .creator_ctx = s->callers,
                              .keep_moved = keep_moved,
                              .keep_ctx = s };
    if (s->opts->read_only)
        return 0;
    int rc = s->opts->bucket_refs
                 ? zarr_view_new(s->store, s->bucket_name, s->opts->ttl, &s->refs_view)
                 : 0;
    if (rc == 0)
        rc = journal_open(s->opts->cache_dir, s->opts->bucket_id, &s->journal);
    if (rc == 0)
        rc = info_queue_new(s->store, s->bucket_name, WRITE_WORKERS, &s->info);
    if (rc != 0)
        return rc;
    struct commit_ctx commit = { .ops = &s->ops,
                                 .journal = s->journal,
                                 .info = s->info,
                                 .workers = WRITE_WORKERS,
                                 .bucket_name = s->bucket_name,
                                 .link = s->opts->ingest_link,
                                 .link_for = link_for,
                                 .versions_for = versions_for,
                                 .measure_version = measure_version,
                                 .pool_fresh_for = s->opts->versions_grace / 2,
                                 .same_as_version = same_as_version,
                                 .link_ctx = s };
    struct staging_hooks hooks = {
        .base = staging_base, .cache = s->cache, .committed = committed, .ctx = s
    };
    return staging_new(&commit, &hooks, &s->staging);
}

/* The collector's records, in the journal (gc.h's gc_records). */
static int gc_record_write(void *ctx, const char *root, const char *domain, const char *replaced_by)
{
    return journal_gc_write(ctx, root, domain, replaced_by);
}

static void gc_record_remove(void *ctx, const char *root)
{
    journal_gc_remove(ctx, root);
}

/* The roots the journal says an earlier daemon of this bucket had queued, queued again. */
static void requeue_recorded_roots(struct stack *s)
{
    struct journal_gc_rec *recs;
    size_t n, queued = 0;
    if (!s->journal)
        return;
    if (journal_gc_list(s->journal, &recs, &n) != 0) {
        log_error("the journal cannot be read: replaced versions an earlier daemon had queued "
                  "for collection stay in the bucket");
        return;
    }
    for (size_t i = 0; i < n; i++)
        queued += gc_requeue(s->gc, recs[i].root, recs[i].domain) == 0;
    if (queued)
        log_info("gc: %zu roots an earlier daemon of this bucket had queued are queued again",
                 queued);
    journal_gc_recs_free(recs, n);
}

/* ---- the collection of removed versions (sweep.h) ---- */

static int sweep_record_write(void *ctx, const char *pool, const char *domain, double t0)
{
    return journal_pool_sweep_write(ctx, pool, domain, t0);
}

static void sweep_record_remove(void *ctx, const char *pool)
{
    journal_pool_sweep_remove(ctx, pool);
}

/* domops: a name was removed, or versions expired at a commit. */
static void versions_removed(void *ctx, const char *domain)
{
    struct stack *s = ctx;
    sweeper_request(s->sweeper, domain);
}

/* ns: a list read from the bucket has removing entries (another mount's, a killed daemon's). */
static void removing_seen(void *ctx, const char *domain)
{
    struct stack *s = ctx;
    sweeper_hint(s->sweeper, domain);
}

/* gc: a root is gone; a removed version's (its domain is "/DIR/.versions/NAME/<n>.h5") lets
 * the entry be dropped now. */
static void root_gone(void *ctx, const char *root, const char *domain)
{
    struct stack *s = ctx;
    char owner[STORE_KEY_MAX + 2];
    (void)root;
    if (domain && schema_is_versions_path(domain) == 1 &&
        schema_version_domain_of(domain, owner, sizeof owner) == 0)
        sweeper_request(s->sweeper, owner);
}

/* The sweeps an earlier daemon of this bucket recorded as owed, queued again. */
static void resume_recorded_sweeps(struct stack *s)
{
    struct journal_sweep_rec *recs;
    size_t n;
    if (!s->sweeper)
        return;
    if (journal_pool_sweep_list(s->journal, &recs, &n) != 0) {
        log_error("the journal cannot be read: pool sweeps an earlier daemon owed are not run");
        return;
    }
    for (size_t i = 0; i < n; i++)
        sweeper_resume(s->sweeper, recs[i].domain, recs[i].pool);
    if (n)
        log_info("%zu pool sweeps an earlier daemon of this bucket owed are run again", n);
    journal_sweep_recs_free(recs, n);
}

/* A read-write mount collects removed versions; after the collector, which it feeds. */
static int open_sweeper(struct stack *s)
{
    if (!s->journal)
        return 0;
    struct sweeper_config cfg = { .store = s->store,
                                  .gc = s->gc,
                                  .grace = s->opts->versions_grace,
                                  .interval = s->opts->versions_sweep_interval,
                                  .records = { sweep_record_write, sweep_record_remove,
                                               s->journal } };
    int rc = sweeper_new(&cfg, &s->sweeper);
    if (rc != 0)
        return rc;
    s->ops.versions_removed = versions_removed;
    s->ops.versions_ctx = s;
    gc_on_gone(s->gc, root_gone, s);
    ns_on_removing(s->ns, removing_seen, s);
    return 0;
}

/* The collector asks the image table and staging which roots are in use: made after both,
 * and so taken down before them. Its queue is journaled in a read-write mount's cache_dir
 * (a read-only mount queues nothing). 0 or -errno. */
static int open_gc(struct stack *s)
{
    int rc =
        gc_new(s->store, test_seconds("H5OSFS_TEST_GC_GRACE", GC_GRACE), root_in_use, s, &s->gc);
    if (rc != 0)
        return rc;
    if (s->journal) {
        struct gc_records records = { gc_record_write, gc_record_remove, s->journal };
        gc_use_records(s->gc, &records);
    }
    s->ops.gc = s->gc;
    return 0;
}

/* What references in MOUNT/.kerchunk append chunk keys to: -o refs_url, else the bucket's own
 * URL (s3://bucket/prefix/, file:///real/dir/). NULL when memory runs out. */
static char *refs_base(const struct options *opts)
{
    const char *base = opts->refs_url                           ? opts->refs_url
                       : strncmp(opts->bucket, "s3://", 5) == 0 ? opts->bucket
                                                                : opts->bucket_id;
    const char *scheme = opts->refs_url || base == opts->bucket ? "" : "file://";
    size_t n = strlen(base);
    char *out = NULL;
    if (asprintf(&out, "%s%s%s", scheme, base, n && base[n - 1] == '/' ? "" : "/") < 0)
        return NULL;
    return out;
}

static int open_fs(struct stack *s)
{
    const struct options *opts = s->opts;
    if (!(s->refs_base = refs_base(opts)))
        return -ENOMEM;
    struct fs_config cfg = { .ns = s->ns,
                             .store = s->store,
                             .bucket_name = s->bucket_name,
                             .images = s->images,
                             .cache = s->cache,
                             .callers = s->callers,
                             .ops = &s->ops,
                             .staging = s->staging,
                             .ttl = opts->ttl,
                             .read_only = opts->read_only,
                             .uid = getuid(),
                             .gid = getgid(),
                             .user = opts->user,
                             .cache_dir = opts->cache_dir,
                             .refs_base = s->refs_base,
                             .read_ahead = opts->read_ahead };
    return fs_new(&cfg, &s->fs);
}

int stack_open(const struct options *opts, struct stack **out)
{
    struct stack *s = calloc(1, sizeof *s);
    if (!s) {
        fprintf(stderr, "h5osfs: out of memory\n");
        return -1;
    }
    s->opts = opts;
    if (open_store(opts, &s->store, &s->bucket_name) != 0) {
        stack_close(s, NULL); /* open_store said why */
        return -1;
    }
    int rc = open_reading(s);
    if (rc == 0)
        rc = open_writing(s);
    if (rc == 0)
        rc = open_gc(s);
    if (rc == 0)
        rc = open_sweeper(s);
    if (rc == 0)
        rc = open_fs(s);
    if (rc != 0) {
        fprintf(stderr, "h5osfs: %s\n", strerror(-rc));
        stack_close(s, NULL);
        return -1;
    }
    *out = s;
    return 0;
}

void stack_start(struct stack *s, struct fuse_session *se)
{
    if (prefetcher_new(s->cache, requests_at_once(s->opts), PREFETCH_QUEUE, &s->prefetch) != 0) {
        log_warn("no read-ahead threads: chunks are fetched when read");
        s->prefetch = NULL;
    }
    fs_start_threads(s->fs, se, s->prefetch);
    requeue_recorded_roots(s); /* what a killed daemon had queued; its grace starts again */
    if (s->staging) {
        size_t left = staging_recover(s->staging);
        if (left)
            log_warn("%zu staged files could not be committed yet: kept for the next mount", left);
    }
    if (gc_start(s->gc) != 0)
        log_warn("no collector thread: deleted domains' objects stay in the bucket");
    resume_recorded_sweeps(s);
    if (s->sweeper && sweeper_start(s->sweeper) != 0)
        log_warn("no sweeper thread: removed versions stay in the bucket");
}

void stack_stop(struct stack *s)
{
    fs_stop_threads(s->fs);
}

/* The reverse of stack_open; each part may be missing (a stack_open that failed half-way).
 * The prefetcher, made last (after the fork), goes where it sits in the layers: after the
 * image table, whose open files' readers queue loads on it. */
void stack_close(struct stack *s, const volatile sig_atomic_t *give_up)
{
    if (!s)
        return;
    fs_free(s->fs); /* its handles whose release never came commit now */
    s->fs = NULL;
    info_queue_drain(s->info, give_up); /* before the collector: no root it waits for */
    sweeper_settle(s->sweeper);         /* removed versions' roots queued before the drain */
    if (s->gc)
        gc_drain_until(s->gc, give_up); /* unmounted: no reader is left to wait for */
    if (s->gc)
        gc_on_gone(s->gc, NULL, NULL); /* the sweeper goes first: it queues roots */
    sweeper_free(s->sweeper);          /* finishes removals, stops its sweep */
    gc_free(s->gc);
    staging_free(s->staging);
    zarr_view_free(s->refs_view); /* after the last commit */
    info_queue_free(s->info);
    journal_close(s->journal);
    callers_free(s->callers);
    image_table_free(s->images);
    prefetcher_free(s->prefetch);
    free(s->image_dir);
    free(s->refs_base);
    chunk_cache_free(s->cache);
    ns_free(s->ns);
    store_close(s->store);
    free(s->bucket_name);
    free(s);
}

struct fs *stack_fs(struct stack *s)
{
    return s->fs;
}

struct chunk_cache *stack_cache(struct stack *s)
{
    return s->cache;
}
