/* chunk_pins: an open-addressing table (dataset, chunk) -> token, linear probing, grown at
 * half full: 24 bytes per chunk an image has served. */
#include "chunk_pins.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "h5osfs/util/log.h"
#include "h5osfs/util/strmap.h"

struct pin {
    uint64_t chunk;
    uint32_t dset;
    uint32_t refused; /* another token was refused already (and said so) */
    uint64_t token;   /* CHUNK_PIN_UNKNOWN: a free slot */
};

struct chunk_pins {
    pthread_mutex_t lock;
    struct pin *slots;
    uint64_t cap; /* a power of two, or 0 */
    uint64_t used;
    int warned; /* the table could not grow: said once */
};

struct chunk_pins *chunk_pins_new(void)
{
    struct chunk_pins *p = calloc(1, sizeof *p);
    if (p && pthread_mutex_init(&p->lock, NULL) != 0) {
        free(p);
        return NULL;
    }
    return p;
}

void chunk_pins_free(struct chunk_pins *p)
{
    if (!p)
        return;
    pthread_mutex_destroy(&p->lock);
    free(p->slots);
    free(p);
}

/* Kept clear of the two reserved tokens. */
uint64_t chunk_pin_token(const char *etag)
{
    if (!etag || !etag[0])
        return CHUNK_PIN_UNKNOWN;
    uint64_t h = strmap_hash(etag);
    return h < 2 ? h + 2 : h;
}

static uint64_t slot_of(uint32_t dset, uint64_t chunk, uint64_t cap)
{
    uint64_t h = (chunk ^ ((uint64_t)dset << 40)) * 0x9E3779B97F4A7C15ull;
    return (h ^ (h >> 29)) & (cap - 1);
}

static struct pin *find(struct pin *slots, uint64_t cap, uint32_t dset, uint64_t chunk)
{
    for (uint64_t i = slot_of(dset, chunk, cap);; i = (i + 1) & (cap - 1)) {
        struct pin *s = &slots[i];
        if (s->token == CHUNK_PIN_UNKNOWN || (s->dset == dset && s->chunk == chunk))
            return s;
    }
}

static int grow(struct chunk_pins *p)
{
    uint64_t cap = p->cap ? p->cap * 2 : 64;
    struct pin *slots = cap <= SIZE_MAX / sizeof *slots ? calloc(cap, sizeof *slots) : NULL;
    if (!slots)
        return -ENOMEM;
    for (uint64_t i = 0; i < p->cap; i++)
        if (p->slots[i].token != CHUNK_PIN_UNKNOWN)
            *find(slots, cap, p->slots[i].dset, p->slots[i].chunk) = p->slots[i];
    free(p->slots);
    p->slots = slots;
    p->cap = cap;
    return 0;
}

/* Pin token in an empty slot, growing the table first when half full. 0 or -ENOMEM. */
static int insert(struct chunk_pins *p, uint32_t dset, uint64_t chunk, uint64_t token)
{
    if ((p->used + 1) * 2 > p->cap && grow(p) != 0) {
        if (!p->warned)
            log_warn("chunk pins: out of memory: chunks loaded again are not checked");
        p->warned = 1;
        return -ENOMEM;
    }
    *find(p->slots, p->cap, dset, chunk) = (struct pin){ chunk, dset, 0, token };
    p->used++;
    return 0;
}

int chunk_pins_check(struct chunk_pins *p, uint32_t dset, uint64_t chunk, uint64_t token,
                     int *first)
{
    *first = 0;
    if (token == CHUNK_PIN_UNKNOWN)
        return 0;
    pthread_mutex_lock(&p->lock);
    struct pin *s = p->cap ? find(p->slots, p->cap, dset, chunk) : NULL;
    int rc;
    if (!s || s->token == CHUNK_PIN_UNKNOWN) {
        rc = insert(p, dset, chunk, token);
    } else if (s->token == token) {
        rc = 0;
    } else {
        *first = !s->refused;
        s->refused = 1;
        rc = -ESTALE;
    }
    pthread_mutex_unlock(&p->lock);
    return rc;
}

uint64_t chunk_pins_count(struct chunk_pins *p)
{
    pthread_mutex_lock(&p->lock);
    uint64_t n = p->used;
    pthread_mutex_unlock(&p->lock);
    return n;
}
