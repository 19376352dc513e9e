/*
 * main: h5osfs [options] BUCKET MOUNTPOINT.
 *
 * Everything that can be wrong with the command line is found and reported in one line, with
 * exit status 1, before anything is mounted. Then the store, the namespace and the FUSE
 * session are built, the filesystem is mounted and served by libfuse's multi-threaded loop
 * until unmounted or signalled.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fuse_lowlevel.h>
#include <hdf5.h>
#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

#include "h5osfs/cache.h"
#include "h5osfs/dirs.h"
#include "h5osfs/prefetch.h"
#include "h5osfs/fs.h"
#include "h5osfs/journal.h"
#include "h5osfs/log.h"
#include "h5osfs/ns.h"
#include "h5osfs/store.h"
#include "credentials.h"
#include "options.h"

#define READ_AHEAD_KIB 8192
#define CHUNK_RETRY_AFTER 1.0   /* seconds a chunk that failed to load fails without a retry */
#define GC_GRACE 30.0           /* seconds a deleted domain's objects stay for open readers */
#define WRITE_WORKERS 4          /* chunk objects a commit encodes and puts at once */
#define PREFETCH_WORKERS 4
#define PREFETCH_QUEUE 256

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

static int check_bucket(const char *bucket)
{
    struct stat st;
    if (strncmp(bucket, "s3://", 5) == 0)
        return 0;               /* checked when the store is opened */
    if (stat(bucket, &st) != 0) {
        fprintf(stderr, "h5osfs: bucket directory '%s': %s\n", bucket, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        fprintf(stderr, "h5osfs: bucket '%s' is not a directory\n", bucket);
        return -1;
    }
    return 0;
}

/* The mountpoint must be an existing, empty directory: mounting over files hides them. */
static int check_mountpoint(const char *mnt)
{
    DIR *d = opendir(mnt);
    if (!d) {
        fprintf(stderr, "h5osfs: mountpoint '%s': %s\n", mnt, strerror(errno));
        return -1;
    }
    struct dirent *e;
    int empty = 1;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            empty = 0;
    closedir(d);
    if (!empty) {
        fprintf(stderr, "h5osfs: mountpoint '%s' is not empty\n", mnt);
        return -1;
    }
    return 0;
}

/* libfuse's own lines (with -d, one per request) go where ours go. It writes some lines in
 * pieces ("unknown option(s): `", "-o ", ...): they are joined until the newline. */
static void log_from_fuse(enum fuse_log_level level, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
static void log_from_fuse(enum fuse_log_level level, const char *fmt, va_list ap)
{
    static __thread char pending[1024];
    size_t used = strlen(pending);
    vsnprintf(pending + used, sizeof pending - used, fmt, ap);
    size_t len = strlen(pending);
    if (len > 0 && pending[len - 1] != '\n' && len + 1 < sizeof pending)
        return;
    log_msg(level <= FUSE_LOG_ERR ? LOG_LVL_ERROR : level == FUSE_LOG_WARNING ? LOG_LVL_WARN
            : level <= FUSE_LOG_INFO ? LOG_LVL_INFO : LOG_LVL_DEBUG, "%s", pending);
    pending[0] = '\0';
}

/*
 * A read-write mount's cache_dir (its staging area and journal) is its own: a second daemon's
 * recovery would commit the first one's open files. So it is claimed before anything is
 * recovered from it and held until the daemon exits (*lock_fd, -1 when nothing is held). A
 * read-only mount never uses it: it takes no lock and is never refused.
 */
static int claim_cache_dir(const struct options *opts, int *lock_fd)
{
    long holder = 0;
    char pid[32] = "";
    *lock_fd = -1;
    if (opts->read_only)
        return 0;
    int rc = journal_lock(opts->cache_dir, lock_fd, &holder);
    if (rc == 0)
        return 0;
    if (holder > 0)
        snprintf(pid, sizeof pid, " (pid %ld)", holder);
    if (rc == -EBUSY)
        fprintf(stderr, "h5osfs: cache_dir '%s' is in use by another h5osfs%s: a read-write "
                "mount needs a cache_dir of its own (-o cache_dir=DIR) or -o ro\n",
                opts->cache_dir, pid);
    else
        fprintf(stderr, "h5osfs: cache_dir '%s': %s\n", opts->cache_dir, strerror(-rc));
    return -1;
}

static int setup_logging(const struct options *opts, const struct fuse_cmdline_opts *cmd)
{
    enum log_level level = cmd->debug ? LOG_LVL_DEBUG : LOG_LVL_INFO;
    enum log_sink sink = opts->log_file ? LOG_SINK_FILE
                         : cmd->foreground ? LOG_SINK_STDERR : LOG_SINK_SYSLOG;
    int rc = log_setup(level, sink, opts->log_file);
    if (rc == 0)
        fuse_set_log_func(log_from_fuse);
    if (rc != 0)
        fprintf(stderr, "h5osfs: log file '%s': %s\n", opts->log_file, strerror(-rc));
    return rc;
}

static int run_loop(struct fuse_session *se, const struct fuse_cmdline_opts *cmd)
{
    if (cmd->singlethread)
        return fuse_session_loop(se);
    struct fuse_loop_config *cfg = fuse_loop_cfg_create();
    if (!cfg)
        return -ENOMEM;
    fuse_loop_cfg_set_clone_fd(cfg, (unsigned)cmd->clone_fd);
    fuse_loop_cfg_set_max_threads(cfg, cmd->max_threads);
    if (cmd->max_idle_threads != UINT_MAX)
        fuse_loop_cfg_set_idle_threads(cfg, cmd->max_idle_threads);
    int rc = fuse_session_loop_mt(se, cfg);
    fuse_loop_cfg_destroy(cfg);
    return rc;
}

/*
 * The kernel reads ahead only 128 KiB on a FUSE mount unless its bdi says more, and FUSE's INIT
 * can only lower that. A sequential reader of 1-4 MiB chunks wants several chunks requested at
 * once, so raise it (root only; others keep the default, and the prefetcher still works).
 */
static void raise_read_ahead(const char *mountpoint, unsigned kib)
{
    char *real = realpath(mountpoint, NULL), line[4096], path[128];
    FILE *f = real ? fopen("/proc/self/mountinfo", "r") : NULL;
    unsigned major = 0, minor = 0;
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f)) {
        char point[4096];
        found = sscanf(line, "%*s %*s %u:%u %*s %4095s", &major, &minor, point) == 3 &&
                strcmp(point, real) == 0;
    }
    if (f)
        fclose(f);
    free(real);
    snprintf(path, sizeof path, "/sys/class/bdi/%u:%u/read_ahead_kb", major, minor);
    FILE *ra = found ? fopen(path, "w") : NULL;
    if (!ra || fprintf(ra, "%u\n", kib) < 0)
        log_debug("read-ahead of %s stays at the kernel's default (%s)", mountpoint, path);
    if (ra)
        fclose(ra);
}

/* An object store answers many requests at once; a local disk gains little past a few. */
static unsigned requests_at_once(const struct options *opts)
{
    return strncmp(opts->bucket, "s3://", 5) == 0 ? opts->max_requests : PREFETCH_WORKERS;
}

/*
 * SIGUSR1 writes the statistics (the mount's /.h5osfs-stats) to the log as one line. One
 * thread waits for it with sigwait; every other thread has it blocked, since they inherit
 * the mask of the main thread, which blocks it before it starts any.
 */
struct stats_signal {
    struct fs *fs;
    pthread_t thread;
    atomic_int stop;
};

static void *wait_for_stats_signal(void *arg)
{
    struct stats_signal *ss = arg;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    for (;;) {
        int sig;
        if (sigwait(&set, &sig) != 0)
            continue;
        if (atomic_load(&ss->stop))
            return NULL;
        char *text = NULL;
        if (fs_stats_text(ss->fs, 0, &text) == 0) {
            text[strcspn(text, "\n")] = '\0';
            log_info("statistics: %s", text);
        }
        free(text);
    }
}

/* 0 with the thread started, or -1 (logged: SIGUSR1 then keeps its default, which ends the
 * daemon, so it is ignored instead). */
static int start_stats_signal(struct stats_signal *ss)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    atomic_init(&ss->stop, 0);
    if (pthread_sigmask(SIG_BLOCK, &set, NULL) == 0 &&
        pthread_create(&ss->thread, NULL, wait_for_stats_signal, ss) == 0)
        return 0;
    log_warn("SIGUSR1 is ignored: no thread to write the statistics to the log");
    signal(SIGUSR1, SIG_IGN);
    return -1;
}

static void stop_stats_signal(struct stats_signal *ss)
{
    atomic_store(&ss->stop, 1);
    pthread_kill(ss->thread, SIGUSR1);
    pthread_join(ss->thread, NULL);
}

/* The kernel's name for the mount (df, findmnt, /proc/mounts): the bucket as given, type
 * fuse.h5osfs, unless the command line names them. libfuse would say "h5osfs" and "fuse". */
static int name_the_mount(struct fuse_args *args, const struct options *o)
{
    char *opts = NULL, *name = NULL;
    int rc = 0;
    if (!o->fsname_given && (asprintf(&name, "fsname=%s", o->bucket) < 0 ||
                             fuse_opt_add_opt_escaped(&opts, name) != 0))
        rc = -1;
    if (rc == 0 && !o->subtype_given && fuse_opt_add_opt(&opts, "subtype=h5osfs") != 0)
        rc = -1;
    if (rc == 0 && opts && (fuse_opt_add_arg(args, "-o") != 0 || fuse_opt_add_arg(args, opts) != 0))
        rc = -1;
    if (rc != 0)
        fprintf(stderr, "h5osfs: out of memory\n");
    free(name);
    free(opts);
    return rc;
}

/* Mount and serve until unmounted; 0 or -1 (reported). */
static int serve(struct fuse_args *args, const struct options *opts,
                 const struct fuse_cmdline_opts *cmd, struct fs *fs, struct chunk_cache *cache,
                 struct prefetcher **prefetch, int cache_lock)
{
    int rc = -1;
    struct fuse_session *se = fuse_session_new(args, fs_operations(), sizeof *fs_operations(), fs);
    if (!se)
        return -1;              /* libfuse printed why (an unknown option, typically) */
    if (fuse_set_signal_handlers(se) != 0)
        goto out_destroy;
    if (fuse_session_mount(se, cmd->mountpoint) != 0)
        goto out_signals;
    /* the default cache_dir's name is the bucket's: say where it is */
    log_info("mounted %s on %s (user %s, %s%s)", opts->bucket, cmd->mountpoint, opts->user,
             opts->read_only ? "read-only" : "cache_dir ",
             opts->read_only ? "" : opts->cache_dir);
    raise_read_ahead(cmd->mountpoint, READ_AHEAD_KIB);
    if (fuse_daemonize(cmd->foreground) != 0)
        goto out_unmount;
    /* the lock went with its descriptor into the child; the pid it names did not */
    if (cache_lock >= 0 && journal_lock_set_owner(cache_lock) != 0)
        log_warn("%s/lock: cannot write the daemon's pid into it", opts->cache_dir);
    /* threads only now: fuse_daemonize forks, and a fork keeps none of them */
    struct stats_signal ss = { .fs = fs };
    int stats_signal = start_stats_signal(&ss);
    unsigned workers = requests_at_once(opts);
    if (prefetcher_new(cache, workers, PREFETCH_QUEUE, prefetch) != 0) {
        log_warn("no read-ahead threads: chunks are fetched when read");
        *prefetch = NULL;
    }
    fs_start_threads(fs, se, *prefetch);
    /* libfuse returns the signal number when SIGINT/SIGTERM/SIGHUP ended the loop: a clean exit */
    rc = run_loop(se, cmd) >= 0 ? 0 : -1;
    fs_stop_threads(fs);
    if (stats_signal == 0)
        stop_stats_signal(&ss);
    struct chunk_cache_stats cs;
    chunk_cache_stats(cache, &cs);
    log_info("unmounted %s; chunk cache: %" PRIu64 " hits, %" PRIu64 " loads, %" PRIu64
             " waits for a load, %" PRIu64 " evictions", cmd->mountpoint, cs.hits, cs.misses,
             cs.waits, cs.evictions);
out_unmount:
    fuse_session_unmount(se);
out_signals:
    fuse_remove_signal_handlers(se);
out_destroy:
    fuse_session_destroy(se);
    return rc;
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
        .bucket = *name, .prefix = prefix, .endpoint = opts->endpoint, .region = cred.region,
        .path_style = opts->path_style >= 0 ? opts->path_style
                      : opts->endpoint != NULL || strchr(*name, '.') != NULL,
        .no_sign = opts->no_sign, .access_key_id = cred.access_key_id,
        .secret_access_key = cred.secret_access_key, .session_token = cred.session_token,
        .ca_file = opts->ca_file, .max_requests = opts->max_requests, .timeout = opts->timeout,
        .retries = opts->retries, .retry_time = opts->retry_time,
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

/*
 * HDF5 loads a filter plugin when a file first needs it, in whichever thread reads that file.
 * Debian's plugins (bitshuffle's libh5bshuf.so, libh5LZF.so) are built with -ffast-math: their
 * constructors switch the loading thread to flush-to-zero and denormals-are-zero for good, and
 * a FUSE worker so switched would turn subnormal numbers into 0 in every later conversion. So
 * every plugin HDF5 can find for a known filter is loaded here, in the main thread before any
 * other thread exists (a loaded plugin stays loaded: its constructor never runs again), and
 * the main thread's floating-point mode is put back; the threads started later inherit it.
 */
static void preload_filter_plugins(void)
{
    static const H5Z_filter_t ids[] = { 307, 32000, 32001, 32004, 32008, 32013, 32015, 32017,
                                        32018, 32019, 32026 };
#if defined(__SSE2__)
    unsigned csr = _mm_getcsr();
#endif
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        (void)H5Zfilter_avail(ids[i]);      /* absent plugins are simply not there */
#if defined(__SSE2__)
    if (_mm_getcsr() != csr)
        log_debug("a filter plugin changed the floating-point mode; restored");
    _mm_setcsr(csr);
#endif
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

static int mount_bucket(struct fuse_args *args, const struct options *opts,
                        const struct fuse_cmdline_opts *cmd, int cache_lock)
{
    struct store *store = NULL;
    struct ns *ns = NULL;
    struct fs *fs = NULL;
    struct chunk_cache *cache = NULL;
    struct prefetcher *prefetch = NULL;     /* made by serve, after the fork */
    char *name = NULL, *images = NULL;
    int rc = open_store(opts, &store, &name);
    if (rc != 0) {
        free(name);
        return -1;
    }
    struct ns_config ns_cfg = { .user = opts->user, .admin_user = opts->admin_user,
                                .ttl = opts->ttl, .requests = requests_at_once(opts) };
    rc = ns_new(store, &ns_cfg, &ns);
    if (rc != 0)
        goto out_store;
    cache = chunk_cache_new(opts->cache_size);
    images = image_dir(opts);
    if (!cache) {
        rc = -ENOMEM;
        goto out_ns;
    }
    chunk_cache_set_retry_after(cache, CHUNK_RETRY_AFTER);
    struct fs_config fs_cfg = { .ns = ns, .ttl = opts->ttl, .read_only = opts->read_only,
                                .uid = getuid(), .gid = getgid(), .cache = cache,
                                .user = opts->user, .admin_user = opts->admin_user,
                                .user_map = opts->user_map, .gc_grace = GC_GRACE,
                                .cache_dir = opts->cache_dir, .bucket_id = opts->bucket_id,
                                .write_workers = WRITE_WORKERS,
                                .ingest_link = opts->ingest_link,
                                .images = { .store = store, .bucket_name = name,
                                            .requests = requests_at_once(opts),
                                            .bucket_id = opts->bucket_id, .image_dir = images,
                                            .image_dir_max = opts->image_cache,
                                            .no_repairs = opts->no_repairs,
                                            .bucket_images = opts->bucket_images } };
    rc = fs_new(&fs_cfg, &fs);
    if (rc != 0)
        goto out_cache;
    rc = serve(args, opts, cmd, fs, cache, &prefetch, cache_lock);
    fs_free(fs);
    prefetcher_free(prefetch);
out_cache:
    chunk_cache_free(cache);
out_ns:
    ns_free(ns);
out_store:
    store_close(store);
    free(name);
    free(images);
    if (rc != 0 && rc != -1)
        fprintf(stderr, "h5osfs: %s\n", strerror(-rc));
    return rc == 0 ? 0 : -1;
}

int main(int argc, char *argv[])
{
    struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
    struct fuse_cmdline_opts cmd = { 0 };
    struct options opts = { 0 };
    int status = 1, cache_lock = -1;

    if (options_parse(&args, &opts) != 0 || fuse_parse_cmdline(&args, &cmd) != 0)
        goto out;
    if (cmd.show_help) {
        options_usage(argv[0]);
        printf("FUSE options:\n");
        fuse_cmdline_help();
        fuse_lowlevel_help();
        status = 0;
        goto out;
    }
    if (cmd.show_version) {
        printf("h5osfs %s\n", H5OSFS_VERSION);
        fuse_lowlevel_version();
        status = 0;
        goto out;
    }
    if (!opts.bucket || !cmd.mountpoint) {
        fprintf(stderr, "h5osfs: missing %s (usage: h5osfs [options] BUCKET MOUNTPOINT)\n",
                opts.bucket ? "MOUNTPOINT" : "BUCKET");
        goto out;
    }
    if (options_finish(&opts) != 0 || name_the_mount(&args, &opts) != 0 ||
        check_bucket(opts.bucket) != 0 ||
        check_mountpoint(cmd.mountpoint) != 0 || claim_cache_dir(&opts, &cache_lock) != 0 ||
        setup_logging(&opts, &cmd) != 0)
        goto out;
    preload_filter_plugins();
    status = mount_bucket(&args, &opts, &cmd, cache_lock) == 0 ? 0 : 1;
    log_teardown();
out:
    if (cache_lock >= 0)
        close(cache_lock);
    free(cmd.mountpoint);
    options_free(&opts);
    fuse_opt_free_args(&args);
    return status;
}
