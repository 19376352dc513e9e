/*
 * build_attrs: what the builder makes of attributes (doc/image.md): the room an object's header
 * keeps for them so that they stay in the order they are made in, whether a group can keep them
 * in HDF5's original format, the attributes themselves (step 4 of build.c), and dataspaces.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "build.h"
#include "h5osfs/h5json/h5type.h"
#include "h5osfs/h5json/h5value.h"
#include "h5osfs/schema/hjson.h"
#include "h5osfs/util/why.h"

/* ---- room in object headers ---- */

/* Most attributes an object keeps in its header (HDF5's own limit): past max_compact (8 by
 * default) they move to dense storage, which lists them in name-hash order, and readers that
 * list attributes in native order (ncdump) would no longer see the order they were made in. */
#define ATTR_COMPACT_MAX 65535

/* No times (a rebuild must give the same bytes) and attributes in creation order. */
int build_object_plist(hid_t ocpl)
{
    return H5Pset_obj_track_times(ocpl, 0) >= 0 &&
                   H5Pset_attr_phase_change(ocpl, ATTR_COMPACT_MAX, ATTR_COMPACT_MAX) >= 0
               ? 0
               : -1;
}

/* Header bytes an attribute message takes at most, roughly: name, encoded type and shape, the
 * value (16 bytes a variable-length element), message framing. A type HDF5 cannot encode here
 * (a committed one: a shared message) counts as small. */
static size_t attr_header_bytes(const char *name, const json_t *attr)
{
    char why[200];
    size_t n = 0, type_bytes = 0, elem = 0;
    int rank = 0;
    hid_t tid = h5type_from_json(json_object_get(attr, "type"), why, sizeof why);
    hid_t space = build_dataspace(json_object_get(attr, "shape"), &n, why, sizeof why);
    if (tid >= 0 && H5Tencode(tid, NULL, &type_bytes) >= 0)
        elem = H5Tdetect_class(tid, H5T_VLEN) > 0 || H5Tis_variable_str(tid) > 0 ? 16
                                                                                 : H5Tget_size(tid);
    if (tid >= 0)
        H5Tclose(tid);
    if (space >= 0 && (rank = H5Sget_simple_extent_ndims(space)) < 0)
        rank = H5S_MAX_RANK;
    if (space >= 0)
        H5Sclose(space);
    size_t value = elem > 0 && n <= SIZE_MAX / 2 / elem ? n * elem : 0;
    return strlen(name) + type_bytes + value + 16 * (size_t)rank + 64;
}

/* Link messages of this size each reserve a group's header room (HDF5's estimate of link
 * entries, H5Pset_est_link_info); as many as fit one null message of 64 KiB at most. */
#define RESERVE_NAME_LEN 255u
#define RESERVE_ENTRY_BYTES 270u
#define RESERVE_MAX_ENTRIES (60000u / RESERVE_ENTRY_BYTES)

/* Bytes of header all attributes of the object JSON obj take at most, roughly. */
static size_t attrs_header_bytes(const json_t *obj)
{
    size_t bytes = 0;
    const char *name;
    json_t *attr;
    json_object_foreach((json_t *)json_object_get(obj, "attributes"), name, attr) bytes +=
        attr_header_bytes(name, attr);
    return bytes;
}

/* Largest value of the attribute holding a dataset's room: one header message holds 64 KiB. */
#define ATTR_ROOM_MAX 60000u

/* A dataset has no estimate like a group's links: an attribute made while its header is the
 * last thing in the file (so that HDF5 grows the header's chunk in place) and deleted right
 * before the attributes are made leaves one null message they fill in order (see
 * reserve_header). */
int build_reserve_attr_room(struct build_obj *o)
{
    const json_t *attrs = json_object_get(o->json, "attributes");
    if (json_object_size(attrs) < 2 || json_object_get(attrs, BUILD_ATTR_ROOM))
        return 0;
    size_t bytes = attrs_header_bytes(o->json);
    hsize_t n = bytes < ATTR_ROOM_MAX ? bytes : ATTR_ROOM_MAX;
    hid_t space = H5Screate_simple(1, &n, NULL);
    hid_t attr = space < 0 ? H5I_INVALID_HID
                           : H5Acreate2(o->hid, BUILD_ATTR_ROOM, H5T_STD_U8LE, space, H5P_DEFAULT,
                                        H5P_DEFAULT);
    if (space >= 0)
        H5Sclose(space);
    if (attr < 0 || H5Aclose(attr) < 0)
        return -1;
    o->attr_room = 1;
    return 0;
}

/* Room in the group's first header chunk for all its links and attributes. HDF5 puts a new
 * header message into the first gap it fits, and once the chunk is full into new chunks
 * (linked from gaps of earlier chunks): by the time attributes are made, the header is no
 * longer at the end of the file and cannot grow, so a later small attribute lands in a gap
 * before an earlier large one, and a reopened file lists them out of the order they were made
 * in (the untracked root of NXtomo.hdf5: xSize before nFrames, issue 27.2). With the room
 * made at creation, each message takes the next bytes of one null message, in order. */
static int reserve_header(hid_t gcpl, const json_t *group)
{
    size_t bytes = attrs_header_bytes(group);
    const char *name;
    json_t *member;
    json_object_foreach((json_t *)json_object_get(group, "links"), name, member) bytes +=
        strlen(name) + 48;
    size_t entries = bytes / RESERVE_ENTRY_BYTES + 1;
    if (entries > RESERVE_MAX_ENTRIES)
        entries = RESERVE_MAX_ENTRIES;
    return H5Pset_est_link_info(gcpl, (unsigned)entries, RESERVE_NAME_LEN) < 0 ? -1 : 0;
}

hid_t build_group_plist(hid_t cls, const json_t *json)
{
    hid_t pl = H5Pcreate(cls);
    if (pl < 0)
        return pl;
    int ok = build_object_plist(pl) == 0 && reserve_header(pl, json) == 0;
    if (ok && build_creation_ordered(json)) {
        unsigned flags = H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED;
        ok = H5Pset_link_creation_order(pl, flags) >= 0 &&
             H5Pset_attr_creation_order(pl, flags) >= 0;
    }
    if (!ok) {
        H5Pclose(pl);
        return H5I_INVALID_HID;
    }
    return pl;
}

/* An attribute message of a version-1 object header holds at most 64 KiB; a value of up to
 * this much leaves room for its name, type and shape. */
#define V1_ATTR_VALUE_MAX (48u << 10)

/* Whether the attribute's value surely fits one message of a version-1 header. Its elements
 * are counted at their size in memory, twice that when they hold variable-length data (16
 * bytes each in the file, 8 or 16 in memory); what cannot be worked out here does not fit.
 * 1, 0, or -ENOMEM. */
static int attr_fits_v1(struct builder *b, const json_t *attr)
{
    char why[200];
    size_t n = 0, elem = 0;
    hid_t tid;
    int rc = build_type(b, json_object_get(attr, "type"), &tid, why, sizeof why);
    if (rc == -ENOMEM)
        return rc;
    hid_t space = tid < 0 ? H5I_INVALID_HID
                          : build_dataspace(json_object_get(attr, "shape"), &n, why, sizeof why);
    if (space >= 0) {
        int vlen = H5Tdetect_class(tid, H5T_VLEN) != 0 || H5Tis_variable_str(tid) != 0;
        elem = H5Tget_size(tid) << vlen;
        H5Sclose(space);
    }
    if (tid >= 0)
        H5Tclose(tid);
    return elem > 0 && n <= V1_ATTR_VALUE_MAX / elem;
}

/* A group that does not track creation order is made in HDF5's original format, a symbol
 * table, as h5py and most writers make theirs: HDF5 lists and looks up its links with less
 * work than in the newer format's dense storage (doc/image.md: h5ls -r of the 500-dataset
 * bench domain's file 100-106 ms against 108-113 ms). That format keeps attributes in a
 * version-1 header, whose messages hold 64 KiB at most, so a group with a larger attribute
 * keeps the newer one. HDF5 itself converts the group when a link needs the newer format (an
 * external link, a UTF-8 name). 1, 0, or -ENOMEM. */
int build_original_format(struct builder *b, const json_t *group)
{
    const json_t *attrs = json_object_get(group, "attributes");
    const char *name;
    json_t *attr;
    if (build_creation_ordered(group))
        return 0;
    json_object_foreach((json_t *)attrs, name, attr)
    {
        int fits = attr_fits_v1(b, attr);
        if (fits <= 0)
            return fits;
    }
    return 1;
}

/* ---- 4. attributes ---- */

#define ATTR_DATA_MAX (64u << 20) /* largest attribute value, as IMAGE_JSON_MAX */

static int attr_value(struct builder *b, const json_t *a, hid_t tid, size_t n, void **buf,
                      char *why, size_t why_len)
{
    const json_t *type = json_object_get(a, "type"), *value = json_object_get(a, "value");
    const char *enc = hjson_text(json_object_get(a, "encoding"));
    struct h5value_refs refs = { build_resolve_ref, b };
    if (enc && strcmp(enc, "base64") == 0 && json_is_string(value)) {
        unsigned char *bytes;
        size_t len;
        if (h5value_base64_decode(json_string_value(value), json_string_length(value), &bytes,
                                  &len) != 0)
            return why_reject(why, why_len, "value is not valid base64");
        int rc = h5value_from_stored(type, tid, bytes, len, n, &refs, buf, why, why_len);
        free(bytes);
        return rc;
    }
    return h5value_from_json(type, tid, value, n, &refs, buf, why, why_len);
}

static int make_attribute(struct builder *b, struct build_obj *o, const struct link_ref *a,
                          char *why, size_t why_len)
{
    size_t n = 0;
    void *buf = NULL;
    int rc = -EINVAL;
    json_t *repaired = b->src->no_repairs ? NULL : build_repaired_attr(o->json, a->name, a->json);
    const json_t *aj = repaired ? repaired : a->json;
    hid_t tid, space = H5I_INVALID_HID;
    if ((rc = build_type(b, json_object_get(aj, "type"), &tid, why, why_len)) != 0)
        goto out;
    rc = -EINVAL;
    space = build_dataspace(json_object_get(aj, "shape"), &n, why, why_len);
    if (space < 0)
        goto out;
    /* the value is written into the image, which lives in RAM: a shape alone (a null value,
     * or short strings of a long fixed string type) must not decide gigabytes */
    size_t elem = H5Tget_size(tid);
    if (elem == 0 || n > ATTR_DATA_MAX / elem) {
        why_set(why, why_len, "value of more than %u bytes", ATTR_DATA_MAX);
        goto out;
    }
    int has_value = n > 0 && !json_is_null(json_object_get(aj, "value"));
    if (has_value && (rc = attr_value(b, aj, tid, n, &buf, why, why_len)) != 0)
        goto out;
    hid_t acpl = build_link_plist(a->name);
    hid_t attr = acpl < 0 ? acpl : H5Acreate2(o->hid, a->name, tid, space, acpl, H5P_DEFAULT);
    rc = attr >= 0 && (!has_value || H5Awrite(attr, tid, buf) >= 0) ? 0 : -EIO;
    if (rc != 0)
        why_set(why, why_len, "HDF5 refused it");
    if (attr >= 0)
        H5Aclose(attr);
    if (acpl >= 0)
        H5Pclose(acpl);
out:
    if (buf)
        h5value_free(tid, buf, n);
    if (space >= 0)
        H5Sclose(space);
    if (tid >= 0)
        H5Tclose(tid);
    json_decref(repaired);
    return rc;
}

int build_attributes_of(struct builder *b, struct build_obj *o)
{
    size_t n;
    int rc = 0;
    /* by "created" whether or not the object tracks creation order: an untracked object's
     * header lists its attributes in the order they were made, and readers that list them
     * in that native order (ncdump) then see the source's order */
    if (o->attr_room && H5Adelete(o->hid, BUILD_ATTR_ROOM) < 0)
        return -EIO;
    o->attr_room = 0;
    struct link_ref *attrs = build_ordered_members(json_object_get(o->json, "attributes"), 1, &n);
    if (!attrs)
        return -ENOMEM;
    b->converting = o;
    for (size_t k = 0; k < n && rc == 0; k++) {
        char why[200] = "";
        if (hjson_unloadable(attrs[k].name))
            rc = build_omit(b, IMAGE_OMIT_ATTRIBUTE, o->id, build_path(b, o),
                            build_shown_name(attrs[k].name), build_bad_name_why(attrs[k].name));
        else if ((rc = make_attribute(b, o, &attrs[k], why, sizeof why)) == -ENOMEM)
            break; /* not the attribute's fault: the build fails, nothing is left out */
        else if (rc != 0)
            rc = build_omit(b, IMAGE_OMIT_ATTRIBUTE, o->id, build_path(b, o), attrs[k].name, why);
    }
    free(attrs);
    return rc;
}

/* ---- shapes ---- */

hid_t build_dataspace(const json_t *shape, size_t *n, char *why, size_t why_len)
{
    const char *cls = hjson_text(json_object_get(shape, "class"));
    const json_t *dims = json_object_get(shape, "dims");
    *n = 0;
    if (cls && strcmp(cls, "H5S_NULL") == 0)
        return H5Screate(H5S_NULL);
    if (!cls || strcmp(cls, "H5S_SCALAR") == 0) {
        *n = 1;
        return H5Screate(H5S_SCALAR);
    }
    size_t rank = json_array_size(dims);
    hsize_t d[IMAGE_MAX_RANK];
    uint64_t total = 1;
    if (strcmp(cls, "H5S_SIMPLE") != 0 || rank < 1 || rank > IMAGE_MAX_RANK) {
        why_set(why, why_len, "shape is not NULL, SCALAR or SIMPLE with 1 to 32 dims");
        return H5I_INVALID_HID;
    }
    for (size_t k = 0; k < rank; k++) {
        json_int_t v = json_integer_value(json_array_get(dims, k));
        if (!json_is_integer(json_array_get(dims, k)) || v < 0 ||
            (v > 0 && total > (UINT64_C(1) << 40) / (uint64_t)v)) {
            why_set(why, why_len, "shape dims are not non-negative integers of sane size");
            return H5I_INVALID_HID;
        }
        d[k] = (hsize_t)v;
        total *= (uint64_t)v;
    }
    *n = (size_t)total;
    return H5Screate_simple((int)rank, d, NULL);
}
