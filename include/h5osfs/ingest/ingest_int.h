/*
 * ingest_int.h: what the ingest files share.
 *
 *   ingest.c        entry points, the order of the steps and puts (no other file calls it)
 *   ingest_shared.c ids (§1.2), timestamps, changes: what every step uses (calls no other file)
 *   ingest_walk.c   the HDF5 file -> objects (first path, id, links) in file order, lookups
 *   ingest_base.c   what a changed copy keeps of its base
 *   ingest_json.c   objects -> the JSON HSDS stores (§3.2-§3.6), attributes
 *   ingest_filters.c  HDF5 filters -> HSDS filters (§5.2)
 *   ingest_chunking.c §5.4 chunk dims (calls no other file)
 *   ingest_data.c   datasets -> chunk objects (§6 bytes, raw copies)
 *   ingest_vds.c    virtual datasets -> their mappings (the "h5osfs" member; no chunks)
 *   ingest_vref.c   chunk-aligned virtual datasets -> also a chunk table over their source's
 *                   chunk objects (H5D_CHUNKED_REF_INDIRECT), which HSDS reads
 *   ingest_pool.c   worker threads that encode and put chunks, behind a bounded queue
 *   ingest_link.c   linked ingest: the file stored whole, datasets pointing into it (§8)
 *
 * Only the thread that called ingest_new touches HDF5; the workers see bytes.
 */
#ifndef H5OSFS_INGEST_INT_H
#define H5OSFS_INGEST_INT_H

#include <stddef.h>
#include <stdint.h>

#include <hdf5.h>
#include <jansson.h>

#include "h5osfs/codec/codec.h"
#include "h5osfs/ingest/ingest.h"
#include "h5osfs/schema/pool.h"
#include "h5osfs/util/strmap.h"

#define INGEST_MAX_RANK 32
#define INGEST_CHUNK_MIN (1u << 20) /* HSDS's min_chunk_size (§5.4) */
#define INGEST_CHUNK_MAX (4u << 20) /* HSDS's max_chunk_size */
#define INGEST_VLEN_ITEMSIZE 128    /* chunkUtil.DEFAULT_TYPE_SIZE */
#define INGEST_JSON_MAX (64u << 20)

/* A link of a group, in the group's order. */
struct ingest_link {
    char *name;
    H5L_type_t type; /* HARD, SOFT or EXTERNAL (user-defined links are left out) */
    size_t target;   /* HARD: index into ingest.objs */
    char *h5path;    /* SOFT, EXTERNAL */
    char *file;      /* EXTERNAL: the file name as the link stores it */
};

struct ingest_link_table;

/* An object reached by hard links from the root, once, under the first path found (or a chunk
 * table a linked dataset needs, which nothing links). */
struct ingest_obj {
    char id[SCHEMA_ID_BUF];
    char cls; /* 'g', 'd' or 't' */
    haddr_t addr;
    char *path;
    struct ingest_link *links; /* groups */
    size_t n_links;
    int track_order;                 /* groups: links tracked in creation order */
    int dropped;                     /* a dataset or datatype whose type has no HSDS JSON */
    json_t *json;                    /* what will be stored */
    char base_id[SCHEMA_ID_BUF];     /* the base object it is ("": none, a new object) */
    json_t *old;                     /* that object's stored JSON */
    int base_layout;                 /* a dataset that keeps the base's layout: its chunk grid is
                                   the base's, so unwritten chunks are copied in the store */
    int base_ref;                    /* ... and a *_REF layout: no chunk objects at all */
    int base_whole;                  /* stored as the base has it (a placeholder of the base's
                                   file): JSON and every chunk carried over, nothing read */
    int linked;                      /* a *_REF layout into the file stored whole: no chunks */
    struct ingest_link_table *table; /* a chunk table of this ingest: its entries */
};

struct ingest_pool;
struct ingest_vref;

struct ingest {
    const struct ingest_config *cfg;
    const char *log_name;
    const char *h5path;
    char root[SCHEMA_ID_BUF];
    hid_t file;
    int raw_fd;              /* the file, for raw chunk copies in the kernel; -1: none */
    uint64_t chunk_base;     /* what makes H5Dget_chunk_info's address a file offset */
    struct ingest_obj *objs; /* objs[0] is the root group */
    size_t n_objs, cap_objs;
    struct strmap *by_addr; /* "%llx" address -> index + 1 */
    struct ingest_stats *stats;
    double last_time;               /* timestamps only increase */
    const struct ingest_base *base; /* what the file started as, or NULL */
    struct strmap *by_base;         /* with a base: base id -> index + 1 of the object it is */
    struct strmap *carried;         /* base ids carried over (not in the file) */
    struct ingest_pool *pool;
    struct ingest_vref *vref; /* the virtual datasets that get a chunk table (NULL: none) */
    char link_from[STORE_KEY_MAX + 1]; /* r+: the base's linked file, which kept *_REF
                                           layouts now name under the new root ("": none) */
    char pool_ok[SCHEMA_ID_BUF];       /* the version pool the base may name files of ("" not yet
                                  * told: schema_pool_file_check) */
    char link_from_etag[SCHEMA_POOL_ETAG_BUF]; /* link_from a pool file: the etag its base
                                                * version kept ("" none) */
    /* Set where a JSON step ran out of memory and would otherwise have left something out
     * as if it were bad: the build fails instead (build_all), as with jansson's failures. */
    int out_of_memory;
};

/* ---- ingest_shared.c: what every step uses (it calls no other file) ---- */
double ingest_now(struct ingest *g);
/* A new non-root id of class cls ('g', 'd', 't') sharing the root's first 16 digits. */
int ingest_new_id(const struct ingest *g, char cls, char out[SCHEMA_ID_BUF]);
/* 1 if creation plist cpl (closed here; < 0: none) says get's order (links' or attributes')
 * is tracked. */
int ingest_order_tracked(hid_t cpl, herr_t (*get)(hid_t, unsigned *));
/* Count a change (something stored differently from the file) and log it. */
void ingest_change(struct ingest *g, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The object of the file that is base object base_id (ingest_base_identify), with its stored
 * JSON in ->old once ingest_base_load ran; NULL when the file has none, or before that. */
struct ingest_obj *ingest_by_base(const struct ingest *g, const char *base_id);

/* ---- ingest_base.c ---- */
/* A copy of JSON v of the base where every id of the base domain is the id it has in the new
 * root (same class and last 16 digits, the new root's first 16). NULL on ENOMEM. */
json_t *ingest_base_json(const struct ingest *g, const json_t *v);
/* o (cls, addr, a fresh id set) as the base object its header address says it is: then
 * o->base_id is that object and o->id keeps its last 16 digits. */
void ingest_base_identify(struct ingest *g, struct ingest_obj *o);
/* Load the stored JSON of every object of the file that the base has. 0, -EIO, -ENOMEM. */
int ingest_base_load(struct ingest *g);
/* After every JSON is built: keep what did not change (times; a dataset's layout and creation
 * properties where its chunk grid is the base's, see ingest.h). 0 or -errno. */
int ingest_base_settle(struct ingest *g);
/* Put back what the base's file did not show (struct ingest_kept): attributes and links of
 * the objects the file still has, placeholders as stored. 0 or -errno. */
int ingest_base_restore(struct ingest *g);
/* Store the base objects the new root needs but the file does not have (objects the base's file
 * left out, the chunk table of a kept *_REF_INDIRECT layout), and every chunk of those and of
 * placeholders, under the new root. 0 or -errno (logged). */
int ingest_base_carry(struct ingest *g);
/* 1 with the base's key of chunk idx of o when the base's file could not show that chunk (it
 * is copied as stored), else 0. */
int ingest_base_kept_chunk(const struct ingest *g, const struct ingest_obj *o, const uint64_t *idx,
                           int rank, char *key, size_t key_len);
/* Dataset o of the base, open as dset, whose chunks are not copied one by one (its grid is
 * not the file's): every clean chunk of the base is put into the file. 0 or -errno. */
int ingest_base_materialize(struct ingest *g, const struct ingest_obj *o, hid_t dset);

/* ---- ingest_walk.c ---- */
/* Discover every object and link from the root; ids are assigned by assign_id. */
int ingest_walk(struct ingest *g);
void ingest_objs_free(struct ingest *g);
/* The object a reference or committed type points at: index, or -1. */
long ingest_find_addr(const struct ingest *g, haddr_t addr);
/* The id of the object hid is (an open object of the file), or NULL. */
const char *ingest_id_of_object(const struct ingest *g, hid_t hid);
/* h5value_ref_id_fn over the ingest. */
int ingest_ref_id(void *ctx, const hobj_ref_t *ref, char id[39]);

/* ---- ingest_json.c ---- */
/* The JSON of object o (o->json), created/lastModified set to now. 0, -EIO, -ENOMEM. */
int ingest_build_json(struct ingest *g, struct ingest_obj *o);
/* HSDS's type JSON of tid, with "id" when it is a committed type of the file, or the closest
 * type HSDS has (logged as a change of what at path); NULL with a reason in why when HSDS has
 * none. */
json_t *ingest_type_json(struct ingest *g, hid_t tid, const char *path, const char *what, char *why,
                         size_t why_len);

/* ---- ingest_filters.c ---- */
/* The dataset's filters in HSDS form (NULL: none); what cannot be kept is logged. */
json_t *ingest_filters_json(struct ingest *g, const char *path, hid_t dcpl);
/* 1 if the source's chunk bytes can be copied as they are: no filter, [deflate] or
 * [shuffle, deflate], and, given the filters to be stored (NULL: the file's own), the
 * same ones there. */
int ingest_filters_raw(hid_t dcpl, const struct codec_spec *stored);

/* ---- ingest_chunking.c (it calls no other file) ---- */
/* §5.4: chunk dims for a dataset of rank (0: scalar) with dims and maxdims as the shape JSON
 * states them (maxdims NULL: none stated; 0 = unlimited), element size (0: variable length),
 * starting from the requested chunk dims (NULL: guessChunk). */
void ingest_chunk_dims(int rank, const uint64_t *dims, const uint64_t *maxdims, size_t itemsize,
                       const uint64_t *request, uint64_t *out);

/* ---- ingest_data.c ---- */
/* Store the chunks of dataset o (its JSON built). 0 or -errno (logged). */
int ingest_dataset_chunks(struct ingest *g, struct ingest_obj *o);
/* ---- ingest_vds.c ---- */
/* The "h5osfs" member of a virtual dataset (layout dcpl): {"virtual": [mapping, ...]}
 * (doc/image.md). 0; -EIO with why: a mapping cannot be read or said; -ENOMEM. */
int ingest_vds_json(hid_t dcpl, json_t **member, char *why, size_t why_len);
/* 1 when the dataset JSON keeps a virtual dataset's mappings (no chunk objects), else 0. */
int ingest_is_virtual(const json_t *dataset);
/* A virtual dataset's first mapping whose source HDF5 cannot find from the file (dcpl of a
 * virtual layout): 1 with what[] saying which (file, dataset) or that the mappings cannot be
 * read, 0 when every source is there, -ENOMEM. Only for the warning: the mappings are kept
 * either way, never the fill values HDF5 reads for a missing source. */
int ingest_vds_missing_source(struct ingest *g, hid_t dcpl, char *what, size_t what_len);

/* ---- ingest_vref.c ---- */
/* Once every JSON is built, before anything is stored: the virtual datasets whose mappings are
 * all chunk-aligned into one chunked dataset of the file (same fixed-size type and rank) are
 * noted in g->vref, and that source's stored grid is pinned to its HDF5 chunk. 0 or -ENOMEM. */
int ingest_vref_plan(struct ingest *g);
/* Once the chunks are stored, before the datasets' JSON: each noted dataset gets its chunk
 * table (the source's chunk objects, listed for their sizes) and the H5D_CHUNKED_REF_INDIRECT
 * layout naming it; one that no longer fits is left a plain VDS (logged). 0 or -errno. */
int ingest_vref_tables(struct ingest *g);
void ingest_vref_free(struct ingest *g);

/* ---- ingest_link.c ---- */
/* With cfg->link, no base and a v2 root: every dataset that can be read from the file as it
 * stores it gets hsload's *_REF layout (o->linked; chunk tables appended to g->objs). 0 or
 * -errno (logged). */
int ingest_link_layouts(struct ingest *g);
/* Store the file whole under the new root when a dataset links into it, or (r+) copy the
 * base's file there when a kept layout names it. 0 or -errno (logged). */
int ingest_link_store_file(struct ingest *g);
/* The chunks of chunk table o (o->table), submitted to the pool. 0 or -errno. */
int ingest_link_table_chunks(struct ingest *g, struct ingest_obj *o);
void ingest_link_table_free(struct ingest_link_table *t);
/* r+: a *_REF layout of dataset JSON that names the base's own linked file names the new
 * root's copy of it instead (stored by ingest_link_store_file). 0 or -ENOMEM, -EIO. */
int ingest_link_rebase(struct ingest *g, json_t *dataset);

/* ---- ingest_pool.c ---- */
struct ingest_job {
    char key[STORE_KEY_MAX + 1];
    char copy_of[STORE_KEY_MAX + 1]; /* non-empty: copy this object in the store instead */
    unsigned char *bytes; /* owned by the job: freed by the worker; NULL: the bytes are */
    int src_fd;           /* len bytes of this file at src_off (raw copies) */
    uint64_t src_off;
    size_t len;
    int encode; /* 1: codec_encode(spec) first; 0: put as it is */
    int raw;    /* a copy of the file's bytes (for the stats) */
    struct codec_spec spec;
    const char *path; /* for log lines: lives as long as the ingest */
};
int ingest_pool_start(struct ingest *g, unsigned workers, struct ingest_pool **out);
/* Queue a job (waits while the queue is full). Takes bytes in any case. 0, or the first
 * error any worker has met (then the caller stops). */
int ingest_pool_submit(struct ingest_pool *p, struct ingest_job *job);
/* Wait for every queued job; the first error, or 0. */
int ingest_pool_drain(struct ingest_pool *p);
/* Drain, stop the threads and free. The first error, or 0. */
int ingest_pool_stop(struct ingest_pool *p);
/* A store error as ingest reports it: -ENOSPC and -ENOMEM as they are, anything else -EIO. */
int ingest_store_error(int rc);
/* Put a JSON object (hjson_dumps) at key, counting bytes. 0 or -errno (logged). */
int ingest_put_json(struct ingest *g, const char *key, const json_t *doc, const char *path);

#endif
