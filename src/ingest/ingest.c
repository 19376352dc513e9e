/*
 * ingest: see include/h5osfs/ingest/ingest.h. This file holds the order of the work: walk the file
 * (ids: the base's where the base knows the object, ingest_base.c), build every JSON, keep
 * what the base had unchanged, store the chunks through the worker pool, then datatypes,
 * datasets, groups, and the root group last.
 */
#include "h5osfs/ingest/ingest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h5osfs/h5json/h5type.h"
#include "h5osfs/schema/hjson.h"
#include "h5osfs/util/log.h"
#include "h5osfs/ingest/ingest_int.h"

static void stage(struct ingest *g, enum ingest_stage s)
{
    if (g->cfg->on_stage)
        g->cfg->on_stage(g->cfg->ctx, s);
}

/* ---- writing ---- */

static int put_object(struct ingest *g, struct ingest_obj *o)
{
    char key[STORE_KEY_MAX + 1];
    if (o->dropped || !o->json)
        return 0;
    if (schema_obj_key(o->id, key, sizeof key) != 0)
        return -EIO;
    if (o->cls == 'g')
        g->stats->groups++;
    else if (o->cls == 'd')
        g->stats->datasets++;
    else
        g->stats->datatypes++;
    return ingest_put_json(g, key, o->json, o->path);
}

static int put_class(struct ingest *g, char cls)
{
    int rc = 0;
    for (size_t i = 1; i < g->n_objs && rc == 0; i++)
        if (g->objs[i].cls == cls)
            rc = put_object(g, &g->objs[i]);
    return rc;
}

static int build_all(struct ingest *g)
{
    static const char order[] = "tdg";
    unsigned long failures = hjson_alloc_failures();
    int rc = 0;
    for (int pass = 0; pass < 3 && rc == 0; pass++)
        for (size_t i = 0; i < g->n_objs && rc == 0; i++)
            if (g->objs[i].cls == order[pass])
                rc = ingest_build_json(g, &g->objs[i]);
    /* a member jansson could not add is missing without an error: such JSON is never put */
    if (rc == 0 && (hjson_alloc_failures() != failures || g->out_of_memory)) {
        log_error("%s: out of memory while the JSON of %s was built", g->log_name, g->h5path);
        rc = -ENOMEM;
    }
    return rc;
}

static int store_chunks(struct ingest *g)
{
    unsigned workers = g->cfg->workers ? g->cfg->workers : 1;
    int rc = ingest_pool_start(g, workers, &g->pool);
    for (size_t i = 0; i < g->n_objs && rc == 0; i++)
        if (g->objs[i].cls == 'd')
            rc = ingest_dataset_chunks(g, &g->objs[i]);
    if (rc == 0 && g->base)
        rc = ingest_base_carry(g);
    int prc = ingest_pool_stop(g->pool);
    g->pool = NULL;
    return rc ? rc : prc;
}

static int write_all(struct ingest *g)
{
    int rc = store_chunks(g);
    if (rc == 0)
        rc = ingest_link_store_file(g); /* after the carried objects: they may name it */
    if (rc == 0)
        rc = ingest_vref_tables(g); /* the sizes of the chunks just stored */
    if (rc != 0)
        return rc;
    stage(g, INGEST_STAGE_CHUNKS_DONE);
    if ((rc = put_class(g, 't')) || (rc = put_class(g, 'd')) || (rc = put_class(g, 'g')))
        return rc;
    stage(g, INGEST_STAGE_METADATA_DONE);
    if ((rc = put_object(g, &g->objs[0])) != 0)
        return rc;
    stage(g, INGEST_STAGE_ROOT_DONE);
    return 0;
}

/* ---- entry points ---- */

/* HDF5 1.14.4 made H5Dget_chunk_info(_by_coord) count the user block (HDF5 PR 4236); before,
 * its addresses are HDF5 addresses. The library that runs decides, not the headers. */
static int chunk_info_counts_user_block(void)
{
    unsigned maj = 0, min = 0, rel = 0;
    if (H5get_libversion(&maj, &min, &rel) < 0)
        return 0;
    return maj > 1 || (maj == 1 && (min > 14 || (min == 14 && rel >= 4)));
}

static int open_file(struct ingest *g)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* failures are logged by us, once */
    htri_t ok = H5Fis_hdf5(g->h5path);     /* H5Fis_accessible is 1.12 */
    g->file = ok > 0 ? H5Fopen(g->h5path, H5F_ACC_RDONLY, H5P_DEFAULT) : H5I_INVALID_HID;
    if (g->file < 0) {
        log_error("%s: %s is not an HDF5 file HDF5 can open", g->log_name, g->h5path);
        return -EINVAL;
    }
    /* raw chunks go from this fd to the store (copy_file_range) */
    hid_t fcpl = H5Fget_create_plist(g->file);
    hsize_t userblock = 0;
    if (fcpl >= 0 && H5Pget_userblock(fcpl, &userblock) >= 0)
        g->raw_fd = open(g->h5path, O_RDONLY | O_CLOEXEC);
    g->chunk_base = chunk_info_counts_user_block() ? 0 : userblock;
    if (fcpl >= 0)
        H5Pclose(fcpl);
    return 0;
}

static int run(struct ingest *g)
{
    int rc = open_file(g);
    if (rc != 0)
        return rc;
    if (!(g->by_addr = strmap_new()))
        rc = -ENOMEM;
    if (rc == 0)
        rc = ingest_walk(g);
    if (rc == 0 && g->base)
        rc = ingest_base_load(g);
    if (rc == 0)
        rc = build_all(g);
    if (rc == 0)
        rc = ingest_vref_plan(g);
    if (rc == 0)
        rc = ingest_link_layouts(g);
    if (rc == 0 && g->base)
        rc = ingest_base_settle(g);
    if (rc == 0 && g->base)
        rc = ingest_base_restore(g);
    if (rc == 0)
        rc = write_all(g);
    ingest_vref_free(g);
    ingest_objs_free(g);
    strmap_free(g->by_addr, NULL);
    if (g->raw_fd >= 0)
        close(g->raw_fd);
    if (H5Fclose(g->file) < 0 && rc == 0) {
        log_error("%s: %s could not be closed", g->log_name, g->h5path);
        rc = -EIO;
    }
    return rc;
}

/* A v2 root group id, or any v1 group id (a v1 root has no rule of its own, §11). */
static int is_new_root(const char *root)
{
    return schema_id_is_root(root) == 1 ||
           (schema_id_version(root) == 1 && schema_id_class(root) == 'g');
}

int ingest_new(const struct ingest_config *cfg, const char *h5path, const char *log_name,
               const char *root, const struct ingest_base *base, struct ingest_stats *stats)
{
    struct ingest g = { .cfg = cfg,
                        .log_name = log_name,
                        .h5path = h5path,
                        .stats = stats,
                        .base = base,
                        .file = H5I_INVALID_HID,
                        .raw_fd = -1 };
    memset(stats, 0, sizeof *stats);
    if (!is_new_root(root) ||
        (base && (schema_id_is_root(base->root) != 1 || schema_id_is_root(root) != 1))) {
        log_error("%s: %s is not a root group id this ingest can write (a v2 root, or a v1 "
                  "group id with no base)",
                  log_name, base ? base->root : root);
        return -EINVAL;
    }
    if (h5type_register_stand_ins() != 0) {
        log_error("%s: HDF5 refused the bitfield conversion h5osfs registers", log_name);
        return -EIO;
    }
    snprintf(g.root, sizeof g.root, "%s", root);
    int rc = run(&g);
    strmap_free(g.by_base, NULL);
    strmap_free(g.carried, NULL);
    if (rc == 0)
        log_info("%s: stored from %s: %llu groups, %llu datasets (%llu linked to the file, "
                 "%llu bytes stored whole), %llu chunks written (%llu "
                 "copied raw), %llu chunks copied from %s (%llu told at once), %llu objects kept, "
                 "%llu changes",
                 log_name, h5path, (unsigned long long)stats->groups,
                 (unsigned long long)stats->datasets, (unsigned long long)stats->datasets_linked,
                 (unsigned long long)stats->bytes_linked, (unsigned long long)stats->chunks_written,
                 (unsigned long long)stats->chunks_raw, (unsigned long long)stats->chunks_copied,
                 base ? base->root : "no base", (unsigned long long)stats->copies_told,
                 (unsigned long long)stats->objects_kept, (unsigned long long)stats->changes);
    if (rc == 0 && stats->chunks_in_pool > 0)
        log_info("%s: %llu unchanged chunks left in the base version's pool (%llu told at once, "
                 "the rest asked HDF5 for one by one)",
                 log_name, (unsigned long long)stats->chunks_in_pool,
                 (unsigned long long)stats->chunks_told);
    return rc;
}
