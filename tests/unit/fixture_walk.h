/*
 * fixture_walk.h: the objects of a domain of the fixture bucket tests/data/hsds-v2/hsdstest
 * (written by real HSDS with hsload), each with its path and its object in the HDF5 file the
 * domain was loaded from (tests/data/hsds-v2/source), for tests of the writing side: what
 * h5osfs makes from the source file must equal what HSDS stored.
 *
 * fixture_open loads the domain: hard links are followed from the root group (each object
 * once, under the first path found) and every object is opened in the source file, so that
 * fixture_id_of can resolve the source file's object references to the bucket's ids.
 */
#ifndef H5OSFS_TEST_FIXTURE_WALK_H
#define H5OSFS_TEST_FIXTURE_WALK_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>
#include <jansson.h>

#include "h5osfs/schema/hjson.h"
#include "h5osfs/schema/schema.h"

#include "check.h"

#define FIXTURE_MAX_OBJECTS 64

struct fixture_object {
    char id[SCHEMA_ID_BUF];
    char path[256];
    json_t *doc;  /* the object's JSON as HSDS stored it */
    haddr_t addr; /* the object's address in the source file */
};

struct fixture {
    char bucket[4096];
    hid_t fid; /* the source file */
    struct fixture_object objects[FIXTURE_MAX_OBJECTS];
    size_t n;
};

static inline json_t *fixture_load(const char *path)
{
    size_t cap = 1 << 16;
    char *text = malloc(cap);
    FILE *fp = fopen(path, "rb");
    size_t n = fp && text ? fread(text, 1, cap, fp) : 0;
    if (fp)
        fclose(fp);
    CHECK(n > 0 && n < cap);
    json_t *doc = n > 0 ? hjson_loadb(text, n, NULL, 0) : NULL;
    free(text);
    return doc;
}

static inline json_t *fixture_load_object(const struct fixture *fx, const char *id)
{
    char key[512], path[4096 + 512];
    CHECK_INT(schema_obj_key(id, key, sizeof(key)), 0);
    snprintf(path, sizeof(path), "%s/%s", fx->bucket, key);
    return fixture_load(path);
}

static inline void fixture_add(struct fixture *fx, const char *id, const char *path);

static inline void fixture_add_links(struct fixture *fx, const json_t *links, const char *path)
{
    const char *name;
    json_t *link;
    json_object_foreach((json_t *)links, name, link)
    {
        const char *cls = json_string_value(json_object_get(link, "class"));
        if (!cls || strcmp(cls, "H5L_TYPE_HARD") != 0)
            continue;
        char child[256];
        snprintf(child, sizeof(child), "%s/%s", strcmp(path, "/") == 0 ? "" : path, name);
        fixture_add(fx, json_string_value(json_object_get(link, "id")), child);
    }
}

static inline void fixture_add(struct fixture *fx, const char *id, const char *path)
{
    for (size_t k = 0; k < fx->n; k++) {
        if (strcmp(fx->objects[k].id, id) == 0)
            return; /* a second hard link */
    }
    CHECK(fx->n < FIXTURE_MAX_OBJECTS);
    if (fx->n >= FIXTURE_MAX_OBJECTS)
        return;
    struct fixture_object *o = &fx->objects[fx->n++];
    snprintf(o->id, sizeof(o->id), "%s", id);
    snprintf(o->path, sizeof(o->path), "%s", path);
    o->doc = fixture_load_object(fx, id);
    CHECK(o->doc != NULL);
    hid_t obj = H5Oopen(fx->fid, path, H5P_DEFAULT);
    H5O_info_t info;
    CHECK(obj >= 0 && H5Oget_info2(obj, &info, H5O_INFO_BASIC) >= 0);
    o->addr = info.addr;
    if (obj >= 0)
        CHECK(H5Oclose(obj) >= 0);
    if (id[0] == 'g')
        fixture_add_links(fx, json_object_get(o->doc, "links"), path);
}

/* Load domain /home/test_user1/<domain> and open source/<source>. 0 if both exist. */
static inline int fixture_open(struct fixture *fx, const char *data, const char *domain,
                               const char *source)
{
    char path[4096 + 256];
    memset(fx, 0, sizeof(*fx));
    snprintf(fx->bucket, sizeof(fx->bucket), "%s/hsds-v2/hsdstest", data);
    snprintf(path, sizeof(path), "%s/home/test_user1/%s/.domain.json", fx->bucket, domain);
    json_t *dom = fixture_load(path);
    snprintf(path, sizeof(path), "%s/hsds-v2/source/%s", data, source);
    fx->fid = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    CHECK(dom != NULL && fx->fid >= 0);
    if (dom && fx->fid >= 0)
        fixture_add(fx, json_string_value(json_object_get(dom, "root")), "/");
    json_decref(dom);
    return dom && fx->fid >= 0 ? 0 : -1;
}

static inline void fixture_close(struct fixture *fx)
{
    for (size_t k = 0; k < fx->n; k++)
        json_decref(fx->objects[k].doc);
    if (fx->fid >= 0) {
        CHECK_INT(H5Fget_obj_count(fx->fid, H5F_OBJ_ALL), 1); /* only the file itself */
        CHECK(H5Fclose(fx->fid) >= 0);
    }
    fx->n = 0;
}

/* h5value_ref_id_fn over a fixture: the bucket id of the object a source reference points at. */
static inline int fixture_id_of(void *ctx, const hobj_ref_t *ref, char id[39])
{
    struct fixture *fx = ctx;
    hid_t obj = H5Rdereference2(fx->fid, H5P_DEFAULT, H5R_OBJECT, ref);
    if (obj < 0)
        return -ENOENT;
    H5O_info_t info;
    herr_t rc = H5Oget_info2(obj, &info, H5O_INFO_BASIC);
    if (H5Oclose(obj) < 0 || rc < 0)
        return -EIO;
    for (size_t k = 0; k < fx->n; k++) {
        if (fx->objects[k].addr == info.addr) {
            memcpy(id, fx->objects[k].id, SCHEMA_ID_BUF);
            return 0;
        }
    }
    return -ENOENT;
}

/* hjson_dumps of v, for comparisons and messages (free it). */
static inline char *fixture_dumps(const json_t *v)
{
    char *text = NULL;
    if (!v || hjson_dumps(v, &text) != 0)
        return strdup("(none)");
    return text;
}

#endif
