/* staging_recover: the commit at mount of what the journal kept staged, with the overlay an
 * interrupted r+ change had rebuilt from its saved ranges. See
 * include/h5osfs/staging/staging.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h5osfs/util/log.h"
#include "staging_int.h"

struct recovered_base {
    struct ingest_base base; /* first: what commit gets and gives back */
    struct overlay *overlay;
    int fd;
};

static void release_base(void *ctx, struct ingest_base *base)
{
    (void)ctx;
    struct recovered_base *r = (struct recovered_base *)base;
    overlay_free(r->overlay);
    if (r->fd >= 0)
        close(r->fd);
    free(r);
}

/* The overlay an interrupted r+ change had, from its saved ranges and its base's file. */
static int recover_overlay(struct staging *t, const struct journal_rec *rec, const char *text,
                           struct recovered_base *r)
{
    char *root = overlay_saved_root(text), *staged = journal_staged_path(t->commit.journal, rec);
    struct image *img = NULL;
    int rc = !root ? -EINVAL : !staged ? -ENOMEM : 0;
    if (rc == 0 && (r->fd = open(staged, O_RDWR | O_CLOEXEC)) < 0)
        rc = -errno;
    if (rc == 0)
        rc = t->hooks.base(t->hooks.ctx, rec->domain, root, &img);
    if (rc == 0)
        rc = overlay_new(img, root, t->hooks.cache, r->fd, &r->overlay);
    if (rc == 0)
        rc = overlay_restore(r->overlay, text);
    if (rc == 0 && schema_id_version(root) != 2)
        rc = overlay_materialize_all(r->overlay);
    if (rc != 0)
        log_error("%s: the version root %s that the staged file %s changes cannot be matched "
                  "again (%s): kept for a later mount",
                  rec->domain, root ? root : "?", staged ? staged : "?", strerror(-rc));
    image_put(img);
    free(root);
    free(staged);
    return rc;
}

static int recover_base(void *ctx, const struct journal_rec *rec, struct ingest_base **out)
{
    struct staging *t = ctx;
    char *text = NULL;
    *out = NULL;
    int rc = journal_read_base(t->commit.journal, rec, &text);
    if (rc == -ENOENT)
        return 0; /* no overlay: the staged file holds every byte */
    struct recovered_base *r = rc == 0 ? calloc(1, sizeof *r) : NULL;
    if (rc == 0 && !r)
        rc = -ENOMEM;
    if (r)
        r->fd = -1;
    if (rc == 0)
        rc = recover_overlay(t, rec, text, r);
    free(text);
    if (rc == 0 && schema_id_version(overlay_root(r->overlay)) == 2)
        rc = overlay_ingest_base(r->overlay, &r->base);
    if (rc == 0 && r->overlay && schema_id_version(overlay_root(r->overlay)) == 2) {
        *out = &r->base;
    } else if (r) {
        release_base(t, &r->base);
    }
    return rc;
}

size_t staging_recover(struct staging *t)
{
    journal_sweep(t->commit.journal); /* first: on a full disk, the space records need */
    struct commit_ctx c = t->commit;
    c.recover_base = recover_base;
    c.release_base = release_base;
    c.base_ctx = t;
    return commit_recover(&c);
}
