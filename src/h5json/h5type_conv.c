/* h5type_conv: the HDF5 conversions behind h5type_to_json_closest's stand-ins. HDF5 converts
 * bitfields only to bitfields and time types to nothing; these soft conversions give a
 * bitfield's bits to an unsigned integer of the same size and a time value's bytes to an
 * opaque type of the same size, so H5Dread and H5Aread fill a buffer of the stand-in type like
 * any other. See include/h5osfs/h5json/h5type.h. */
#include "h5osfs/h5json/h5type.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

struct bits_layout {
    size_t size, offset, precision;
    int big_endian;
};

static int layout_of(hid_t tid, struct bits_layout *l)
{
    H5T_order_t order = H5Tget_order(tid);
    int offset = H5Tget_offset(tid);
    l->size = H5Tget_size(tid);
    l->precision = H5Tget_precision(tid);
    l->big_endian = order == H5T_ORDER_BE;
    if (offset < 0 || l->size == 0 || l->size > 8 || l->precision == 0 ||
        (order != H5T_ORDER_LE && order != H5T_ORDER_BE && l->size > 1))
        return -1;
    l->offset = (size_t)offset;
    return l->offset + l->precision <= l->size * 8 ? 0 : -1;
}

static uint64_t load(const unsigned char *p, const struct bits_layout *l)
{
    uint64_t v = 0;
    for (size_t i = 0; i < l->size; i++)
        v |= (uint64_t)p[l->big_endian ? l->size - 1 - i : i] << (8 * i);
    uint64_t mask = l->precision >= 64 ? UINT64_MAX : ((uint64_t)1 << l->precision) - 1;
    return (v >> l->offset) & mask;
}

static void store(unsigned char *p, uint64_t v, const struct bits_layout *l)
{
    for (size_t i = 0; i < l->size; i++)
        p[l->big_endian ? l->size - 1 - i : i] = (unsigned char)(v >> (8 * i));
}

/* Same-size conversions only, so HDF5 converts in place with one stride. */
static herr_t bitfield_to_uint(hid_t src, hid_t dst, H5T_cdata_t *cdata, size_t n,
                               size_t buf_stride, size_t bkg_stride, void *buf, void *bkg,
                               hid_t dxpl)
{
    (void)bkg_stride, (void)bkg, (void)dxpl;
    struct bits_layout from, to;
    if (layout_of(src, &from) != 0 || layout_of(dst, &to) != 0 || from.size != to.size ||
        H5Tget_sign(dst) != H5T_SGN_NONE || to.offset != 0 || to.precision != to.size * 8)
        return -1;
    if (cdata->command == H5T_CONV_INIT) {
        cdata->need_bkg = H5T_BKG_NO;
        return 0;
    }
    if (cdata->command != H5T_CONV_CONV)
        return 0;
    unsigned char *p = buf;
    size_t step = buf_stride ? buf_stride : from.size;
    for (size_t i = 0; i < n; i++, p += step)
        store(p, load(p, &from), &to);
    return 0;
}

/* A time type's bytes, as they are, into an opaque type of the same size. */
static herr_t time_to_opaque(hid_t src, hid_t dst, H5T_cdata_t *cdata, size_t n, size_t buf_stride,
                             size_t bkg_stride, void *buf, void *bkg, hid_t dxpl)
{
    (void)n, (void)buf_stride, (void)bkg_stride, (void)buf, (void)bkg, (void)dxpl;
    if (H5Tget_size(src) != H5Tget_size(dst) || H5Tget_size(src) == 0)
        return -1;
    if (cdata->command == H5T_CONV_INIT)
        cdata->need_bkg = H5T_BKG_NO;
    return 0; /* same size, converted in place: every byte is already where it belongs */
}

static pthread_once_t registered = PTHREAD_ONCE_INIT;
static int register_rc;

static void register_once(void)
{
    hid_t opaque = H5Tcreate(H5T_OPAQUE, 1);
    register_rc = opaque < 0 ||
                          H5Tregister(H5T_PERS_SOFT, "h5osfs bitfield to unsigned integer",
                                      H5T_NATIVE_B8, H5T_NATIVE_UCHAR, bitfield_to_uint) < 0 ||
                          H5Tregister(H5T_PERS_SOFT, "h5osfs time to opaque", H5T_UNIX_D32LE,
                                      opaque, time_to_opaque) < 0
                      ? -1
                      : 0;
    if (opaque >= 0 && H5Tclose(opaque) < 0)
        register_rc = -1;
}

int h5type_register_stand_ins(void)
{
    if (pthread_once(&registered, register_once) != 0)
        return -1;
    return register_rc;
}
