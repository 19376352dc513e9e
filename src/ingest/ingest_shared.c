/*
 * ingest_shared: what every step of an ingest uses: new ids (§1.2), timestamps, the count and
 * log line of each change, whether a group tracks an order, the base's objects by id. It calls
 * no other file of the ingest, so the steps do not call back into ingest.c, which runs them
 * (tests/meson.build, --one-way).
 */
#include "h5osfs/ingest/ingest.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>

#include <uuid/uuid.h>

#include "h5osfs/util/clock.h"
#include "h5osfs/util/log.h"
#include "h5osfs/util/strmap.h"
#include "h5osfs/ingest/ingest_int.h"

#define TIME_STEP 1e-6 /* timestamps of one ingest are distinct and increasing */

/* ---- ids (§1.2) ---- */

static int random_hex(char *out, size_t n)
{
    unsigned char bytes[32];
    if (n > 2 * sizeof bytes || getrandom(bytes, (n + 1) / 2, 0) != (ssize_t)((n + 1) / 2))
        return -EIO;
    for (size_t i = 0; i < n; i++)
        out[i] = "0123456789abcdef"[(bytes[i / 2] >> (i % 2 ? 0 : 4)) & 15];
    return 0;
}

static void format_id(char cls, const char *hex, char out[SCHEMA_ID_BUF])
{
    snprintf(out, SCHEMA_ID_BUF, "%c-%.8s-%.8s-%.4s-%.6s-%.6s", cls, hex, hex + 8, hex + 16,
             hex + 20, hex + 26);
}

int ingest_new_root_id(char out[SCHEMA_ID_BUF])
{
    char hex[32];
    if (random_hex(hex, 16) != 0)
        return -EIO;
    for (int i = 0; i < 16; i++)
        hex[16 + i] = (char)schema_hex_rot(hex[i]); /* the root rule (§1.3) */
    format_id('g', hex, out);
    return 0;
}

/* "<cls>-" + a time-based UUID, as HSDS mints every id of a v1 domain (uuid.uuid1(), §1.2). */
static void new_v1_id(char cls, char out[SCHEMA_ID_BUF])
{
    uuid_t u;
    char text[37];
    uuid_generate_time(u);
    uuid_unparse_lower(u, text);
    snprintf(out, SCHEMA_ID_BUF, "%c-%s", cls, text);
}

int ingest_new_root_id_for(const char *base_root, char out[SCHEMA_ID_BUF])
{
    if (base_root && schema_id_version(base_root) == 1) {
        new_v1_id('g', out);
        return 0;
    }
    return ingest_new_root_id(out);
}

int ingest_new_id(const struct ingest *g, char cls, char out[SCHEMA_ID_BUF])
{
    char hex[32];
    if (schema_id_version(g->root) == 1) {
        new_v1_id(cls, out); /* a v1 domain stays v1 (§11): no digits shared with the root */
        return 0;
    }
    const char *r = g->root + 2; /* "A-B-..." : the first 16 digits come from the root */
    memcpy(hex, r, 8);
    memcpy(hex + 8, r + 9, 8);
    if (random_hex(hex + 16, 16) != 0)
        return -EIO;
    format_id(cls, hex, out);
    return 0;
}

/* ---- timestamps, changes, order ---- */

int ingest_order_tracked(hid_t cpl, herr_t (*get)(hid_t, unsigned *))
{
    unsigned flags = 0;
    if (cpl < 0)
        return 0;
    if (get(cpl, &flags) < 0)
        flags = 0;
    H5Pclose(cpl);
    return (flags & H5P_CRT_ORDER_TRACKED) != 0;
}

double ingest_now(struct ingest *g)
{
    double t = clock_wall();
    if (t <= g->last_time)
        t = g->last_time + TIME_STEP;
    g->last_time = t;
    return t;
}

void ingest_change(struct ingest *g, const char *path, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    if (vsnprintf(msg, sizeof msg, fmt, ap) < 0)
        msg[0] = '\0';
    va_end(ap);
    log_warn("%s: %s: %s", g->log_name, path, msg);
    g->stats->changes++;
}

/* ---- the base's objects ---- */

struct ingest_obj *ingest_by_base(const struct ingest *g, const char *base_id)
{
    uintptr_t i = g->by_base ? (uintptr_t)strmap_get(g->by_base, base_id) : 0;
    return i && i <= g->n_objs ? &g->objs[i - 1] : NULL; /* none once the objects are freed */
}
