/*
 * recent: the domain versions that lookups handed to the kernel in the last few seconds, so
 * that the open that follows a lookup gets the version it looked up even when the domain was
 * replaced in between (a cp of this mount, a change seen after the ttl).
 *
 * The kernel opens the inode its lookup returned. When that inode's version is no longer the
 * path's, the open would fail with ESTALE and the kernel looks the name up once more; on a busy
 * machine a domain replaced in a loop can be replaced again before that second open, which
 * then fails for the program. An image kept here is the version whole: a commit makes a new
 * root and leaves the old one's objects for the collector's grace period (GC_GRACE, far longer
 * than RECENT_SECONDS), and an open holds them from then on. Bounded: RECENT_MAX images, each
 * for RECENT_SECONDS after its last lookup. Thread-safe.
 */
#ifndef H5OSFS_FS_RECENT_H
#define H5OSFS_FS_RECENT_H

#include <stdint.h>

#include "h5osfs/image/image.h"

#define RECENT_MAX 64
#define RECENT_SECONDS 5.0

struct recent_images;

int recent_new(struct recent_images **out);
void recent_free(struct recent_images *r);

/* A lookup handed out img's version (the table takes its own reference). */
void recent_add(struct recent_images *r, struct image *img);

/* The image of version serial if a lookup handed it out in the last RECENT_SECONDS (a new
 * reference), else NULL. */
struct image *recent_find(struct recent_images *r, uint64_t serial);

#endif
