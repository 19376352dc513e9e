/*
 * build: domain objects -> an HDF5 file written through the image driver.
 *
 * 1. discover: from the root group, breadth first over hard links (links in file order),
 *    load every object's JSON once; an object's first path is where it was first reached.
 * 2. create every object anonymously: groups, then committed types, then datasets (which may
 *    use the committed types), those whose fill value refers to other objects last; datasets
 *    served from chunk extents get their chunk placeholders here (build_data.c);
 * 3. link: each group's links in its order, hard links with H5Olink (so an object linked from
 *    several groups stays one object), soft and external links as they are;
 * 4. attributes of every object (references need every path to exist);
 * 5. the values of the other datasets, written for real (build_data.c).
 * Everything is done in a fixed order, so unchanged objects rebuild to identical bytes. What
 * cannot be shown as stored is noted once (build_omit: one log line, and image_left_out).
 */
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "build.h"
#include "image_cache.h"
#include "h5osfs/util/clock.h"
#include "h5osfs/h5json/h5type.h"
#include "h5osfs/h5json/h5value.h"
#include "h5osfs/schema/hjson.h"
#include "h5osfs/util/log.h"
#include "h5osfs/util/testhook.h"
#include "h5osfs/util/why.h"

/* HDF5's global state is not worth contending on: one build at a time. */
static pthread_mutex_t build_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- 2. anonymous objects ---- */

/* The root group, opened so that it has no path: HDF5 gives every object linked below an
 * open object with a path that path plus its name, kept as long as the object is open, and
 * the build keeps every object open. For nested groups that is memory quadratic in the depth
 * (10,000 nested groups: gigabytes), which the build does not need: it never asks HDF5 for
 * a name. An object opened by address has no path, nor has anything linked below it. */
static hid_t root_without_path(hid_t file)
{
    H5O_info_t info;
    if (H5Oget_info_by_name2(file, "/", &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0)
        return H5I_INVALID_HID;
    return H5Oopen_by_addr(file, info.addr);
}

static int create_group(struct builder *b, struct build_obj *o)
{
    if (o->parent == SIZE_MAX) {
        o->hid = root_without_path(b->file);
        return o->hid < 0 ? -EIO : 0;
    }
    int original = build_original_format(b, o->json);
    if (original == -ENOMEM)
        return original;
    hid_t gcpl = build_group_plist(H5P_GROUP_CREATE, o->json);
    if (original && H5Fset_libver_bounds(b->file, H5F_LIBVER_EARLIEST, H5F_LIBVER_V110) < 0)
        original = -1;
    o->hid =
        gcpl < 0 || original < 0 ? H5I_INVALID_HID : H5Gcreate_anon(b->file, gcpl, H5P_DEFAULT);
    if (original == 1 && H5Fset_libver_bounds(b->file, H5F_LIBVER_V110, H5F_LIBVER_V110) < 0 &&
        o->hid >= 0) {
        H5Gclose(o->hid); /* the rest would be made in the original format too */
        o->hid = H5I_INVALID_HID;
    }
    if (gcpl >= 0)
        H5Pclose(gcpl);
    return o->hid < 0 ? -EIO : 0;
}

static int create_datatype(struct builder *b, struct build_obj *o)
{
    char why[200];
    hid_t tid;
    int rc = h5type_build(json_object_get(o->json, "type"), &tid, why, sizeof why);
    if (rc == -ENOMEM)
        return rc;
    if (rc != 0) {
        o->dropped = 1;
        return build_omit(b, IMAGE_OMIT_OBJECT, o->id, build_path(b, o), NULL, why);
    }
    hid_t tcpl = H5Pcreate(H5P_DATATYPE_CREATE);
    if (tcpl < 0 || build_object_plist(tcpl) != 0 ||
        H5Tcommit_anon(b->file, tid, tcpl, H5P_DEFAULT) < 0) {
        if (tcpl >= 0)
            H5Pclose(tcpl);
        H5Tclose(tid);
        return -EIO;
    }
    H5Pclose(tcpl);
    o->hid = tid;
    return 0;
}

/* Groups, committed types, datasets, and last the datasets whose fill value refers to other
 * objects (MATLAB files have them: HDF5 needs the targets when it takes the fill value). A
 * reference fill value that refers to another such dataset resolves only when that one came
 * first in discovery order; otherwise the dataset is left out (logged). */
static int create_objects(struct builder *b)
{
    int rc = 0;
    for (int pass = 0; pass < 4 && rc == 0; pass++) {
        char want = "gtdd"[pass];
        for (size_t i = 0; i < b->n_objs && rc == 0; i++) {
            struct build_obj *o = &b->objs[i];
            if (o->cls != want || (want == 'd' && build_dataset_fill_refers(o) != (pass == 3)))
                continue;
            b->converting = o;
            rc = want == 'g'   ? create_group(b, o)
                 : want == 't' ? create_datatype(b, o)
                               : build_dataset_create(b, o);
        }
    }
    return rc;
}

/* ---- 3. links ---- */

/*
 * The file name of domain `to` (a domain path such as "/home/v/x.h5") relative to the
 * directory of domain `from`: "../v/x.h5". HDF5 readers resolve a relative external file name
 * next to the file that holds the link, which in the mount is the other domain.
 */
static int relative_domain(const char *from, const char *to, char *out, size_t len)
{
    size_t common = 0, i;
    for (i = 0; from[i] && from[i] == to[i]; i++)
        if (from[i] == '/')
            common = i + 1; /* both paths agree up to and including this slash */
    size_t n = 0;
    out[0] = '\0';
    for (i = common; from[i]; i++)
        if (from[i] == '/') { /* each further directory of `from` is one "../" */
            if (n + 3 >= len)
                return -ENAMETOOLONG;
            memcpy(out + n, "../", 4);
            n += 3;
        }
    int w = snprintf(out + n, len - n, "%s", to + common);
    return w < 0 || (size_t)w >= len - n ? -ENAMETOOLONG : 0;
}

static herr_t make_link(struct builder *b, hid_t group, const struct link_ref *l, hid_t lcpl)
{
    const char *cls = hjson_text(json_object_get(l->json, "class"));
    const char *h5path = hjson_text(json_object_get(l->json, "h5path"));
    const char *domain = hjson_text(json_object_get(l->json, "h5domain"));
    const char *id = build_hard_target(l->json);
    if (id) {
        struct build_obj *o = build_find(b, id);
        if (!o || o->dropped || o->hid < 0)
            return 1; /* missing or unusable target: logged when it was loaded */
        return H5Olink(o->hid, group, l->name, lcpl, H5P_DEFAULT);
    }
    if (h5path && domain && (!cls || strcmp(cls, "H5L_TYPE_EXTERNAL") == 0)) {
        char rel[STORE_KEY_MAX + 64];
        if (strncmp(domain, "hdf5://", 7) == 0)
            domain += 6; /* "hdf5://home/u/x.h5" names the domain "/home/u/x.h5" */
        else if (strncmp(domain, "hdf5:/", 6) == 0)
            domain += 5;
        if (domain[0] == '/' && relative_domain(b->domain_path, domain, rel, sizeof rel) == 0)
            domain = rel; /* a domain of this bucket: a path that resolves in the mount */
        return H5Lcreate_external(domain, h5path, group, l->name, lcpl, H5P_DEFAULT);
    }
    if (h5path && (!cls || strcmp(cls, "H5L_TYPE_SOFT") == 0))
        return H5Lcreate_soft(h5path, group, l->name, lcpl, H5P_DEFAULT);
    return 2;
}

/* A hard link whose target is not in the file: noted when the target was dropped (whose own
 * line says why); a target that could not be loaded was noted with the link at discovery. */
static int note_missing_target(struct builder *b, const struct build_obj *g, const char *name,
                               const char *id)
{
    const struct build_obj *o = build_find(b, id);
    char why[200];
    if (!o)
        return 0;
    why_set(why, sizeof why, "to %.120s, which is left out", id);
    return build_record_omission(b, IMAGE_OMIT_LINK, g->id, build_path(b, g), name, why);
}

static int link_group(struct builder *b, struct build_obj *g)
{
    size_t n;
    int rc = 0;
    struct link_ref *links = build_ordered_members(json_object_get(g->json, "links"),
                                                   build_creation_ordered(g->json), &n);
    if (!links)
        return -ENOMEM;
    for (size_t k = 0; k < n && rc == 0; k++) {
        const char *name = links[k].name;
        if (!build_link_name_ok(name)) {
            rc = build_omit(b, IMAGE_OMIT_LINK, g->id, build_path(b, g), build_shown_name(name),
                            build_bad_name_why(name));
            continue;
        }
        hid_t lcpl = build_link_plist(name);
        herr_t made = lcpl < 0 ? -1 : make_link(b, g->hid, &links[k], lcpl);
        if (lcpl >= 0)
            H5Pclose(lcpl);
        if (made == 1)
            rc = note_missing_target(b, g, name, build_hard_target(links[k].json));
        else if (made < 0 || made == 2)
            rc = build_omit(b, IMAGE_OMIT_LINK, g->id, build_path(b, g), name,
                            made == 2 ? "of no known class" : "HDF5 could not make it");
    }
    free(links);
    return rc;
}

/* ---- 5. data ---- */

/* Remove every link to o: its data cannot be served, and not even as unreadable. */
static int unlink_object(struct builder *b, const struct build_obj *o)
{
    int rc = 0;
    for (size_t i = 0; i < b->n_objs && rc == 0; i++) {
        const struct build_obj *g = &b->objs[i];
        if (g->cls != 'g' || g->hid < 0)
            continue;
        const char *name;
        json_t *link;
        json_object_foreach(json_object_get(g->json, "links"), name, link)
        {
            const char *id = build_hard_target(link);
            if (!id || strcmp(id, o->id) != 0 || !build_link_name_ok(name) ||
                H5Lexists(g->hid, name, H5P_DEFAULT) <= 0)
                continue;
            if (H5Ldelete(g->hid, name, H5P_DEFAULT) < 0)
                return -EIO; /* the file would show what it must not */
            if ((rc = note_missing_target(b, g, name, id)) != 0)
                break;
        }
    }
    return rc;
}

static int fill_or_unlink(struct builder *b, struct build_obj *o)
{
    char why[200] = "its data cannot be served";
    b->converting = o;
    int rc = build_dataset_fill(b, o, why, sizeof why);
    if (rc != -EINVAL)
        return rc;
    o->dropped = 1;
    rc = build_omit(b, IMAGE_OMIT_OBJECT, o->id, build_path(b, o), NULL, why);
    return rc ? rc : unlink_object(b, o);
}

/* ---- the whole build ---- */

static int by_addr(const void *a, const void *b)
{
    uint64_t x = ((const struct image_object *)a)->addr, y = ((const struct image_object *)b)->addr;
    return x < y ? -1 : x > y;
}

/* Which HSDS object each HDF5 object of the file is: what an r+ change of a copy of the file
 * is matched against when it is committed (image.h). */
static int record_objects(struct builder *b)
{
    struct image *img = b->img;
    img->objects = calloc(b->n_objs ? b->n_objs : 1, sizeof *img->objects);
    if (!img->objects)
        return -ENOMEM;
    for (size_t i = 0; i < b->n_objs; i++) {
        H5O_info_t info;
        const struct build_obj *o = &b->objs[i];
        if (o->hid < 0 || o->dropped || H5Oget_info2(o->hid, &info, H5O_INFO_BASIC) < 0)
            continue;
        struct image_object *r = &img->objects[img->n_objects];
        r->addr = (uint64_t)info.addr;
        if (!(r->id = strdup(o->id)))
            return -ENOMEM;
        img->n_objects++;
    }
    qsort(img->objects, img->n_objects, sizeof *img->objects, by_addr);
    return 0;
}

static void close_objects(struct builder *b)
{
    for (size_t i = 0; i < b->n_objs; i++) {
        struct build_obj *o = &b->objs[i];
        if (o->hid >= 0)
            H5Oclose(o->hid) < 0 ? (void)H5Tclose(o->hid) : (void)0;
        o->hid = H5I_INVALID_HID;
    }
}

static void free_objects(struct builder *b)
{
    for (size_t i = 0; i < b->n_objs; i++) {
        free(b->objs[i].id);
        free(b->objs[i].path);
        free(b->objs[i].chunks);
        free(b->objs[i].listed);
        json_decref(b->objs[i].json);
    }
    free(b->objs);
    strmap_free(b->by_id, NULL);
    strmap_free(b->fetched, build_fetched_free);
    strmap_free(b->uri_index, NULL);
}

/* HDF5's metadata cache grows up to 32 MiB while a million chunk index entries are written;
 * every byte of metadata ends in the driver's runs anyway, so a small cache only makes HDF5
 * write pages there sooner. */
static int small_metadata_cache(hid_t fapl)
{
    H5AC_cache_config_t mdc = { .version = H5AC__CURR_CACHE_CONFIG_VERSION };
    if (H5Pget_mdc_config(fapl, &mdc) < 0)
        return -1;
    mdc.set_initial_size = 1;
    mdc.initial_size = IMAGE_MDC_BYTES;
    mdc.max_size = IMAGE_MDC_BYTES;
    mdc.min_size = mdc.min_size < IMAGE_MDC_BYTES ? mdc.min_size : IMAGE_MDC_BYTES;
    return H5Pset_mdc_config(fapl, &mdc) < 0 ? -1 : 0;
}

/*
 * Paged aggregation (issue 28 §3, -o paged_images=on): HDF5 keeps metadata and raw data in
 * pages of their own, and a reader with a page buffer (ros3, fsspec + h5py) fetches the
 * metadata in few whole pages instead of many small ranges. A copy taken with cp keeps it.
 * Not the default: HDF5 then packs raw data smaller than a page (small chunks, small value
 * datasets) into shared pages, behind the driver's back (vfd_alloc sees whole pages only), so
 * one unreadable chunk fails its page-mates' reads too. The free-space managers are not
 * persisted: the image is never extended in place. HDF5 1.10.1 and later read such files.
 */
static int paged_aggregation(hid_t fcpl)
{
    return H5Pset_file_space_strategy(fcpl, H5F_FSPACE_STRATEGY_PAGE, 0, 1) < 0 ||
                   H5Pset_file_space_page_size(fcpl, IMAGE_FS_PAGE) < 0
               ? -1
               : 0;
}

static hid_t create_file(struct builder *b)
{
    hid_t fapl = vfd_fapl(&b->target);
    hid_t fcpl = build_group_plist(H5P_FILE_CREATE, b->objs[0].json);
    hid_t file = H5I_INVALID_HID;
    if (fapl >= 0 && fcpl >= 0 && (!b->src->paged || paged_aggregation(fcpl) == 0) &&
        H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110) >= 0 &&
        H5Pset_meta_block_size(fapl, IMAGE_META_BLOCK) >= 0 && small_metadata_cache(fapl) == 0)
        file = H5Fcreate(b->domain_path, H5F_ACC_TRUNC, fcpl, fapl);
    if (fapl >= 0)
        H5Pclose(fapl);
    if (fcpl >= 0)
        H5Pclose(fcpl);
    return file;
}

/* The objects' JSON and the chunk listings: store requests only, no HDF5 call, so builds of
 * several domains fetch at once. */
static int fetch_steps(struct builder *b, struct root_listing *rl)
{
    double t0 = clock_monotonic();
    build_root_listing_start(b, rl);
    int rc = build_discover(b);
    double t1 = clock_monotonic();
    if (rc == 0)
        rc = build_list_ahead(b, rl);
    log_debug("%s: %zu objects fetched in %.3f s, chunks listed %.3f s later (%s)", b->domain_path,
              b->n_objs, t1 - t0, clock_monotonic() - t1,
              rl->complete ? "one listing of the root" : "a listing per dataset");
    build_root_listing_end(rl);
    return rc;
}

/* HDF5's own checksum of metadata (Jenkins' lookup3), exported by the library though not in its
 * public headers; the same function since 1.8. */
uint32_t H5_checksum_metadata(const void *data, size_t len, uint32_t initval);

#define SUPERBLOCK_EXT_AT 20 /* a version 2 or 3 superblock's extension address, 8 bytes */
#define OHDR_TIMES 0x20      /* a version 2 object header's flag: four times follow */
#define OHDR_PHASE 0x10      /* ... attribute phase change values follow */

/*
 * The superblock extension that paged aggregation needs is made by HDF5 with the default
 * object creation properties, which store the time of the build in its header; every other
 * object is made without times (build_object_plist). The times are zeroed (and the header's
 * checksum made again) so that a domain rebuilds to identical bytes.
 */
static int zero_extension_times(struct extent_map *map)
{
    unsigned char sb[SUPERBLOCK_EXT_AT + 8], head[64 * 1024];
    extent_read(map, 0, sb, sizeof sb);
    uint64_t at = 0;
    for (int i = 7; i >= 0; i--)
        at = at << 8 | sb[SUPERBLOCK_EXT_AT + i];
    if (sb[8] < 2 || at == UINT64_MAX)
        return 0; /* no extension */
    extent_read(map, at, head, 6);
    if (memcmp(head, "OHDR", 4) != 0 || head[4] != 2 || !(head[5] & OHDR_TIMES))
        return 0;
    size_t width = (size_t)1 << (head[5] & 3), prefix = 6 + 16 + (head[5] & OHDR_PHASE ? 4 : 0);
    extent_read(map, at, head, prefix + width);
    uint64_t chunk0 = 0;
    for (size_t i = width; i-- > 0;)
        chunk0 = chunk0 << 8 | head[prefix + i];
    size_t len = prefix + width + (size_t)chunk0;
    if (len + 4 > sizeof head)
        return -EIO;
    extent_read(map, at, head, len);
    memset(head + 6, 0, 16);
    uint32_t sum = H5_checksum_metadata(head, len, 0);
    for (int i = 0; i < 4; i++)
        head[len + (size_t)i] = (unsigned char)(sum >> (8 * i));
    return extent_write_bytes(map, at, head, len + 4);
}

/* The HDF5 file: under build_lock (the HDF5 library is not thread-safe). */
static int build_steps(struct builder *b)
{
    int rc;
    b->file = create_file(b);
    if (b->file < 0)
        return -EIO;
    rc = create_objects(b);
    for (size_t i = 0; i < b->n_objs && rc == 0; i++)
        if (b->objs[i].cls == 'g' && b->objs[i].hid >= 0)
            rc = link_group(b, &b->objs[i]);
    for (size_t i = 0; i < b->n_objs && rc == 0; i++)
        if (b->objs[i].hid >= 0 && !b->objs[i].dropped)
            rc = build_attributes_of(b, &b->objs[i]);
    for (size_t i = 0; i < b->n_objs && rc == 0; i++)
        if (b->objs[i].cls == 'd' && b->objs[i].hid >= 0 && !b->objs[i].dropped &&
            !b->objs[i].data_done)
            rc = fill_or_unlink(b, &b->objs[i]);
    for (size_t i = 0; i < b->n_objs && rc == 0; i++)
        rc = build_dataset_declare(b, &b->objs[i]);
    if (rc == 0)
        rc = record_objects(b);
    b->target.closing = 1; /* an object's close flushes it too: see vfd_write */
    close_objects(b);
    herr_t closed = H5Fclose(b->file);
    b->file = -1; /* closed even when the close failed: a second close would touch freed state */
    if (closed < 0 && rc == 0)
        rc = -EIO;
    if (rc == 0 && b->target.failed)
        rc = b->target.failed;
    if (rc == 0)
        rc = zero_extension_times(b->img->map);
    if (rc == 0)
        rc = extent_finish(b->img->map, b->target.eoa);
    return rc;
}

static int builder_init(struct builder *b, const struct image_source *src, const char *domain,
                        const char *root_id, struct image **img)
{
    memset(b, 0, sizeof *b);
    b->src = src;
    b->domain_path = domain;
    b->root_id = root_id;
    b->file = H5I_INVALID_HID;
    b->by_id = strmap_new();
    b->fetched = strmap_new();
    *img = image_alloc(src, domain);
    if (!b->by_id || !b->fetched || !*img)
        return -ENOMEM;
    b->img = *img;
    b->target.map = (*img)->map;
    struct timespec now;
    if (clock_gettime(CLOCK_REALTIME, &now) != 0)
        return -errno;
    b->img->built_at = (double)now.tv_sec + now.tv_nsec / 1e9;
    return 0;
}

static void log_image(const struct image *img, const char *how)
{
    struct image_stats st;
    image_stats(img, &st);
    log_info("%s: %s: %" PRIu64 " bytes, %" PRIu64 " datasets with %" PRIu64
             " chunk extents, %" PRIu64 " runs of metadata, %" PRIu64 " bytes of RAM, %.3f s",
             img->domain_path, how, st.size, st.datasets, st.chunks, st.runs, st.memory,
             st.build_seconds);
}

static void log_dangling_refs(const struct builder *b);

/* Give back what the build no longer needs. HDF5 keeps freed blocks on its free lists, and
 * glibc keeps freed memory in the arena of the FUSE thread that built (it returns only the top
 * of a heap): after a build of many small objects, most of the peak stayed resident for good,
 * and each build on another thread added an arena's worth. The image itself is a few large
 * blocks, kept. Called with build_lock held (H5garbage_collect is HDF5's). */
static void release_build_memory(void)
{
    H5garbage_collect();
    malloc_trim(0);
}

static int build_now(const struct image_source *src, const char *domain_path, const char *root_id,
                     struct root_listing *rl, struct image **out)
{
    struct builder b;
    struct image *img = NULL;
    testhook_pause_at("image build", NULL); /* the root is chosen: another commit may follow */
    int rc = builder_init(&b, src, domain_path, root_id, &img);
    if (rc == 0)
        rc = fetch_steps(&b, rl);
    pthread_mutex_lock(&build_lock);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* failures are logged by us, once */
    if (rc == 0)
        rc = build_steps(&b);
    if (rc == 0)
        log_dangling_refs(&b);
    if (rc != 0 && b.file >= 0) {
        b.target.closing = 1;
        close_objects(&b);
        H5Fclose(b.file);
    }
    free_objects(&b);
    free(b.placeholder);
    release_build_memory();
    pthread_mutex_unlock(&build_lock);
    if (rc != 0) {
        log_error("%s: cannot build the HDF5 file: %s", domain_path, strerror(-rc));
        image_put(img);
        return rc == -ENOMEM ? rc : -EIO;
    }
    *out = img;
    return 0;
}

/* The image kept in cache_dir or, failing that, in the bucket; NULL: build it. */
static struct image *kept_image(const struct image_source *src, const char *domain_path,
                                const struct image_cache_key *key, const char **where)
{
    struct image *img = image_cache_load(src, domain_path, key);
    *where = "the HDF5 file built before (kept in cache_dir)";
    if (img) {
        if (!key->shared_listed)
            image_cache_share(src, key, img);
        return img;
    }
    *where = "the HDF5 file built before (kept in the bucket)";
    return image_cache_load_shared(src, domain_path, key);
}

int image_build(const struct image_source *src, const char *domain_path, const char *root_id,
                struct image **out)
{
    struct root_listing rl = { 0 };
    struct image_cache_key key;
    const char *where = NULL;
    double t0 = clock_monotonic();
    int rc = image_cache_key(src, domain_path, root_id, &rl, &key), cached = rc == 0;
    *out = cached ? kept_image(src, domain_path, &key, &where) : NULL;
    image_cache_key_clear(&key);
    if (*out) {
        image_take_chunk_states(*out, &key.chunks);
        build_root_listing_end(&rl);
        (*out)->build_seconds = clock_monotonic() - t0;
        log_image(*out, where);
        return 0;
    }
    if (!cached) {
        build_root_listing_end(&rl); /* partial: the build lists for itself */
        rl.too_many = rc == -EFBIG;
    }
    rc = build_now(src, domain_path, root_id, &rl, out);
    build_root_listing_end(&rl);
    if (rc == 0 && cached)
        image_take_chunk_states(*out, &key.chunks);
    if (cached)
        image_chunk_states_free(&key.chunks);
    if (rc != 0)
        return rc;
    (*out)->build_seconds = clock_monotonic() - t0;
    if (cached) {
        image_cache_save(src, &key, *out);
        image_cache_share(src, &key, *out);
    }
    log_image(*out, "built the HDF5 file");
    return 0;
}

static void log_dangling_refs(const struct builder *b)
{
    if (b->dangling_refs)
        log_warn("%s: %" PRIu64 " object reference(s) to objects not in the domain (first: %s):"
                 " read as null references",
                 b->domain_path, b->dangling_refs, b->dangling_first);
}
