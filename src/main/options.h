/*
 * options: the command line, `h5osfs [options] BUCKET MOUNTPOINT`.
 *
 * Our own -o options are taken out of the argument list; what remains (-f, -d, -s, libfuse's
 * -o options, the mountpoint) is for fuse_parse_cmdline and fuse_session_new, so an unknown
 * option is refused by libfuse before anything is mounted.
 */
#ifndef H5OSFS_MAIN_OPTIONS_H
#define H5OSFS_MAIN_OPTIONS_H

#include <stdint.h>

#include <fuse_lowlevel.h>

struct options {
    char *bucket;
    char *bucket_id;  /* options_finish: the bucket's identity, the same at every
                                 * mount of it ("/real/path" or "s3:ENDPOINT/bucket/prefix") */
    char *user;       /* HSDS user for ACL checks; default: the local user name */
    char *admin_user; /* HSDS admin user name; default "admin" */
    char *user_map;   /* other callers' HSDS names, "UID:NAME[:UID:NAME...]" */
    char *cache_dir;  /* options_finish: absolute; default one per bucket */
    char *log_file;
    char *ttl_text; /* raw -o ttl= and -o cache_size=, validated after parsing */
    char *cache_size_text;
    char *image_cache_text; /* raw -o image_cache= */
    char *read_ahead_text;  /* raw -o read_ahead= */
    double ttl;
    uint64_t cache_size;
    uint64_t image_cache; /* bytes of built images kept in cache_dir/images; 0: none */
    uint64_t read_ahead;  /* the mount's kernel read-ahead, bytes; 0: the kernel's default */
    int read_only;
    int fsname_given, subtype_given; /* -o fsname= / subtype=: the kernel's name is theirs */
    int no_repairs;                  /* -o no_repairs: what hsload changed is shown as stored */
    char *refs_url;            /* -o refs_url=: MOUNT/.kerchunk's URL base; NULL: the bucket's */
    char *bucket_images_text;  /* raw -o bucket_images= */
    char *bucket_refs_text;    /* raw -o bucket_refs= */
    char *paged_images_text;   /* raw -o paged_images= */
    int paged_images;          /* 1: images built with paged aggregation (image.h) */
    int bucket_refs;           /* 1: commits put DIR/NAME/.kerchunk.json (domops.h) */
    int bucket_images;         /* OPTIONS_BUCKET_IMAGES_*: built images in the bucket */
    char *ingest_text;         /* raw -o ingest= */
    int ingest_link;           /* -o ingest=link: new files stored whole, datasets linked */
    char *versions_text;       /* raw -o versions= */
    char *versions_keep_text;  /* raw -o versions_keep= */
    int versions;              /* -o versions=on: commits keep versions (issue 26) */
    unsigned versions_keep;    /* -o versions_keep=N: newest N untagged kept; 0 all */
    char *versions_grace_text; /* raw -o versions_grace= */
    char *versions_sweep_interval_text; /* raw -o versions_sweep_interval= */
    double versions_grace;              /* pool objects younger than this are never swept */
    double versions_sweep_interval;     /* one pool sweep per domain per interval */
    char *versions_current_text;        /* raw -o versions_current= */
    int versions_ref; /* -o versions_current=ref: the domain names its head version itself */
    /* S3 buckets (s3://bucket/prefix) */
    char *endpoint;
    char *region;
    char *profile;
    char *ca_file;
    char *max_requests_text, *timeout_text, *retries_text, *retry_time_text;
    char *multipart_threshold_text, *multipart_part_size_text;
    int no_sign;
    int path_style; /* -1: decide from the endpoint, 0: virtual-hosted, 1: path */
    unsigned max_requests;
    double timeout;
    unsigned retries;
    double retry_time;
    uint64_t multipart_threshold; /* objects larger go up in parts of multipart_part_size */
    uint64_t multipart_part_size;
    int bad_option; /* set by the parser; the message is already printed */
};

#define OPTIONS_BUCKET_IMAGES_OFF 0   /* neither read nor put */
#define OPTIONS_BUCKET_IMAGES_READ 1  /* read them (the default) */
#define OPTIONS_BUCKET_IMAGES_WRITE 2 /* read them, and put what this mount builds */
#define OPTIONS_DEFAULT_TTL 5.0
#define OPTIONS_DEFAULT_VERSIONS_GRACE 3600.0          /* -o versions_grace: 1 h */
#define OPTIONS_DEFAULT_VERSIONS_SWEEP_INTERVAL 3600.0 /* -o versions_sweep_interval */
#define OPTIONS_DEFAULT_CACHE_SIZE (1024ull << 20)
#define OPTIONS_DEFAULT_IMAGE_CACHE (256ull << 20)
/* READs of up to 512 KiB: a reply that large fits the 1 MiB pipe an unprivileged splice may
 * have (fs_file.c, reply_spliced); 1 MiB saves no CPU over that */
#define OPTIONS_DEFAULT_READ_AHEAD (512ull << 10)
#define OPTIONS_MAX_READ_AHEAD (64ull << 20)
#define OPTIONS_DEFAULT_MAX_REQUESTS 16
#define OPTIONS_DEFAULT_TIMEOUT 30.0
#define OPTIONS_DEFAULT_RETRIES 5
#define OPTIONS_DEFAULT_RETRY_TIME 60.0

/* Parse args (consuming our options). 0 or -1 after printing one line to stderr. */
int options_parse(struct fuse_args *args, struct options *opts);
/* Fill defaults and check values; 0 or -1 after printing one line. */
int options_finish(struct options *opts);
void options_free(struct options *opts);
void options_usage(const char *prog);

/* "1024", "64K", "512M", "2G" (powers of 1024). 0 or -EINVAL. */
int options_parse_size(const char *text, uint64_t *out);
/* A non-negative finite number of seconds. 0 or -EINVAL. */
int options_parse_seconds(const char *text, double *out);

#endif
