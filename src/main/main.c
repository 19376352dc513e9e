/*
 * main: h5osfs [options] BUCKET MOUNTPOINT.
 *
 * Everything that can be wrong with the command line is found and reported in one line, with
 * exit status 1, before anything is mounted. Then the stack (stack.h: the store up to fs) and
 * the FUSE session are built, the filesystem is mounted and served by libfuse's
 * multi-threaded loop until unmounted or signalled.
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

#include "h5osfs/cache/cache.h"
#include "h5osfs/fs/fs.h"
#include "h5osfs/commit/journal.h"
#include "h5osfs/schema/hjson.h"
#include "h5osfs/util/log.h"
#include "options.h"
#include "stack.h"

static int check_bucket(const char *bucket)
{
    struct stat st;
    if (strncmp(bucket, "s3://", 5) == 0)
        return 0; /* checked when the store is opened */
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
    log_msg(level <= FUSE_LOG_ERR       ? LOG_LVL_ERROR
            : level == FUSE_LOG_WARNING ? LOG_LVL_WARN
            : level <= FUSE_LOG_INFO    ? LOG_LVL_INFO
                                        : LOG_LVL_DEBUG,
            "%s", pending);
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
        fprintf(stderr,
                "h5osfs: cache_dir '%s' is in use by another h5osfs%s: a read-write "
                "mount needs a cache_dir of its own (-o cache_dir=DIR) or -o ro\n",
                opts->cache_dir, pid);
    else
        fprintf(stderr, "h5osfs: cache_dir '%s': %s\n", opts->cache_dir, strerror(-rc));
    return -1;
}

static int setup_logging(const struct options *opts, const struct fuse_cmdline_opts *cmd)
{
    enum log_level level = cmd->debug ? LOG_LVL_DEBUG : LOG_LVL_INFO;
    enum log_sink sink = opts->log_file    ? LOG_SINK_FILE
                         : cmd->foreground ? LOG_SINK_STDERR
                                           : LOG_SINK_SYSLOG;
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
 * How the loop's end counts. A stop signal ends it with the mount live (unmounted next): a
 * clean exit. Otherwise the kernel ended the connection: an unmount, or an abort that left the
 * mount in place, dead (libfuse cannot tell the two apart, and reads ENODEV for both). A
 * worker's read of /dev/fuse that races the kernel's teardown at an unmount fails with
 * ECONNABORTED instead (the kernel ends the request it was copying as aborted; seen under
 * load), and libfuse ends its loop with that error. So the mount table decides: the unmount
 * happened when this mount is gone from it. 0 or -1.
 */
static int loop_end(int rc, struct fs *fs, const char *mountpoint)
{
    if (rc > 0)
        return 0; /* the number of the signal that ended it */
    if (rc < 0 && rc != -ECONNABORTED)
        return -1;
    if (fs_still_mounted(fs, mountpoint)) {
        log_error("%s: the kernel aborted the connection while mounted; the mount point stays "
                  "unusable until fusermount3 -u removes it",
                  mountpoint);
        return -1;
    }
    if (rc < 0)
        log_info("%s: the connection ended as aborted while the kernel unmounted it", mountpoint);
    return 0;
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
    if (!o->fsname_given &&
        (asprintf(&name, "fsname=%s", o->bucket) < 0 || fuse_opt_add_opt_escaped(&opts, name) != 0))
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

/* Set by a stop signal that arrives after libfuse's handlers are gone (the unmount is done and
 * the daemon is deleting objects it no longer needs). Written only by the handler, read by
 * gc_drain_until: a sig_atomic_t is what a handler may set, no lock can be taken there. */
static volatile sig_atomic_t stop_asked;

static void ask_stop(int sig)
{
    (void)sig;
    stop_asked = 1;
}

/* Without this a SIGTERM during that work (systemd's stop) would kill the daemon by default
 * action: exit status -15, no log line, the deletion cut anywhere. */
static void catch_stop_signals(void)
{
    static const int sigs[] = { SIGTERM, SIGINT, SIGHUP };
    struct sigaction sa = { .sa_handler = ask_stop };
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
        if (sigaction(sigs[i], &sa, NULL) != 0)
            log_warn("cannot catch signal %d: %s", sigs[i], strerror(errno));
}

/* Mount and serve until unmounted; 0 or -1 (reported). */
static int serve(struct fuse_args *args, const struct options *opts,
                 const struct fuse_cmdline_opts *cmd, struct stack *stack, int cache_lock)
{
    struct fs *fs = stack_fs(stack);
    int rc = -1;
    struct fuse_session *se = fuse_session_new(args, fs_operations(), sizeof *fs_operations(), fs);
    if (!se)
        return -1; /* libfuse printed why (an unknown option, typically) */
    if (fuse_set_signal_handlers(se) != 0)
        goto out_destroy;
    if (fuse_session_mount(se, cmd->mountpoint) != 0)
        goto out_signals;
    fs_mounted(fs, cmd->mountpoint);
    /* the default cache_dir's name is the bucket's: say where it is */
    log_info("mounted %s on %s (user %s, %s%s)", opts->bucket, cmd->mountpoint, opts->user,
             opts->read_only ? "read-only" : "cache_dir ", opts->read_only ? "" : opts->cache_dir);
    if (fuse_daemonize(cmd->foreground) != 0)
        goto out_unmount;
    /* the lock went with its descriptor into the child; the pid it names did not */
    if (cache_lock >= 0 && journal_lock_set_owner(cache_lock) != 0)
        log_warn("%s/lock: cannot write the daemon's pid into it", opts->cache_dir);
    /* threads only now: fuse_daemonize forks, and a fork keeps none of them */
    struct stats_signal ss = { .fs = fs };
    int stats_signal = start_stats_signal(&ss);
    stack_start(stack, se);
    rc = loop_end(run_loop(se, cmd), fs, cmd->mountpoint);
    stack_stop(stack);
    if (stats_signal == 0)
        stop_stats_signal(&ss);
    struct chunk_cache_stats cs;
    chunk_cache_stats(stack_cache(stack), &cs);
    log_info("unmounted %s; chunk cache: %" PRIu64 " hits, %" PRIu64 " loads, %" PRIu64
             " waits for a load, %" PRIu64 " evictions",
             cmd->mountpoint, cs.hits, cs.misses, cs.waits, cs.evictions);
out_unmount:
    fuse_session_unmount(se);
out_signals:
    /* ours before libfuse's go: it resets only handlers still its own, so no stop signal
     * between here and stack_close meets the default action (death, no log line) */
    catch_stop_signals();
    fuse_remove_signal_handlers(se);
out_destroy:
    fuse_session_destroy(se);
    return rc;
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
    static const H5Z_filter_t ids[] = { 307,   32000, 32001, 32004, 32008, 32013,
                                        32015, 32017, 32018, 32019, 32026 };
#if defined(__SSE2__)
    unsigned csr = _mm_getcsr();
#endif
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        (void)H5Zfilter_avail(ids[i]); /* absent plugins are simply not there */
#if defined(__SSE2__)
    if (_mm_getcsr() != csr)
        log_debug("a filter plugin changed the floating-point mode; restored");
    _mm_setcsr(csr);
#endif
}

static int mount_bucket(struct fuse_args *args, const struct options *opts,
                        const struct fuse_cmdline_opts *cmd, int cache_lock)
{
    struct stack *stack = NULL;
    if (stack_open(opts, &stack) != 0)
        return -1;
    int rc = serve(args, opts, cmd, stack, cache_lock);
    catch_stop_signals();
    stack_close(stack, &stop_asked);
    if (stop_asked)
        log_info("stopped by a signal while finishing; exiting");
    return rc;
}

int main(int argc, char *argv[])
{
    struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
    struct fuse_cmdline_opts cmd = { 0 };
    struct options opts = { 0 };
    int status = 1, cache_lock = -1;

    hjson_setup_alloc(); /* before any thread: jansson's running out is told from bad JSON */
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
        check_bucket(opts.bucket) != 0 || check_mountpoint(cmd.mountpoint) != 0 ||
        claim_cache_dir(&opts, &cache_lock) != 0 || setup_logging(&opts, &cmd) != 0)
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
