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
#include <openssl/evp.h>

#include "h5osfs/fs/callers.h"
#include "h5osfs/schema/schema.h"
#include "h5osfs/store/store_s3.h"

enum option_key {
    KEY_RO,
    KEY_FSNAME,
    KEY_SUBTYPE,
    KEY_BUCKET_IMAGES,
    KEY_NO_REPAIRS,
    KEY_USER,
    KEY_ADMIN_USER,
    KEY_USER_MAP,
    KEY_TTL,
    KEY_CACHE_DIR,
    KEY_CACHE_SIZE,
    KEY_IMAGE_CACHE,
    KEY_READ_AHEAD,
    KEY_LOG_FILE,
    KEY_ENDPOINT,
    KEY_REGION,
    KEY_PROFILE,
    KEY_CA_FILE,
    KEY_NO_SIGN,
    KEY_PATH_STYLE,
    KEY_VIRTUAL_HOST,
    KEY_MAX_REQUESTS,
    KEY_TIMEOUT,
    KEY_RETRIES,
    KEY_RETRY_TIME,
    KEY_MULTIPART_THRESHOLD,
    KEY_MULTIPART_PART_SIZE,
    KEY_INGEST,
    KEY_VERSIONS,
    KEY_VERSIONS_KEEP,
    KEY_VERSIONS_GRACE,
    KEY_VERSIONS_SWEEP_INTERVAL,
    KEY_REFS_URL,
    KEY_VERSIONS_CURRENT,
    KEY_BUCKET_REFS,
    KEY_PAGED_IMAGES,
};

static const struct fuse_opt option_spec[] = {
    FUSE_OPT_KEY("ro", KEY_RO),
    FUSE_OPT_KEY("fsname=", KEY_FSNAME),
    FUSE_OPT_KEY("subtype=", KEY_SUBTYPE),
    FUSE_OPT_KEY("bucket_images=", KEY_BUCKET_IMAGES),
    FUSE_OPT_KEY("ingest=", KEY_INGEST),
    FUSE_OPT_KEY("versions=", KEY_VERSIONS),
    FUSE_OPT_KEY("versions_keep=", KEY_VERSIONS_KEEP),
    FUSE_OPT_KEY("versions_grace=", KEY_VERSIONS_GRACE),
    FUSE_OPT_KEY("versions_sweep_interval=", KEY_VERSIONS_SWEEP_INTERVAL),
    FUSE_OPT_KEY("versions_current=", KEY_VERSIONS_CURRENT),
    FUSE_OPT_KEY("no_repairs", KEY_NO_REPAIRS),
    FUSE_OPT_KEY("refs_url=", KEY_REFS_URL),
    FUSE_OPT_KEY("bucket_refs=", KEY_BUCKET_REFS),
    FUSE_OPT_KEY("paged_images=", KEY_PAGED_IMAGES),
    FUSE_OPT_KEY("user=", KEY_USER),
    /* user= is also mount(8)'s own "user" keyword: in fstab it would make the entry mountable
     * by every local user. fstab lines name the HSDS user this way instead. */
    FUSE_OPT_KEY("hsds_user=", KEY_USER),
    FUSE_OPT_KEY("admin_user=", KEY_ADMIN_USER),
    FUSE_OPT_KEY("user_map=", KEY_USER_MAP),
    FUSE_OPT_KEY("ttl=", KEY_TTL),
    FUSE_OPT_KEY("cache_dir=", KEY_CACHE_DIR),
    FUSE_OPT_KEY("cache_size=", KEY_CACHE_SIZE),
    FUSE_OPT_KEY("image_cache=", KEY_IMAGE_CACHE),
    FUSE_OPT_KEY("read_ahead=", KEY_READ_AHEAD),
    FUSE_OPT_KEY("log_file=", KEY_LOG_FILE),
    FUSE_OPT_KEY("endpoint=", KEY_ENDPOINT),
    FUSE_OPT_KEY("region=", KEY_REGION),
    FUSE_OPT_KEY("profile=", KEY_PROFILE),
    FUSE_OPT_KEY("ca_file=", KEY_CA_FILE),
    FUSE_OPT_KEY("no_sign", KEY_NO_SIGN),
    FUSE_OPT_KEY("path_style", KEY_PATH_STYLE),
    FUSE_OPT_KEY("virtual_host", KEY_VIRTUAL_HOST),
    FUSE_OPT_KEY("max_requests=", KEY_MAX_REQUESTS),
    FUSE_OPT_KEY("timeout=", KEY_TIMEOUT),
    FUSE_OPT_KEY("retries=", KEY_RETRIES),
    FUSE_OPT_KEY("retry_time=", KEY_RETRY_TIME),
    FUSE_OPT_KEY("multipart_threshold=", KEY_MULTIPART_THRESHOLD),
    FUSE_OPT_KEY("multipart_part_size=", KEY_MULTIPART_PART_SIZE),
    FUSE_OPT_END,
};

void options_usage(const char *prog)
{
    printf(
        "usage: %s [options] BUCKET MOUNTPOINT\n"
        "\n"
        "Mount an HSDS bucket (a local directory or s3://bucket[/prefix]) so that every domain\n"
        "is an HDF5 file.\n"
        "\n"
        "h5osfs options:\n"
        "    -f                     stay in the foreground, log to stderr\n"
        "    -d                     debug log (implies -f)\n"
        "    -o ro                  read-only mount\n"
        "    -o user=NAME           HSDS user name for ACL checks (default: your user name)\n"
        "    -o hsds_user=NAME      the same, for fstab and mount(8), where user is theirs\n"
        "    -o admin_user=NAME     HSDS admin user name (default: admin)\n"
        "    -o user_map=UID:NAME[:UID:NAME...]\n"
        "                           HSDS user names of other local users (with allow_other;\n"
        "                           default: their local user names)\n"
        "    -o ttl=SECONDS         how long listings and domain JSON are trusted (default: %g)\n"
        "    -o cache_dir=PATH      staging and cache directory (default: one per bucket,\n"
        "                           ~/.cache/h5osfs/NAME-HASH)\n"
        "    -o cache_size=BYTES    chunk cache size, K/M/G suffixes (default: 1G)\n"
        "    -o image_cache=BYTES   room for built files kept in cache_dir/images, for the next\n"
        "                           open and the next mount (default: 256M; 0: none)\n"
        "    -o read_ahead=BYTES    the kernel's read-ahead of the mount: bigger READ requests,\n"
        "                           fewer of them (default: 512K; 0: the kernel's 128K; root\n"
        "                           only)\n"
        "    -o no_repairs          show what hsload changed as stored (man page, REPAIRS)\n"
        "    -o paged_images=on|off  build files with paged aggregation (file space\n"
        "                           strategy PAGE), which cloud readers of a copy want;\n"
        "                           small chunks then share pages (default: off)\n"
        "    -o bucket_images=off|read|write  built files in the bucket, for other mounts:\n"
        "                           read them (default), also put them there, or neither\n"
        "    -o refs_url=PREFIX     what chunk keys are appended to in MOUNT/.kerchunk's\n"
        "                           references (default: the bucket's s3:// or file:// URL)\n"
        "    -o bucket_refs=on|off  put each committed domain's kerchunk references in the\n"
        "                           bucket, DIR/NAME/.kerchunk.json (default: off)\n"
        "    -o ingest=copy|link    how a new file is stored: as HSDS objects (default), or\n"
        "                           whole, its datasets linked into it (as hsload --link)\n"
        "    -o versions=on|off     keep every commit of a domain DIR/NAME as a read-only\n"
        "                           version DIR/.versions/NAME/<n>.h5 (default: off; a\n"
        "                           folder's xattr user.h5osfs.versions decides below it)\n"
        "    -o versions_keep=N     with versions=on, keep the newest N untagged versions\n"
        "                           (default: all)\n"
        "    -o versions_current=root|ref  with versions=on, the current DIR/NAME is a plain\n"
        "                           root HSDS may write beside the versions (default: root),\n"
        "                           or its newest version itself: stored once, HSDS may not\n"
        "                           write it (xattr value ref: the same per folder)\n"
        "    -o versions_grace=SECONDS  a pool chunk no kept version names is deleted only\n"
        "                           once it is this old: longer than any commit (default:\n"
        "                           3600)\n"
        "    -o versions_sweep_interval=SECONDS  at most one sweep of a domain's pool per\n"
        "                           interval after versions are removed (default: 3600)\n"
        "    -o log_file=PATH       log here instead of syslog when in the background\n"
        "\n"
        "S3 buckets (BUCKET is s3://bucket or s3://bucket/prefix):\n"
        "    -o endpoint=URL        an S3-compatible server (default: AWS's regional endpoint)\n"
        "    -o region=NAME         signing region (default: AWS_REGION, ~/.aws/config, "
        "us-east-1)\n"
        "    -o profile=NAME        credentials of this profile of ~/.aws/credentials\n"
        "    -o no_sign             anonymous requests (public buckets)\n"
        "    -o path_style          endpoint/bucket/key URLs (default with -o endpoint)\n"
        "    -o virtual_host        bucket.endpoint/key URLs (default for AWS)\n"
        "    -o ca_file=PATH        CA certificates for TLS (default: the system's)\n"
        "    -o max_requests=N      requests in flight at once (default 16)\n"
        "    -o timeout=SECONDS     connect, or a stalled transfer (default 30)\n"
        "    -o retries=N           further attempts after 5xx, 429, timeouts (default 5)\n"
        "    -o retry_time=SECONDS  all attempts of one request (default 60)\n"
        "    -o multipart_threshold=BYTES  objects larger than this go up in parts\n"
        "                           (default 64M; 5M to 5G)\n"
        "    -o multipart_part_size=BYTES  the size of those parts (default 8M; 5M to 5G;\n"
        "                           larger where an object would need over 10,000)\n"
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
    return 0; /* consumed: libfuse never sees our options */
}

/* Our -o options arrive as "name=value"; keep the value. */
static int set_value(char **slot, const char *arg)
{
    return set_string(slot, strchr(arg, '=') + 1);
}

/* -o user_map given again adds its pairs. */
static int add_pairs(char **slot, const char *arg)
{
    const char *value = strchr(arg, '=') + 1;
    char *joined = NULL;
    if (!*slot)
        return set_string(slot, value);
    if (asprintf(&joined, "%s:%s", *slot, value) < 0)
        return -1;
    free(*slot);
    *slot = joined;
    return 0;
}

static int option_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
    (void)outargs;
    struct options *opts = data;
    switch (key) {
    case FUSE_OPT_KEY_NONOPT:
        if (opts->bucket)
            return 1; /* the mountpoint, for fuse_parse_cmdline */
        return set_string(&opts->bucket, arg);
    case KEY_NO_REPAIRS:
        opts->no_repairs = 1;
        return 0;
    case KEY_BUCKET_IMAGES:
        return set_value(&opts->bucket_images_text, arg);
    case KEY_REFS_URL:
        return set_value(&opts->refs_url, arg);
    case KEY_BUCKET_REFS:
        return set_value(&opts->bucket_refs_text, arg);
    case KEY_PAGED_IMAGES:
        return set_value(&opts->paged_images_text, arg);
    case KEY_INGEST:
        return set_value(&opts->ingest_text, arg);
    case KEY_VERSIONS:
        return set_value(&opts->versions_text, arg);
    case KEY_VERSIONS_KEEP:
        return set_value(&opts->versions_keep_text, arg);
    case KEY_VERSIONS_GRACE:
        return set_value(&opts->versions_grace_text, arg);
    case KEY_VERSIONS_SWEEP_INTERVAL:
        return set_value(&opts->versions_sweep_interval_text, arg);
    case KEY_VERSIONS_CURRENT:
        return set_value(&opts->versions_current_text, arg);
    case KEY_RO:
        opts->read_only = 1;
        return 1; /* also a kernel mount option */
    case KEY_FSNAME:
        opts->fsname_given = 1;
        return 1; /* libfuse's */
    case KEY_SUBTYPE:
        opts->subtype_given = 1;
        return 1;
    case KEY_USER:
        return set_value(&opts->user, arg);
    case KEY_ADMIN_USER:
        return set_value(&opts->admin_user, arg);
    case KEY_USER_MAP:
        return add_pairs(&opts->user_map, arg);
    case KEY_TTL:
        return set_value(&opts->ttl_text, arg);
    case KEY_CACHE_DIR:
        return set_value(&opts->cache_dir, arg);
    case KEY_CACHE_SIZE:
        return set_value(&opts->cache_size_text, arg);
    case KEY_IMAGE_CACHE:
        return set_value(&opts->image_cache_text, arg);
    case KEY_READ_AHEAD:
        return set_value(&opts->read_ahead_text, arg);
    case KEY_LOG_FILE:
        return set_value(&opts->log_file, arg);
    case KEY_ENDPOINT:
        return set_value(&opts->endpoint, arg);
    case KEY_REGION:
        return set_value(&opts->region, arg);
    case KEY_PROFILE:
        return set_value(&opts->profile, arg);
    case KEY_CA_FILE:
        return set_value(&opts->ca_file, arg);
    case KEY_NO_SIGN:
        opts->no_sign = 1;
        return 0;
    case KEY_PATH_STYLE:
    case KEY_VIRTUAL_HOST:
        opts->path_style = key == KEY_PATH_STYLE;
        return 0;
    case KEY_MAX_REQUESTS:
        return set_value(&opts->max_requests_text, arg);
    case KEY_TIMEOUT:
        return set_value(&opts->timeout_text, arg);
    case KEY_RETRIES:
        return set_value(&opts->retries_text, arg);
    case KEY_RETRY_TIME:
        return set_value(&opts->retry_time_text, arg);
    case KEY_MULTIPART_THRESHOLD:
        return set_value(&opts->multipart_threshold_text, arg);
    case KEY_MULTIPART_PART_SIZE:
        return set_value(&opts->multipart_part_size_text, arg);
    default:
        return 1;
    }
}

int options_parse(struct fuse_args *args, struct options *opts)
{
    opts->path_style = -1;
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
    case 'K':
    case 'k':
        shift = 10;
        end++;
        break;
    case 'M':
    case 'm':
        shift = 20;
        end++;
        break;
    case 'G':
    case 'g':
        shift = 30;
        end++;
        break;
    case 'T':
    case 't':
        shift = 40;
        end++;
        break;
    default:
        break;
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

static int fail(const char *what, const char *value)
{
    fprintf(stderr, "h5osfs: %s: '%s'\n", what, value);
    return -1;
}

static int parse_bucket_images(struct options *opts)
{
    static const char *const modes[] = { "off", "read", "write" };
    opts->bucket_images = OPTIONS_BUCKET_IMAGES_READ;
    if (!opts->bucket_images_text)
        return 0;
    for (int i = 0; i < 3; i++)
        if (strcmp(opts->bucket_images_text, modes[i]) == 0)
            opts->bucket_images = i;
    if (strcmp(opts->bucket_images_text, modes[opts->bucket_images]) != 0)
        return fail("bucket_images must be off, read or write", opts->bucket_images_text);
    if (opts->bucket_images == OPTIONS_BUCKET_IMAGES_WRITE && opts->read_only)
        return fail("bucket_images=write needs a read-write mount", "ro");
    return 0;
}

static int parse_bucket_refs(struct options *opts)
{
    const char *t = opts->bucket_refs_text;
    opts->bucket_refs = t && strcmp(t, "on") == 0;
    if (t && !opts->bucket_refs && strcmp(t, "off") != 0)
        return fail("bucket_refs must be on or off", t);
    if (opts->bucket_refs && opts->read_only)
        return fail("bucket_refs=on needs a read-write mount", "ro");
    return 0;
}

static int parse_paged_images(struct options *opts)
{
    const char *t = opts->paged_images_text;
    opts->paged_images = t && strcmp(t, "on") == 0;
    return t && !opts->paged_images && strcmp(t, "off") != 0
               ? fail("paged_images must be on or off", t)
               : 0;
}

static int parse_ingest(struct options *opts)
{
    if (!opts->ingest_text || strcmp(opts->ingest_text, "copy") == 0)
        return 0;
    if (strcmp(opts->ingest_text, "link") != 0)
        return fail("ingest must be copy or link", opts->ingest_text);
    opts->ingest_link = 1;
    return 0;
}

/* A whole number in [min, max]. */
static int parse_count(const char *text, unsigned min, unsigned max, unsigned *out)
{
    uint64_t v;
    if (options_parse_size(text, &v) != 0 || v < min || v > max)
        return -EINVAL;
    *out = (unsigned)v;
    return 0;
}

/* versions=on|off and versions_keep=N: the mount's default where no folder says otherwise. */
static int parse_versions(struct options *opts)
{
    struct schema_versions v = { SCHEMA_VERSIONS_OFF, 0, 0 };
    if (opts->versions_text &&
        (schema_versions_parse(opts->versions_text, strlen(opts->versions_text), &v) != 0 ||
         v.keep != 0 || v.ref))
        return fail("versions must be on or off", opts->versions_text);
    opts->versions = v.mode == SCHEMA_VERSIONS_ON;
    if (opts->versions_keep_text &&
        parse_count(opts->versions_keep_text, 1, SCHEMA_VERSIONS_KEEP_MAX, &opts->versions_keep) !=
            0)
        return fail("versions_keep must be a whole number from 1 to 999999999",
                    opts->versions_keep_text);
    if (opts->versions_current_text && strcmp(opts->versions_current_text, "ref") != 0 &&
        strcmp(opts->versions_current_text, "root") != 0)
        return fail("versions_current must be root or ref", opts->versions_current_text);
    opts->versions_ref =
        opts->versions_current_text && strcmp(opts->versions_current_text, "ref") == 0;
    opts->versions_grace = OPTIONS_DEFAULT_VERSIONS_GRACE;
    opts->versions_sweep_interval = OPTIONS_DEFAULT_VERSIONS_SWEEP_INTERVAL;
    if (opts->versions_grace_text &&
        options_parse_seconds(opts->versions_grace_text, &opts->versions_grace) != 0)
        return fail("versions_grace must be a number of seconds between 0 and 1e9",
                    opts->versions_grace_text);
    if (opts->versions_sweep_interval_text &&
        options_parse_seconds(opts->versions_sweep_interval_text, &opts->versions_sweep_interval) !=
            0)
        return fail("versions_sweep_interval must be a number of seconds between 0 and 1e9",
                    opts->versions_sweep_interval_text);
    return 0;
}

/* A byte count within S3's part limits (5 MiB to 5 GiB); *out untouched when text is NULL. */
static int parse_part_bytes(const char *text, const char *name, uint64_t *out)
{
    char what[120];
    if (!text)
        return 0;
    if (options_parse_size(text, out) == 0 && *out >= STORE_S3_PART_MIN &&
        *out <= STORE_S3_PART_MAX)
        return 0;
    snprintf(what, sizeof what, "%s must be a byte count from 5M to 5G", name);
    return fail(what, text);
}

static int finish_s3(struct options *opts)
{
    opts->max_requests = OPTIONS_DEFAULT_MAX_REQUESTS;
    opts->timeout = OPTIONS_DEFAULT_TIMEOUT;
    opts->retries = OPTIONS_DEFAULT_RETRIES;
    opts->retry_time = OPTIONS_DEFAULT_RETRY_TIME;
    if (opts->max_requests_text &&
        parse_count(opts->max_requests_text, 1, 1024, &opts->max_requests) != 0)
        return fail("max_requests must be a number from 1 to 1024", opts->max_requests_text);
    if (opts->retries_text && parse_count(opts->retries_text, 0, 100, &opts->retries) != 0)
        return fail("retries must be a number from 0 to 100", opts->retries_text);
    if (opts->timeout_text &&
        (options_parse_seconds(opts->timeout_text, &opts->timeout) != 0 || opts->timeout < 0.1))
        return fail("timeout must be a number of seconds, at least 0.1", opts->timeout_text);
    if (opts->retry_time_text && options_parse_seconds(opts->retry_time_text, &opts->retry_time))
        return fail("retry_time must be a number of seconds", opts->retry_time_text);
    opts->multipart_threshold = STORE_S3_DEFAULT_MULTIPART_THRESHOLD;
    opts->multipart_part_size = STORE_S3_DEFAULT_PART_SIZE;
    if (parse_part_bytes(opts->multipart_threshold_text, "multipart_threshold",
                         &opts->multipart_threshold) != 0 ||
        parse_part_bytes(opts->multipart_part_size_text, "multipart_part_size",
                         &opts->multipart_part_size) != 0)
        return -1;
    if (opts->endpoint && strncmp(opts->endpoint, "http://", 7) != 0 &&
        strncmp(opts->endpoint, "https://", 8) != 0)
        return fail("endpoint must be an http:// or https:// URL", opts->endpoint);
    return 0;
}

/* text's length without its trailing slashes: "s3://b/p/" and "s3://b/p" are one place. */
static int trimmed_len(const char *text)
{
    size_t len = strlen(text);
    while (len > 0 && text[len - 1] == '/')
        len--;
    return (int)len;
}

/*
 * What names the bucket the same way at every mount and differently for every other bucket:
 * the directory's real path (so "./b", "b/" and a symlink to it are one bucket), or
 * "s3:ENDPOINT/bucket/prefix" ("aws" for the default endpoint, which depends only on the
 * region). NULL after printing one line.
 */
static char *bucket_identity(const struct options *opts)
{
    char *id = NULL;
    if (strncmp(opts->bucket, "s3://", 5) == 0) {
        const char *where = opts->bucket + 5, *endpoint = opts->endpoint ? opts->endpoint : "aws";
        if (asprintf(&id, "s3:%.*s/%.*s", trimmed_len(endpoint), endpoint, trimmed_len(where),
                     where) < 0) {
            fprintf(stderr, "h5osfs: out of memory\n");
            return NULL;
        }
        return id;
    }
    if (!(id = realpath(opts->bucket, NULL)))
        fprintf(stderr, "h5osfs: bucket directory '%s': %s\n", opts->bucket, strerror(errno));
    return id;
}

/* Up to max characters of the bucket's last path component, with anything a file name or a
 * shell might mind replaced by '_': the readable half of the default cache_dir's name. */
static void readable_part(const char *id, char *out, size_t max)
{
    size_t len = (size_t)trimmed_len(id), n = 0;
    const char *last = id + len;
    while (last > id && last[-1] != '/' && last[-1] != ':')
        last--;
    for (; last < id + len && n < max; last++, n++) {
        char c = *last;
        int safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '-' || c == '_' || (c == '.' && n > 0);
        out[n] = safe ? c : '_';
    }
    out[n] = '\0';
}

/* "<last component>-<16 hex digits of SHA-256(id)>", with "s3-" before an S3 bucket's. */
static char *cache_dir_name(const char *id)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned md_len = 0;
    char readable[49], hex[17], *name = NULL;
    if (EVP_Digest(id, strlen(id), md, &md_len, EVP_sha256(), NULL) != 1 || md_len < 8)
        return NULL;
    for (int i = 0; i < 8; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    readable_part(id, readable, sizeof readable - 1);
    if (asprintf(&name, "%s%s-%s", strncmp(id, "s3:", 3) == 0 ? "s3-" : "",
                 *readable ? readable : "bucket", hex) < 0)
        return NULL;
    return name;
}

/* $XDG_CACHE_HOME/h5osfs/NAME, or ~/.cache/h5osfs/NAME: one per bucket, so read-write mounts
 * of different buckets never contend for one (each locks its own), a remount of a bucket finds
 * what its crashed predecessor staged, and no other bucket's mount ever sees it. */
static char *default_cache_dir(const char *id)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char *name = cache_dir_name(id), *dir = NULL;
    int n = -1;
    if (!name)
        return NULL;
    if (xdg && *xdg == '/') /* the XDG spec: a relative value is to be ignored */
        n = asprintf(&dir, "%s/h5osfs/%s", xdg, name);
    else
        n = asprintf(&dir, "%s/.cache/h5osfs/%s", home && *home ? home : "/tmp", name);
    free(name);
    return n < 0 ? NULL : dir;
}

/* The journal builds paths from cache_dir, and fuse_daemonize changes to "/": a relative
 * cache_dir must become the directory the user meant while the working directory is still
 * theirs. 0 or -errno. */
static int make_absolute(char **path)
{
    if (**path == '/')
        return 0;
    char *cwd = getcwd(NULL, 0), *abs = NULL;
    if (!cwd)
        return -errno;
    int n = asprintf(&abs, "%s/%s", cwd, *path);
    free(cwd);
    if (n < 0)
        return -ENOMEM;
    free(*path);
    *path = abs;
    return 0;
}

static int finish_cache_dir(struct options *opts)
{
    if (!(opts->bucket_id = bucket_identity(opts)))
        return -1;
    if (opts->cache_dir && !*opts->cache_dir)
        return fail("cache_dir must not be empty", opts->cache_dir);
    if (!opts->cache_dir && !(opts->cache_dir = default_cache_dir(opts->bucket_id)))
        return fail("out of memory", "cache_dir");
    int rc = make_absolute(&opts->cache_dir);
    if (rc != 0) {
        fprintf(stderr, "h5osfs: cache_dir '%s': cannot make it absolute: %s\n", opts->cache_dir,
                strerror(-rc));
        return -1;
    }
    return 0;
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
    if (parse_bucket_images(opts) != 0 || parse_bucket_refs(opts) != 0 ||
        parse_paged_images(opts) != 0 || parse_ingest(opts) != 0 || parse_versions(opts) != 0)
        return -1;
    opts->read_ahead = OPTIONS_DEFAULT_READ_AHEAD;
    if (opts->read_ahead_text &&
        (options_parse_size(opts->read_ahead_text, &opts->read_ahead) != 0 ||
         opts->read_ahead > OPTIONS_MAX_READ_AHEAD))
        return fail("read_ahead must be a byte count up to 64M such as 512K (0: the kernel's)",
                    opts->read_ahead_text);
    opts->image_cache = OPTIONS_DEFAULT_IMAGE_CACHE;
    if (opts->image_cache_text &&
        options_parse_size(opts->image_cache_text, &opts->image_cache) != 0)
        return fail("image_cache must be a byte count such as 268435456 or 256M (0: none)",
                    opts->image_cache_text);
    if (opts->user && !*opts->user)
        return fail("user must not be empty", opts->user);
    if (!opts->user && !(opts->user = local_user_name()))
        return fail("out of memory", "user");
    if (!opts->admin_user && !(opts->admin_user = strdup("admin")))
        return fail("out of memory", "admin_user");
    char why[200];
    if (opts->user_map && callers_check_map(opts->user_map, getuid(), why, sizeof why) != 0)
        return fail(why, opts->user_map);
    if (finish_s3(opts) != 0)
        return -1;
    return finish_cache_dir(opts);
}

void options_free(struct options *opts)
{
    free(opts->bucket);
    free(opts->bucket_id);
    free(opts->user);
    free(opts->admin_user);
    free(opts->user_map);
    free(opts->cache_dir);
    free(opts->log_file);
    free(opts->ttl_text);
    free(opts->cache_size_text);
    free(opts->image_cache_text);
    free(opts->read_ahead_text);
    free(opts->bucket_images_text);
    free(opts->bucket_refs_text);
    free(opts->paged_images_text);
    free(opts->refs_url);
    free(opts->ingest_text);
    free(opts->versions_text);
    free(opts->versions_keep_text);
    free(opts->versions_grace_text);
    free(opts->versions_sweep_interval_text);
    free(opts->versions_current_text);
    free(opts->endpoint);
    free(opts->region);
    free(opts->profile);
    free(opts->ca_file);
    free(opts->max_requests_text);
    free(opts->timeout_text);
    free(opts->retries_text);
    free(opts->retry_time_text);
    free(opts->multipart_threshold_text);
    free(opts->multipart_part_size_text);
    memset(opts, 0, sizeof *opts);
}
