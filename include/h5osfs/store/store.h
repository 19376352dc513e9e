/*
 * store: the object-store interface every backend implements (posix.c, s3.c). How an S3 store
 * is configured and opened is in store_s3.h.
 *
 * Keys are UTF-8 strings without a leading '/', as HSDS writes them (spec §2). Every function
 * returns 0 or a negative errno: -ENOENT (no such object), -EACCES (refused), -EINVAL (a key
 * that may not be used: empty, absolute, with "." / ".." / empty components, or longer than
 * STORE_KEY_MAX), -EFBIG (object larger than the caller's limit), -EISDIR (the key names a
 * "directory" where an object is expected), -ENOMEM, -ENOSPC (a full disk or quota, logged),
 * -EIO (anything else, already logged with the key and the reason). Backends are thread-safe:
 * any number of calls may run at once.
 *
 * put is whole-object and atomic: a reader sees the old object or the new one, never a part.
 */
#ifndef H5OSFS_STORE_H
#define H5OSFS_STORE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define STORE_KEY_MAX 1024 /* S3's limit, in bytes */
#define STORE_RANGE_TO_END UINT64_MAX
#define STORE_SIZE_UNKNOWN UINT64_MAX

struct store;

/* A buffer owned by the caller after a successful get; free with store_buf_free. data is never
 * NULL and has one NUL byte after the len bytes, so JSON text can be parsed in place. */
struct store_buf {
    unsigned char *data;
    size_t len;
    size_t cap; /* bytes allocated at data, when the store says (else 0) */
    /* the object's etag (struct store_stat) as the store gave it with these bytes, "" when it
     * gave none: a reader that fetches an object again can tell whether it is the same */
    char etag[65];
};

struct store_stat {
    uint64_t size;
    double mtime;  /* seconds since the epoch */
    char etag[65]; /* opaque change token; equal etags mean equal content */
    /* A local bucket's inode change time (ns), 0 elsewhere: a rewrite in place that sets the
     * mtime back still changes it, but so do a hard link made or removed (the store's own
     * copies between roots, and their collection) and chmod. What tells a reader to read
     * again, never what tells a writer that someone else wrote. */
    uint64_t ctime_ns;
};

struct store_entry {
    char *key;            /* full key (objects) or common prefix ending in the delimiter */
    struct store_stat st; /* zero for common prefixes */
};

/* One page of a listing; entries and prefixes are each sorted by key (byte order). */
struct store_list {
    struct store_entry *objects;
    size_t n_objects;
    char **prefixes;
    size_t n_prefixes;
    char *next_token; /* NULL when this was the last page */
};

struct store_ops {
    const char *name;
    int (*get)(struct store *st, const char *key, uint64_t off, uint64_t len, size_t max,
               struct store_buf *out);
    int (*put)(struct store *st, const char *key, const void *data, size_t len);
    /* Optional (NULL: put is used): a put that need not be durable until the next sync. */
    int (*put_lazy)(struct store *st, const char *key, const void *data, size_t len);
    /* Optional (NULL: put_lazy, else put): a lazy put of a key no reader can reach yet. */
    int (*put_new)(struct store *st, const char *key, const void *data, size_t len);
    /* A put that happens only if the object is still as the caller saw it (store_put_if). */
    int (*put_if)(struct store *st, const char *key, const void *data, size_t len,
                  const char *if_etag);
    /* Optional (NULL: read into memory, then put_new): put_new of len bytes of fd at off. */
    int (*put_new_from_fd)(struct store *st, const char *key, int fd, uint64_t off, size_t len);
    /* Optional (NULL: put_new_from_fd): see store_put_new_file. */
    int (*put_new_file)(struct store *st, const char *key, int fd, size_t len, int *kept);
    /* Optional (NULL: get, then put_new): put_new of a copy of object src at dst, made by the
     * store itself (a hard link on a local disk, CopyObject on S3): no bytes through us. size:
     * src's size when the caller knows it, else STORE_SIZE_UNKNOWN. */
    int (*copy)(struct store *st, const char *src, const char *dst, uint64_t size);
    /* Optional (NULL: nothing to do): make every lazy put durable. */
    int (*sync)(struct store *st);
    int (*del)(struct store *st, const char *key);
    int (*head)(struct store *st, const char *key, struct store_stat *out);
    int (*list)(struct store *st, const char *prefix, const char *delimiter, const char *token,
                size_t max_keys, struct store_list *out);
    /* Optional (NULL: store_list page by page): every key below prefix, in no order, each given
     * to fn with its stat or NULL (fn stops the walk with non-zero). */
    int (*list_keys)(struct store *st, const char *prefix,
                     int (*fn)(void *ctx, const char *key, const struct store_stat *st), void *ctx);
    /* Optional (NULL: the store has no such thing): store_open_object. */
    int (*open_object)(struct store *st, const char *key, int *fd, struct store_stat *out);
    /* Optional (NULL: the store has no such thing): store_abort_uploads. */
    int (*abort_uploads)(struct store *st, const char *prefix, size_t *aborted);
    void (*destroy)(struct store *st);
};

/* What a store was asked since it was opened, counted by the store_* wrappers (any thread). */
enum store_request {
    STORE_GET,
    STORE_PUT,
    STORE_HEAD,
    STORE_LIST,
    STORE_DELETE,
    STORE_COPY,
    STORE_REQUEST_KINDS
};

struct store_counters {
    _Atomic uint64_t requests[STORE_REQUEST_KINDS];
    _Atomic uint64_t bytes_read, bytes_written;
    _Atomic uint64_t failures; /* answers other than success, "no such object", ESTALE */
    _Atomic uint64_t retries;  /* attempts a backend made again (S3: timeouts, 5xx, 429) */
};

struct store {
    const struct store_ops *ops;
    struct store_counters counters; /* zero when the backend allocates the store */
};

/* A snapshot of st's counters. */
struct store_counts {
    uint64_t requests[STORE_REQUEST_KINDS];
    uint64_t bytes_read, bytes_written, failures, retries;
};
void store_counts(struct store *st, struct store_counts *out);
/* The name of a request kind in statistics ("get", "put", ...). */
const char *store_request_name(enum store_request kind);

/* A local directory as a bucket (HSDS's POSIX layout: key a/b/c is file <dir>/a/b/c). */
int store_posix_open(const char *dir, struct store **out);

/* Whole object; -EFBIG if it is larger than max bytes. */
int store_get(struct store *st, const char *key, size_t max, struct store_buf *out);
/* store_get shaped as a fetch callback (schema/pool.h's struct schema_fetch): st is a struct
 * store *; *data is malloc'd, the caller's to free. */
int store_get_bytes(void *st, const char *key, size_t max, unsigned char **data, size_t *len);
/* Bytes [off, off+len) (len may be STORE_RANGE_TO_END); a short result means end of object. */
/* The object as an open read-only descriptor (*fd, O_CLOEXEC, the caller's to close) and its
 * size and etag (*out, as store_head gives them): the bytes a get would read, for a reader
 * that hands them on without copying them (splice). Counted as a GET of size bytes.
 * -EOPNOTSUPP where the store keeps no files (S3, memory), -ENOENT, or -errno (logged). */
int store_open_object(struct store *st, const char *key, int *fd, struct store_stat *out);
/* True where every object is a local file (store_open_object works): a request costs system
 * calls, not a round trip to a server, nor a fee. */
int store_keeps_files(const struct store *st);
int store_get_range(struct store *st, const char *key, uint64_t off, uint64_t len,
                    struct store_buf *out);
int store_put(struct store *st, const char *key, const void *data, size_t len);
/*
 * The same, still atomic (a reader sees the old object or the new one), but durable only once
 * store_sync returns: for the many objects of a commit, made durable together before the one
 * put that publishes them (a local disk pays one sync instead of two per object; an object
 * store's puts are durable anyway).
 */
int store_put_lazy(struct store *st, const char *key, const void *data, size_t len);
/*
 * A put (durable, atomic) that happens only if the object is still the one the caller saw:
 * if_etag is the etag store_head gave for it, or NULL when the caller saw no object (then the
 * put only creates). -ESTALE when another writer replaced, created or deleted it meanwhile
 * (nothing written); other errors as store_put. Many mounts of one bucket use it for the
 * read-modify-write of a .domain.json, so that none loses another's change: S3 sends If-Match
 * / If-None-Match (a server that ignores them makes it a plain put); a local bucket compares
 * and renames under an flock of the object's directory (every put_if of the bucket's users
 * honours it, plain puts do not).
 */
int store_put_if(struct store *st, const char *key, const void *data, size_t len,
                 const char *if_etag);
/* A lazy put of a key that no reader can reach yet (an object of a root that no .domain.json
 * names): it need not even be atomic. After a failure or a crash the root is collected. */
int store_put_new(struct store *st, const char *key, const void *data, size_t len);
/*
 * store_put_new of the len bytes at off of file fd, which are never all in memory at once:
 * the way to put a big object (a whole staged file), whatever its size. A local disk copies
 * them in the kernel (copy_file_range; a read and write loop across file systems). S3 streams
 * them: one PutObject up to multipart_threshold, above it a multipart upload whose parts go
 * up in parallel (at most max_requests at once), each retried on its own as any request; a
 * failure that retries do not cure aborts the upload, so no parts are left behind, and no
 * object appears. The object exists only once every byte is in (S3 assembles it at the end).
 * fd is only read with pread: the caller's offset is untouched, and the file must not change
 * until this returns. -EFBIG: larger than the store takes (S3: 5 TiB).
 */
int store_put_new_from_fd(struct store *st, const char *key, int fd, uint64_t off, size_t len);
/*
 * store_put_new of the whole file fd (len bytes), where the object may become that file
 * itself: a local disk makes a hard link when the file is on the bucket's file system, so
 * the bytes are neither copied nor written twice. *kept is 1 when it did: from then on the
 * caller must never change the file in place (a copy first, then the change), since the
 * domain's object would change with it. Elsewhere this is store_put_new_from_fd, *kept 0.
 */
int store_put_new_file(struct store *st, const char *key, int fd, size_t len, int *kept);
/* store_put_new of the bytes of object src at key dst (a key no reader can reach yet): the
 * unchanged objects of a new version of a domain cost no bytes on the wire or on the disk
 * where the store can say "the same bytes" (hard link, CopyObject). -ENOENT: no object src.
 * For objects of a chunk's size: S3 makes it one CopyObject, whatever its size. */
int store_copy(struct store *st, const char *src, const char *dst);
/*
 * The same, for an object that may be big, whose size the caller has (store_head): S3 copies
 * one above multipart_threshold (and every one above 5 GiB, which CopyObject refuses) as a
 * multipart upload whose parts the server copies from ranges of src (UploadPartCopy), in
 * parallel, each retried on its own, the upload aborted when one fails for good, as
 * store_put_new_from_fd's parts. size STORE_SIZE_UNKNOWN: store_copy.
 */
int store_copy_sized(struct store *st, const char *src, const char *dst, uint64_t size);
int store_sync(struct store *st);
int store_delete(struct store *st, const char *key);
int store_head(struct store *st, const char *key, struct store_stat *out);
/*
 * One page of keys starting with prefix. With a delimiter, keys that contain it after the
 * prefix are folded into common prefixes. token: NULL for the first page, then next_token.
 * max_keys 0 means no limit: one page with every key (a backend that pages internally gathers
 * all pages).
 */
int store_list(struct store *st, const char *prefix, const char *delimiter, const char *token,
               size_t max_keys, struct store_list *out);
/*
 * Every key below prefix (no delimiter), in no particular order, handed to fn one at a time
 * with its size and etag when the listing has them (S3) or NULL (a local bucket, which stats
 * nothing here): the chunk keys of a dataset of a million chunks cost neither a million
 * entries in memory nor a stat each. fn returns 0 to go on, or a value that ends the walk and
 * is returned. 0, the store's -errno, or fn's value.
 */
int store_list_keys(struct store *st, const char *prefix,
                    int (*fn)(void *ctx, const char *key, const struct store_stat *st), void *ctx);
/* Every key below prefix (store_list_keys), collected: owned strings, in no order. */
struct store_keys {
    char **keys;
    size_t n, cap;
};
/* 0 or -errno; *out (zeroed first) is freed by store_keys_free, also after a failure. */
int store_collect_keys(struct store *st, const char *prefix, struct store_keys *out);
void store_keys_free(struct store_keys *k);
/*
 * Abort every multipart upload begun, and neither completed nor aborted, under a key that
 * starts with prefix (S3: ListMultipartUploads with that prefix, then AbortMultipartUpload of
 * each; the uploads of other prefixes are never touched). S3 keeps, and bills, the parts of an
 * upload whose writer died until it is aborted; the collector calls this for the roots it
 * removes. *aborted: how many went. 0 (also for a store without uploads: posix, memory, or a
 * server that lists none), or -errno when some could not be listed or aborted (logged).
 * Counted as one list request and a delete for each upload aborted.
 */
int store_abort_uploads(struct store *st, const char *prefix, size_t *aborted);
void store_close(struct store *st);

void store_buf_free(struct store_buf *buf);
void store_list_free(struct store_list *list);

/* 0 if key may be used with any backend, -EINVAL otherwise (see above). */
int store_key_check(const char *key);

#endif
