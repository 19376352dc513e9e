/*
 * overlay: a staged copy of one version of a domain (an r+ change) whose chunk bytes are not
 * copied. The staged file starts as the version's file without its chunk extents (sparse
 * holes there); those ranges stay *clean* and read from the version's image until something
 * writes into them: a write that covers a clean range whole just makes it dirty, one that
 * covers a part first copies the rest of the range in (copy on write, one chunk at a time).
 * A commit then copies each chunk that is still clean from the stored object inside the store
 * (store_copy) and reads only what was written. So opening a large domain r+ and changing one
 * value costs its metadata and one chunk, not its size.
 *
 * Not thread-safe: the staged entry's lock serialises every call.
 */
#ifndef H5OSFS_WRITE_OVERLAY_H
#define H5OSFS_WRITE_OVERLAY_H

#include <stdint.h>
#include <sys/types.h>

#include "h5osfs/cache/cache.h"
#include "h5osfs/image/image.h"
#include "h5osfs/ingest/ingest.h"

struct overlay;

/* An overlay on base (a reference is taken), the version whose root id is root, for the
 * staged file fd (not owned). 0 or -ENOMEM. */
int overlay_new(struct image *base, const char *root, struct chunk_cache *cache, int fd,
                struct overlay **out);
void overlay_free(struct overlay *o);

/* The base version's root id. */
const char *overlay_root(const struct overlay *o);

/* Write the base's file into the (empty) staged file, leaving its chunk extents as holes
 * (they stay clean); *size gets the file's size. 0 or -errno. */
int overlay_fill(struct overlay *o, uint64_t *size);

/* Bytes [off, off+len) of the staged file, of size bytes: clean ranges from the base, the rest
 * from the file. The count read (short only at size) or -errno. */
ssize_t overlay_read(struct overlay *o, uint64_t size, void *buf, size_t len, uint64_t off);

/* Call before writing [off, off+len): clean ranges the write covers in part are copied into
 * the file first, those it covers whole are dirty from now on. 0; 1 when the ranges must be
 * saved again (overlay_save, then overlay_saved) before the write: a range that holds no
 * whole file-system block stopped being clean (copied in, also when covered whole), and a
 * restore could not tell it was written; or -errno. */
int overlay_before_write(struct overlay *o, uint64_t off, uint64_t len);

/* Call before truncating the file to size: a clean range across size is copied in up to size,
 * those beyond it are forgotten. 0, 1 (as overlay_before_write) or -errno. */
int overlay_before_truncate(struct overlay *o, uint64_t size);

/* The text of overlay_save is durable now: 1 is not answered again until another range
 * without a whole block stops being clean. */
void overlay_saved(struct overlay *o);

/* Copy every clean range into the file: it then holds every byte. 0 or -errno. */
int overlay_materialize_all(struct overlay *o);

/* The base a commit of the staged file passes to ingest (ingest.h); valid while o lives.
 * 0 or -ENOMEM. */
int overlay_ingest_base(struct overlay *o, struct ingest_base *out);

/* The base's root and clean ranges as text, saved durably at the fill and at each commit,
 * to find them again after a crash; and the other way: the overlay of the text's ranges, but
 * those with data in a whole file-system block inside (written since: a write into a clean
 * range writes all of it). -EINVAL when the text is not such text or names a range the base
 * has no chunk extent for (the base changed since). */
int overlay_save(const struct overlay *o, char **text);
int overlay_restore(struct overlay *o, const char *text);
/* The root named by text from overlay_save (a new string), or NULL. */
char *overlay_saved_root(const char *text);

#endif
