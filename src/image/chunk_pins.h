/*
 * chunk_pins: which version of each chunk object an image has served (its change token as
 * the store gave it with the bytes), so that no later load of the same chunk for that image
 * serves other bytes.
 *
 * The kernel keeps pages of a file, the chunk cache keeps chunks, and either lets go of them
 * at any time; a chunk loaded again is fetched again. HSDS rewrites chunk objects in place
 * (same key), so a second fetch may bring bytes of another version, and a reader would see
 * pages of two versions in one file. The first time a chunk is served, the token its bytes
 * came with is pinned; bytes with another token are refused (the caller answers EIO), and the
 * image is marked changed so that the next open builds a new version. Thread-safe.
 */
#ifndef H5OSFS_IMAGE_CHUNK_PINS_H
#define H5OSFS_IMAGE_CHUNK_PINS_H

#include <stdint.h>

struct chunk_pins;

/* Tokens: the store gave no change token (nothing is pinned or checked), or the object was
 * missing (served as the fill value: an object written there later is another version). */
#define CHUNK_PIN_UNKNOWN 0u
#define CHUNK_PIN_ABSENT 1u

/* An empty table (it allocates on the first pin); NULL when out of memory. */
struct chunk_pins *chunk_pins_new(void);
void chunk_pins_free(struct chunk_pins *p);
/* The token of a store etag ("" gives CHUNK_PIN_UNKNOWN). */
uint64_t chunk_pin_token(const char *etag);
/* Pin token for chunk `chunk` of dataset `dset`, or compare it with the pinned one: 0 when
 * it is the first or the same (or CHUNK_PIN_UNKNOWN), -ESTALE when another was pinned (*first
 * set to 1 the first time that chunk is refused, else 0: one log line per chunk), -ENOMEM
 * when the table cannot grow (nothing is pinned: the chunk is served unchecked, as before
 * this table; logged once). */
int chunk_pins_check(struct chunk_pins *p, uint32_t dset, uint64_t chunk, uint64_t token,
                     int *first);
/* How many chunks are pinned. */
uint64_t chunk_pins_count(struct chunk_pins *p);

#endif
