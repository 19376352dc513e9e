/*
 * build_objects: what every step of a build (build.c, build_attrs.c, build_data.c,
 * build_chunks.c, build_vds.c, refs.c) asks of the builder's objects: an object by id and its
 * JSON, its path, its links and attributes in file order, its type, a reference to it, and
 * the note of what the image leaves out. It calls no other file of the image, so the steps
 * call it and build.c, which runs them, is called by none of them (tests/meson.build,
 * --one-way).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "build.h"
#include "h5osfs/util/grow.h"
#include "h5osfs/h5json/h5type.h"
#include "h5osfs/schema/hjson.h"
#include "h5osfs/util/log.h"
#include "h5osfs/util/why.h"

/* ---- objects ---- */

struct build_obj *build_find(struct builder *b, const char *id)
{
    uintptr_t i = (uintptr_t)strmap_get(b->by_id, id);
    return i ? &b->objs[i - 1] : NULL;
}

/* The store's answer for id: fetched ahead, or asked now. */
static int get_object(struct builder *b, const char *id, const char *key, struct store_buf *buf)
{
    struct fetched *f = b->fetched ? strmap_remove(b->fetched, id) : NULL;
    if (!f)
        return store_get(b->src->store, key, IMAGE_JSON_MAX, buf);
    int rc = f->rc;
    *buf = f->buf;
    free(f);
    return rc;
}

int build_load_json(struct builder *b, const char *id, json_t **out, char *why, size_t why_len)
{
    char key[STORE_KEY_MAX + 1], jwhy[160];
    struct store_buf buf = { 0 };
    *out = NULL;
    if (schema_obj_key(id, key, sizeof key) != 0)
        return why_reject(why, why_len, "%.120s is not an object id", id);
    int rc = get_object(b, id, key, &buf);
    if (rc == -ENOENT || rc == -EFBIG || rc == -EISDIR) {
        why_set(why, why_len, "object %s (%.120s): %s", id, key,
                rc == -ENOENT  ? "missing"
                : rc == -EFBIG ? "larger than 64 MiB"
                               : "a directory");
        return rc == -ENOENT ? -ENOENT : -EINVAL;
    }
    if (rc != 0) {
        why_set(why, why_len, "object %s (%.120s): the store failed", id, key);
        return rc == -ENOMEM ? rc : -EIO;
    }
    json_t *j = hjson_loadb((const char *)buf.data, buf.len, jwhy, sizeof jwhy);
    int load_err = j ? 0 : errno;
    store_buf_free(&buf);
    if (load_err == ENOMEM) {
        why_set(why, why_len, "object %s (%.120s): out of memory", id, key);
        return -ENOMEM; /* not a malformed object: the build fails, nothing is left out */
    }
    const json_t *jid = json_object_get(j, "id");
    if (!json_is_object(j) || !hjson_text(jid) || strcmp(hjson_text(jid), id) != 0) {
        why_set(why, why_len, "object %s (%.120s): %s", id, key,
                !j ? jwhy : "not an object with a matching \"id\"");
        json_decref(j);
        return -EINVAL;
    }
    *out = j;
    return 0;
}

/* ---- what the image does not show ---- */

int build_record_omission(struct builder *b, enum image_omission_kind kind, const char *id,
                          const char *path, const char *name, const char *why)
{
    struct image *img = b->img;
    if (!path)
        return -ENOMEM; /* build_path could not make it */
    if (img->n_omissions == b->cap_omissions) {
        struct image_omission *n =
            grow_array(img->omissions, &b->cap_omissions, b->cap_omissions + 1, sizeof *n, 16);
        if (!n)
            return -ENOMEM;
        img->omissions = n;
    }
    struct image_omission o = { kind, strdup(id), name ? strdup(name) : NULL, strdup(path),
                                strdup(why) };
    if (!o.id || !o.path || !o.why || (name && !o.name)) {
        free((char *)o.id);
        free((char *)o.name);
        free((char *)o.path);
        free((char *)o.why);
        return -ENOMEM;
    }
    img->omissions[img->n_omissions++] = o;
    return 0;
}

static const char *class_word(const char *id)
{
    switch (schema_id_class(id)) {
    case 'g':
        return "group";
    case 'd':
        return "dataset";
    case 't':
        return "datatype";
    default:
        return "object";
    }
}

int build_omit(struct builder *b, enum image_omission_kind kind, const char *id, const char *path,
               const char *name, const char *why)
{
    const char *dom = b->domain_path;
    if (!path)
        return -ENOMEM; /* build_path could not make it */
    switch (kind) {
    case IMAGE_OMIT_OBJECT:
        log_error("%s: %s %s (%s): %s: left out", dom, class_word(id), path, id, why);
        break;
    case IMAGE_OMIT_PLACEHOLDER:
        log_error("%s: dataset %s (%s): %s: shown as a placeholder whose reads fail with EIO", dom,
                  path, id, why);
        break;
    case IMAGE_OMIT_CHUNK:
        log_error("%s: dataset %s (%s): %s: reads of that chunk fail with EIO", dom, path, id, why);
        break;
    case IMAGE_OMIT_ATTRIBUTE:
        log_error("%s: %s: attribute \"%s\": %s: left out", dom, path, name, why);
        break;
    case IMAGE_OMIT_LINK:
        log_error("%s: %s: link \"%s\": %s: left out", dom, path, name, why);
        break;
    }
    return build_record_omission(b, kind, id, path, name, why);
}

/* ---- links and attributes in file order ---- */

int build_creation_ordered(const json_t *obj_json)
{
    const json_t *cp = json_object_get(obj_json, "creationProperties");
    const json_t *co = json_object_get(cp, "CreateOrder");
    return json_is_true(co) || (json_is_integer(co) && json_integer_value(co) != 0);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct link_ref *)a)->name, ((const struct link_ref *)b)->name);
}

static int by_created(const void *a, const void *b)
{
    const struct link_ref *x = a, *y = b;
    if (x->created != y->created)
        return x->created < y->created ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* The members of an object (links or attributes) in the order the file should list them. */
struct link_ref *build_ordered_members(const json_t *members, int by_creation, size_t *n)
{
    *n = json_is_object(members) ? json_object_size(members) : 0;
    struct link_ref *v = calloc(*n ? *n : 1, sizeof *v);
    if (!v)
        return NULL;
    size_t i = 0;
    const char *name;
    json_t *value;
    json_object_foreach((json_t *)members, name, value)
    {
        v[i].name = name;
        v[i].json = value;
        v[i].created = json_real_value(json_object_get(value, "created"));
        i++;
    }
    qsort(v, *n, sizeof *v, by_creation ? by_created : by_name);
    return v;
}

/* A link name HDF5 accepts and a user can type: no '/', not "." , Unicode text. */
int build_link_name_ok(const char *name)
{
    return name[0] && !strchr(name, '/') && strcmp(name, ".") != 0 && !hjson_unloadable(name);
}

const char *build_hard_target(const json_t *link)
{
    const char *cls = hjson_text(json_object_get(link, "class"));
    const char *id = hjson_text(json_object_get(link, "id"));
    if (cls && strcmp(cls, "H5L_TYPE_HARD") != 0)
        return NULL;
    return id;
}

/* A name as the log shows it: an unloadable one as its JSON text. */
const char *build_shown_name(const char *name)
{
    return hjson_unloadable(name) ? name + strlen(HJSON_UNLOADABLE) : name;
}

const char *build_bad_name_why(const char *name)
{
    return hjson_unloadable(name) ? "a name that is not Unicode text (a lone UTF-16 surrogate or "
                                    "a NUL, as stored)"
                                  : "not a name HDF5 can use";
}

hid_t build_link_plist(const char *name)
{
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    for (const unsigned char *p = (const unsigned char *)name; lcpl >= 0 && *p; p++)
        if (*p >= 0x80) {
            if (H5Pset_char_encoding(lcpl, H5T_CSET_UTF8) < 0) {
                H5Pclose(lcpl);
                return H5I_INVALID_HID;
            }
            break;
        }
    return lcpl;
}

/* ---- paths, types and references ---- */

const char *build_path(struct builder *b, const struct build_obj *o)
{
    size_t len = 0;
    if (o->path || o->parent == SIZE_MAX)
        return o->path ? o->path : "/";
    for (const struct build_obj *p = o; p->parent != SIZE_MAX; p = &b->objs[p->parent])
        len += 1 + strlen(p->name);
    char *path = malloc(len + 1);
    if (!path)
        return NULL;
    path[len] = '\0';
    for (const struct build_obj *p = o; p->parent != SIZE_MAX; p = &b->objs[p->parent]) {
        size_t n = strlen(p->name);
        len -= n + 1;
        path[len] = '/';
        memcpy(path + len + 1, p->name, n);
    }
    /* the one field a const object changes: its path, made once */
    return ((struct build_obj *)o)->path = path;
}

int build_type(struct builder *b, const json_t *type, hid_t *out, char *why, size_t why_len)
{
    const char *tref = hjson_text(json_object_get(type, "id"));
    struct build_obj *t = tref ? build_find(b, tref) : NULL;
    if (t && t->cls == 't' && !t->dropped && t->hid >= 0) { /* the caller's H5Tclose is ours */
        *out = H5Iinc_ref(t->hid) >= 0 ? t->hid : H5I_INVALID_HID;
        return *out >= 0 ? 0 : why_reject(why, why_len, "HDF5 refused to share the type");
    }
    return h5type_build(type, out, why, why_len);
}

/* A reference to an object the image does not have (deleted, never linked, or left out): HSDS
 * serves such a value as it is stored, so it is read as the null reference, not an error that
 * would cost the whole chunk or attribute. Counted, and logged once per build
 * (log_dangling_refs). */
static int dangling_ref(struct builder *b, const char *id, hobj_ref_t *out)
{
    *out = 0;
    if (b->dangling_refs++ == 0)
        snprintf(b->dangling_first, sizeof b->dangling_first, "%.40s, in %.100s", id,
                 b->converting ? build_path(b, b->converting) : "?");
    return 0;
}

int build_resolve_ref(void *ctx, const char *id, hobj_ref_t *out)
{
    struct builder *b = ctx;
    struct build_obj *o = build_find(b, id);
    H5O_info_t info;
    if (!o || o->dropped)
        return dangling_ref(b, id, out);
    if (o->hid < 0 || H5Oget_info2(o->hid, &info, H5O_INFO_BASIC) < 0)
        return -ENOENT; /* not made yet: a fill value's target is made first (create_objects) */
    /* an HDF5 1.10 object reference is the object header's address (what H5Rcreate stores
     * for H5R_OBJECT), and that needs no path: fill values refer to objects not linked yet */
    *out = (hobj_ref_t)info.addr;
    return 0;
}
