/* vfd: see vfd.h. The driver is registered once, on first use, under a lock. */
#include "vfd.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <H5FDpublic.h>

struct vfd_file {
    H5FD_t pub; /* first: the library sees an H5FD_t */
    struct vfd_target *target;
    haddr_t eoa;
    haddr_t eof;
};

struct vfd_info {
    struct vfd_target *target;
};

#define VFD_MAXADDR (((haddr_t)1 << 62) - 1)
#define VFD_PAGE 4096

static H5FD_t *vfd_open(const char *name, unsigned flags, hid_t fapl, haddr_t maxaddr)
{
    (void)name, (void)flags, (void)maxaddr;
    const struct vfd_info *info = H5Pget_driver_info(fapl);
    if (!info || !info->target)
        return NULL;
    struct vfd_file *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->target = info->target;
    return &f->pub;
}

static herr_t vfd_close(H5FD_t *file)
{
    struct vfd_file *f = (struct vfd_file *)file;
    f->target->eoa = f->eoa;
    free(f);
    return 0;
}

static int vfd_cmp(const H5FD_t *a, const H5FD_t *b)
{
    const struct vfd_file *fa = (const struct vfd_file *)a, *fb = (const struct vfd_file *)b;
    return fa->target < fb->target ? -1 : fa->target > fb->target;
}

static herr_t vfd_query(const H5FD_t *file, unsigned long *flags)
{
    (void)file;
    /* Aggregating metadata keeps it in few, large runs: fewer segments to search on read.
     * Small raw data is not aggregated: every chunk gets its own page-aligned allocation
     * (vfd_alloc), so no page holds bytes of two chunks. */
    *flags = H5FD_FEAT_AGGREGATE_METADATA | H5FD_FEAT_ACCUMULATE_METADATA;
    return 0;
}

/*
 * The kernel reads a FUSE file in whole pages. Every allocation from the end of the file
 * starts on a page, so a chunk that cannot be read never shares a page with another object's
 * bytes, and its EIO stays its own. The holes cost no memory. (HDF5's own H5Pset_alignment
 * does the same through its free-space manager and made a 100,000-chunk build 250 times
 * slower.)
 */
static haddr_t vfd_alloc(H5FD_t *file, H5FD_mem_t type, hid_t dxpl, hsize_t size)
{
    (void)type, (void)dxpl;
    struct vfd_file *f = (struct vfd_file *)file;
    haddr_t addr = (f->eoa + VFD_PAGE - 1) & ~(haddr_t)(VFD_PAGE - 1);
    if (addr + size > VFD_MAXADDR || addr + size < addr)
        return HADDR_UNDEF;
    f->eoa = addr + size;
    return addr;
}

static haddr_t vfd_get_eoa(const H5FD_t *file, H5FD_mem_t type)
{
    (void)type;
    return ((const struct vfd_file *)file)->eoa;
}

static herr_t vfd_set_eoa(H5FD_t *file, H5FD_mem_t type, haddr_t addr)
{
    (void)type;
    ((struct vfd_file *)file)->eoa = addr;
    return 0;
}

static haddr_t vfd_get_eof(const H5FD_t *file, H5FD_mem_t type)
{
    (void)type;
    return ((const struct vfd_file *)file)->eof;
}

static herr_t vfd_read(H5FD_t *file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size,
                       void *buf)
{
    (void)type, (void)dxpl;
    extent_read(((struct vfd_file *)file)->target->map, addr, buf, size);
    return 0;
}

/* The fill write of the next chunk of a dense dataset: recorded as that chunk, its bytes
 * dropped. A write that does not fit marks the run broken (the builder declares the chunks one
 * by one instead). */
static int dense_chunk(struct vfd_target *t, haddr_t addr, size_t size)
{
    struct vfd_dense *d = &t->dense;
    if (d->broken || size != d->chunk_bytes || d->next >= d->n) {
        d->broken = 1;
        return 0;
    }
    return extent_write_chunk(t->map, addr, size, (struct extent_tag){ d->dset, d->next++ });
}

static herr_t vfd_write(H5FD_t *file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size,
                        const void *buf)
{
    (void)dxpl;
    struct vfd_file *f = (struct vfd_file *)file;
    struct vfd_target *t = f->target;
    int rc;
    if (buf == t->placeholder) {
        rc = extent_write_chunk(t->map, addr, size, t->tag);
        t->placeholders++;
    } else if (t->dense.on && type == H5FD_MEM_DRAW) {
        rc = dense_chunk(t, addr, size);
    } else {
        rc = extent_write_bytes(t->map, addr, buf, size);
    }
    if (rc != 0 && !t->failed)
        t->failed = rc;
    /* HDF5 1.10 leaves a file whose close failed half freed in its id table (closing it again,
     * or at exit, crashes), and so an object whose close failed: the flush at the close of the
     * file or an object is told it wrote, the build reports failed */
    if (rc != 0 && !t->closing)
        return -1;
    if (addr + size > f->eof)
        f->eof = addr + size;
    return 0;
}

static herr_t vfd_truncate(H5FD_t *file, hid_t dxpl, hbool_t closing)
{
    (void)dxpl, (void)closing;
    struct vfd_file *f = (struct vfd_file *)file;
    f->eof = f->eoa;
    return 0;
}

static herr_t vfd_lock(H5FD_t *file, hbool_t rw)
{
    (void)file, (void)rw;
    return 0; /* the file exists only in this process */
}

static herr_t vfd_unlock(H5FD_t *file)
{
    (void)file;
    return 0;
}

static const H5FD_class_t vfd_class = {
    .name = "h5osfs_image",
    .maxaddr = VFD_MAXADDR,
    .fc_degree = H5F_CLOSE_WEAK,
    .fapl_size = sizeof(struct vfd_info),
    .open = vfd_open,
    .close = vfd_close,
    .cmp = vfd_cmp,
    .query = vfd_query,
    .alloc = vfd_alloc,
    .get_eoa = vfd_get_eoa,
    .set_eoa = vfd_set_eoa,
    .get_eof = vfd_get_eof,
    .read = vfd_read,
    .write = vfd_write,
    .truncate = vfd_truncate,
    .lock = vfd_lock,
    .unlock = vfd_unlock,
    .fl_map = H5FD_FLMAP_DICHOTOMY,
};

static pthread_once_t vfd_once = PTHREAD_ONCE_INIT;
static hid_t vfd_driver_id = H5I_INVALID_HID; /* written once under vfd_once */

static void vfd_register(void)
{
    vfd_driver_id = H5FDregister(&vfd_class);
}

hid_t vfd_fapl(struct vfd_target *target)
{
    if (pthread_once(&vfd_once, vfd_register) != 0 || vfd_driver_id < 0)
        return H5I_INVALID_HID;
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0)
        return H5I_INVALID_HID;
    struct vfd_info info = { target };
    if (H5Pset_driver(fapl, vfd_driver_id, &info) < 0) {
        H5Pclose(fapl);
        return H5I_INVALID_HID;
    }
    return fapl;
}
