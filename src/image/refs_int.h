/* refs_int.h: what the files of the reference layouts share (refs.c the linked-file layouts,
 * refs_table.c the chunk tables, refs_pieces.c the keys and pieces, refs_read.c the reads). */
#ifndef H5OSFS_IMAGE_REFS_INT_H
#define H5OSFS_IMAGE_REFS_INT_H

#include <stdint.h>

#include "build.h"

#define REF_GRID_MAX 10000000u /* linked chunks (pieces, contiguous chunks) one dataset may have */
#define REF_RANGE_MAX (256u << 20) /* largest byte range one chunk may need */

struct piece_list {
    struct image_dataset *ds; /* pieces are appended to ds->pieces */
    size_t cap;
};

/* uri's key appended to ds->uris once (*index its place); in_pool: a pool object. 0 or -errno. */
int refs_add_uri(struct builder *b, struct image_dataset *ds, const char *uri, int in_pool,
                 uint32_t *index, char *why, size_t why_len);

/* A non-negative JSON integer into *out. 0 or -EINVAL. */
int refs_json_u64(const json_t *v, uint64_t *out);

/* Append piece to l's dataset (at most REF_GRID_MAX). 0, -EINVAL (why) or -ENOMEM. */
int refs_add_piece(struct piece_list *l, struct ref_piece piece, char *why, size_t why_len);

/* Sort ds's pieces, one per place; *out the chunks that have any, in order. 0 or -ENOMEM. */
int refs_present_chunks(struct image_dataset *ds, uint64_t **out, size_t *n);

/* The pool a layout names ("h5osfs": {"pool": P}), or NULL. */
const char *refs_layout_pool(const json_t *lay);

/* Is key, a pool file a version's linked layout names, a file of the domain's own pool
 * (schema_pool_file_check; the pool kept for the rest of the build)? 0 or -EINVAL (why). */
int refs_pool_file_owned(struct builder *b, const char *key, char *why, size_t why_len);

/* H5D_CHUNKED_REF_INDIRECT layout lay of ds: its pieces, *chunks those present. file_in_pool:
 * its file_uri was checked to name a file of the domain's pool. 0 or -errno. */
int refs_indirect(struct builder *b, const json_t *lay, int file_in_pool, struct image_dataset *ds,
                  uint64_t **chunks, size_t *n, char *why, size_t why_len);

#endif
