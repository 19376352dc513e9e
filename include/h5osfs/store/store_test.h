/*
 * store_test: two stores for tests, behind the contract of store.h (as s3backer's test_io and
 * mountpoint-s3's failure client): a bucket in memory, and a wrapper that makes any store fail
 * on purpose. The modules above the store (commit, gc, ns, the image builder) are driven over
 * them without a mount, a disk or a server, and their failure paths can be reached at will.
 *
 * A header of their own, not store.h: store.h is the contract every real backend keeps and
 * the daemon mounts; nothing the daemon runs opens these two (no mount option names them), so
 * the main contract stays about the backends users have.
 */
#ifndef H5OSFS_STORE_TEST_H
#define H5OSFS_STORE_TEST_H

#include <stddef.h>
#include <stdint.h>

#include "h5osfs/store/store.h"

/*
 * A bucket in memory: keys in one sorted array (byte order), so listings with prefix,
 * delimiter (any string, as S3), token (the last item of the previous page) and max_keys
 * answer as posix and S3 do. The namespace is flat, as S3's: "a" and "a/b" may both be
 * objects (a local bucket refuses that with -EISDIR / -EIO). The etag is the hex MD5 of the
 * content, as S3 and HSDS give it for a plain put; mtime is the wall clock at the put.
 * put_if compares and swaps under the store's lock. Thread-safe (one rwlock). 0 or -ENOMEM.
 */
int store_mem_open(struct store **out);

/* The operations a fault rule can target, and whose calls the faulty store counts. */
enum faulty_op {
    FAULTY_GET, /* store_get and store_get_range */
    FAULTY_HEAD,
    FAULTY_PUT, /* store_put, put_lazy, put_new, put_new_from_fd */
    FAULTY_PUT_IF,
    FAULTY_COPY,
    FAULTY_DELETE,
    FAULTY_LIST, /* each page (store_list_keys goes page by page through here) */
    FAULTY_SYNC,
    FAULTY_OPS
};
#define FAULTY_MASK(op) (1u << (op))

enum faulty_mode {
    FAULTY_FAIL,     /* return err; the inner store never sees the call */
    FAULTY_AFTER,    /* the inner store does the call, then err is returned: "the reply
                           was lost" (a put or delete that took effect but looked failed) */
    FAULTY_TRUNCATE, /* GET: only the first `keep` bytes (and success) */
    FAULTY_GARBLE,   /* GET: every byte inverted (and success); LIST: every key and prefix
                           cut to half its length, its last byte inverted (names that are
                           not below the prefix asked for, as a broken server may send) */
};

struct faulty_rule {
    unsigned ops;        /* FAULTY_MASK bits; 0 means every operation */
    const char *pattern; /* fnmatch(3) glob the key (a listing's prefix) must match, no flags
                           ('*' matches '/'); NULL matches every key */
    uint64_t nth;        /* the first matching call that fires (1 is the first); 0 as 1 */
    uint64_t times;      /* how many matching calls fire from there on; 0: every one */
    enum faulty_mode mode;
    int err;     /* FAIL, AFTER: the negative errno returned (-EIO if 0) */
    size_t keep; /* TRUNCATE: bytes kept */
};

/* One call the faulty store was given, in the order they came (kept for tests to read). */
struct faulty_call {
    enum faulty_op op;
    char *key; /* the key; a listing's prefix; a copy's destination; "" for sync */
    int rc;    /* what the caller got */
    int fired; /* a rule changed the answer */
};

/*
 * A store that passes every call to inner (which it does not own: close it after this one)
 * unless a rule fires. Rules are checked in the order added; the first that matches a call
 * and is due decides. Every call is counted and recorded, whether a rule fired or not. The
 * optional operations are passed through the store_* wrappers, so inner's fallbacks apply.
 * Thread-safe. 0 or -ENOMEM.
 */
int store_faulty_open(struct store *inner, struct store **out);
/* Add a rule (the pattern is copied). 0, -EINVAL (not a faulty store, bad mode), -ENOMEM. */
int store_faulty_add(struct store *st, const struct faulty_rule *rule);
/* Remove every rule; counters and the record stay. */
void store_faulty_clear(struct store *st);
/* Calls of op so far (all keys). */
uint64_t store_faulty_calls(struct store *st, enum faulty_op op);
/* Calls of op whose key matches glob (NULL: every key). */
uint64_t store_faulty_calls_matching(struct store *st, enum faulty_op op, const char *glob);
/* How many calls a rule changed so far. */
uint64_t store_faulty_fired(struct store *st);
/* The record of calls; valid until the next call to the store or store_faulty_reset. Read it
 * while no call is running. */
const struct faulty_call *store_faulty_record(struct store *st, size_t *n);
/* Forget the counters and the record (rules stay). */
void store_faulty_reset(struct store *st);

#endif
