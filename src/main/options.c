/* options: see options.h. */
#include "options.h"

#include <errno.h>
#include <math.h>
#include <pwd.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fuse_opt.h>

enum option_key {
    KEY_RO,
    KEY_USER,
    KEY_ADMIN_USER,
    KEY_TTL,
    KEY_CACHE_DIR,
    KEY_CACHE_SIZE,
    KEY_LOG_FILE,
};

static const struct fuse_opt option_spec[] = {
    FUSE_OPT_KEY("ro", KEY_RO),
    FUSE_OPT_KEY("user=", KEY_USER),
    FUSE_OPT_KEY("admin_user=", KEY_ADMIN_USER),
    FUSE_OPT_KEY("ttl=", KEY_TTL),
    FUSE_OPT_KEY("cache_dir=", KEY_CACHE_DIR),
    FUSE_OPT_KEY("cache_size=", KEY_CACHE_SIZE),
    FUSE_OPT_KEY("log_file=", KEY_LOG_FILE),
    FUSE_OPT_END,
};

void options_usage(const char *prog)
{
    printf("usage: %s [options] BUCKET MOUNTPOINT\n"
           "\n"
           "Mount an HSDS bucket (a local directory) so that every domain is an HDF5 file.\n"
           "\n"
           "h5osfs options:\n"
           "    -f                     stay in the foreground, log to stderr\n"
           "    -d                     debug log (implies -f)\n"
           "    -o ro                  read-only mount\n"
           "    -o user=NAME           HSDS user name for ACL checks (default: your user name)\n"
           "    -o admin_user=NAME     HSDS admin user name (default: admin)\n"
           "    -o ttl=SECONDS         how long listings and domain JSON are trusted (default: %g)\n"
           "    -o cache_dir=PATH      staging and cache directory (default: ~/.cache/h5osfs)\n"
           "    -o cache_size=BYTES    chunk cache size, K/M/G suffixes (default: 1G)\n"
           "    -o log_file=PATH       log here instead of syslog when in the background\n"
           "    -h, --help             this help\n"
           "    -V, --version          version\n"
           "\n",
           prog, OPTIONS_DEFAULT_TTL);
}

/* Replace *slot with a copy of text; fuse_opt keeps no ownership. */
static int set_string(char **slot, const char *text)
{
    char *copy = strdup(text);
    if (!copy)
        return -1;
    free(*slot);
    *slot = copy;
    return 0;                   /* consumed: libfuse never sees our options */
}

/* Our -o options arrive as "name=value"; keep the value. */
static int set_value(char **slot, const char *arg)
{
    return set_string(slot, strchr(arg, '=') + 1);
}

static int option_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
    (void)outargs;
    struct options *opts = data;
    switch (key) {
    case FUSE_OPT_KEY_NONOPT:
        if (opts->bucket)
            return 1;           /* the mountpoint, for fuse_parse_cmdline */
        return set_string(&opts->bucket, arg);
    case KEY_RO:
        opts->read_only = 1;
        return 1;               /* also a kernel mount option */
    case KEY_USER:
        return set_value(&opts->user, arg);
    case KEY_ADMIN_USER:
        return set_value(&opts->admin_user, arg);
    case KEY_TTL:
        return set_value(&opts->ttl_text, arg);
    case KEY_CACHE_DIR:
        return set_value(&opts->cache_dir, arg);
    case KEY_CACHE_SIZE:
        return set_value(&opts->cache_size_text, arg);
    case KEY_LOG_FILE:
        return set_value(&opts->log_file, arg);
    default:
        return 1;
    }
}

int options_parse(struct fuse_args *args, struct options *opts)
{
    if (fuse_opt_parse(args, opts, option_spec, option_proc) != 0) {
        fprintf(stderr, "h5osfs: cannot parse the command line\n");
        return -1;
    }
    return 0;
}

int options_parse_size(const char *text, uint64_t *out)
{
    char *end;
    errno = 0;
    if (!text || *text < '0' || *text > '9')
        return -EINVAL;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0)
        return -EINVAL;
    unsigned shift = 0;
    switch (*end) {
    case 'K': case 'k': shift = 10; end++; break;
    case 'M': case 'm': shift = 20; end++; break;
    case 'G': case 'g': shift = 30; end++; break;
    case 'T': case 't': shift = 40; end++; break;
    default: break;
    }
    if (*end != '\0' || (shift && v > (UINT64_MAX >> shift)))
        return -EINVAL;
    *out = (uint64_t)v << shift;
    return 0;
}

int options_parse_seconds(const char *text, double *out)
{
    char *end;
    if (!text || !*text)
        return -EINVAL;
    errno = 0;
    double v = strtod(text, &end);
    if (errno != 0 || *end != '\0' || !isfinite(v) || v < 0 || v > 1e9)
        return -EINVAL;
    *out = v;
    return 0;
}

static char *local_user_name(void)
{
    struct passwd pw, *found = NULL;
    char buf[4096];
    if (getpwuid_r(getuid(), &pw, buf, sizeof buf, &found) == 0 && found)
        return strdup(found->pw_name);
    const char *env = getenv("USER");
    return strdup(env && *env ? env : "default");
}

static char *default_cache_dir(void)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char *dir = NULL;
    int n;
    if (xdg && *xdg)
        n = asprintf(&dir, "%s/h5osfs", xdg);
    else
        n = asprintf(&dir, "%s/.cache/h5osfs", home && *home ? home : "/tmp");
    return n < 0 ? NULL : dir;
}

static int fail(const char *what, const char *value)
{
    fprintf(stderr, "h5osfs: %s: '%s'\n", what, value);
    return -1;
}

int options_finish(struct options *opts)
{
    opts->ttl = OPTIONS_DEFAULT_TTL;
    opts->cache_size = OPTIONS_DEFAULT_CACHE_SIZE;
    if (opts->ttl_text && options_parse_seconds(opts->ttl_text, &opts->ttl) != 0)
        return fail("ttl must be a number of seconds between 0 and 1e9", opts->ttl_text);
    if (opts->cache_size_text && options_parse_size(opts->cache_size_text, &opts->cache_size) != 0)
        return fail("cache_size must be a byte count such as 536870912 or 512M",
                    opts->cache_size_text);
    if (opts->user && !*opts->user)
        return fail("user must not be empty", opts->user);
    if (!opts->user && !(opts->user = local_user_name()))
        return fail("out of memory", "user");
    if (!opts->admin_user && !(opts->admin_user = strdup("admin")))
        return fail("out of memory", "admin_user");
    if (!opts->cache_dir && !(opts->cache_dir = default_cache_dir()))
        return fail("out of memory", "cache_dir");
    return 0;
}

void options_free(struct options *opts)
{
    free(opts->bucket);
    free(opts->user);
    free(opts->admin_user);
    free(opts->cache_dir);
    free(opts->log_file);
    free(opts->ttl_text);
    free(opts->cache_size_text);
    memset(opts, 0, sizeof *opts);
}
