/*
 * repair: undo what HSDS's loader (h5pyd's hsload) is known to change in a file that readers
 * depend on, where the change is unambiguous (doc/image.md, "Repairs"). -o no_repairs shows
 * the bucket as stored.
 */
#include "build.h"

#include <string.h>

#include "h5osfs/schema/hjson.h"

static int text_is(const json_t *v, const char *want)
{
    const char *t = hjson_text(v);
    return t && strcmp(t, want) == 0;
}

/* A scalar fixed-length NULLPAD string whose value fills its type exactly: how hsload stores
 * a NULLTERM string (it keeps the characters and drops the terminator). */
static int lost_its_terminator(const json_t *attr)
{
    const json_t *type = json_object_get(attr, "type"), *v = json_object_get(attr, "value");
    const json_t *len = json_object_get(type, "length");
    return text_is(json_object_get(type, "class"), "H5T_STRING") &&
           text_is(json_object_get(type, "strPad"), "H5T_STR_NULLPAD") &&
           text_is(json_object_get(json_object_get(attr, "shape"), "class"), "H5S_SCALAR") &&
           json_is_integer(len) && json_is_string(v) &&
           json_integer_value(len) == (json_int_t)json_string_length(v) &&
           !memchr(json_string_value(v), '\0', json_string_length(v));
}

/* The object is a dimension scale as HDF5's H5DS marks one. */
static int is_dimension_scale(const json_t *obj)
{
    const json_t *cls = json_object_get(json_object_get(obj, "attributes"), "CLASS");
    return text_is(json_object_get(cls, "value"), "DIMENSION_SCALE");
}

json_t *build_repaired_attr(const json_t *obj, const char *name, const json_t *attr)
{
    /* H5DSis_scale compares CLASS as a C string and netCDF reads NAME as one: both are
     * NULLTERM in every file H5DS or netCDF writes */
    if ((strcmp(name, "CLASS") != 0 && strcmp(name, "NAME") != 0) || !lost_its_terminator(attr) ||
        !is_dimension_scale(obj))
        return NULL;
    json_t *fixed = json_deep_copy(attr);
    json_t *type = json_object_get(fixed, "type");
    json_int_t len = json_integer_value(json_object_get(type, "length"));
    if (!type || json_object_set_new(type, "length", json_integer(len + 1)) != 0 ||
        json_object_set_new(type, "strPad", json_string("H5T_STR_NULLTERM")) != 0) {
        json_decref(fixed);
        return NULL;
    }
    return fixed;
}
