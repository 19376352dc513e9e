/*
 * store_put: one object put into an S3 bucket through the daemon's own store code, for the
 * integration tests of what the daemon does not yet drive through a mount (the multipart
 * upload of big objects: tests/integration/test_s3_multipart.py).
 *
 *   store_put [-t THRESHOLD] [-p PART_SIZE] [-m MAX_REQUESTS] [-r RETRIES] [-T TIMEOUT]
 *             [-M] ENDPOINT BUCKET KEY FILE
 *   store_put [OPTIONS] -c SRC [-H] ENDPOINT BUCKET KEY
 *
 * The whole of FILE becomes object KEY: with store_put_new_from_fd (the bytes streamed from
 * the file), or with -M read into memory and put with store_put. With -c, object SRC of the
 * bucket is copied to KEY by the store (store_copy, which takes it for a small object; with
 * -H its size is asked first, store_head, and given to store_copy_sized). Credentials come from
 * AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY. The log goes to stderr; stdout gets one JSON
 * line, {"rc": 0 or -errno, "retries": N, "failures": N}. Exit status 0 when the put succeeded.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "h5osfs/util/log.h"
#include "h5osfs/store/store.h"
#include "h5osfs/store/store_s3.h"

static int usage(void)
{
    fprintf(stderr, "usage: store_put [-t THRESHOLD] [-p PART_SIZE] [-m MAX_REQUESTS] "
                    "[-r RETRIES] [-T TIMEOUT] [-M] ENDPOINT BUCKET KEY FILE\n"
                    "       store_put [OPTIONS] -c SRC [-H] ENDPOINT BUCKET KEY\n");
    return 2;
}

static int read_all(int fd, size_t len, unsigned char **out)
{
    unsigned char *buf = malloc(len ? len : 1);
    if (!buf)
        return -ENOMEM;
    for (size_t done = 0; done < len;) {
        ssize_t n = pread(fd, buf + done, len - done, (off_t)done);
        if (n <= 0) {
            free(buf);
            return n < 0 ? -errno : -EIO;
        }
        done += (size_t)n;
    }
    *out = buf;
    return 0;
}

static int put_file(struct store *st, const char *key, const char *path, int in_memory)
{
    struct stat sb;
    unsigned char *data = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &sb) != 0) {
        int err = errno;
        fprintf(stderr, "store_put: %s: %s\n", path, strerror(err));
        if (fd >= 0)
            close(fd);
        return -err;
    }
    int rc;
    if (!in_memory) {
        rc = store_put_new_from_fd(st, key, fd, 0, (size_t)sb.st_size);
    } else if ((rc = read_all(fd, (size_t)sb.st_size, &data)) == 0) {
        rc = store_put(st, key, data, (size_t)sb.st_size);
        free(data);
    }
    close(fd);
    return rc;
}

/* src copied to key; sized: with its size, as the daemon copies a linked file. */
static int copy_object(struct store *st, const char *src, const char *key, int sized)
{
    struct store_stat sb;
    if (!sized)
        return store_copy(st, src, key);
    int rc = store_head(st, src, &sb);
    return rc != 0 ? rc : store_copy_sized(st, src, key, sb.size);
}

int main(int argc, char **argv)
{
    struct store_s3_config cfg = { .region = "us-east-1",
                                   .path_style = 1,
                                   .max_requests = 16,
                                   .timeout = 30,
                                   .retries = 5,
                                   .retry_time = 60 };
    int in_memory = 0, sized = 0, opt;
    const char *copy_from = NULL;
    while ((opt = getopt(argc, argv, "t:p:m:r:T:Mc:H")) != -1) {
        switch (opt) {
        case 't':
            cfg.multipart_threshold = strtoull(optarg, NULL, 10);
            break;
        case 'p':
            cfg.multipart_part_size = strtoull(optarg, NULL, 10);
            break;
        case 'm':
            cfg.max_requests = (unsigned)strtoul(optarg, NULL, 10);
            break;
        case 'r':
            cfg.retries = (unsigned)strtoul(optarg, NULL, 10);
            break;
        case 'T':
            cfg.timeout = strtod(optarg, NULL);
            break;
        case 'M':
            in_memory = 1;
            break;
        case 'c':
            copy_from = optarg;
            break;
        case 'H':
            sized = 1;
            break;
        default:
            return usage();
        }
    }
    if (argc - optind != (copy_from ? 3 : 4))
        return usage();
    cfg.endpoint = argv[optind];
    cfg.bucket = argv[optind + 1];
    cfg.prefix = "";
    cfg.access_key_id = getenv("AWS_ACCESS_KEY_ID");
    cfg.secret_access_key = getenv("AWS_SECRET_ACCESS_KEY");
    if (log_setup(LOG_LVL_DEBUG, LOG_SINK_STDERR, NULL) != 0)
        return 1;
    struct store *st = NULL;
    int rc = store_s3_open(&cfg, &st);
    if (rc == 0 && copy_from)
        rc = copy_object(st, copy_from, argv[optind + 2], sized);
    else if (rc == 0)
        rc = put_file(st, argv[optind + 2], argv[optind + 3], in_memory);
    struct store_counts c = { 0 };
    if (st)
        store_counts(st, &c);
    printf("{\"rc\": %d, \"retries\": %llu, \"failures\": %llu}\n", rc,
           (unsigned long long)c.retries, (unsigned long long)c.failures);
    store_close(st);
    log_teardown();
    return rc == 0 ? 0 : 1;
}
