/* fs_ops: the FUSE operation table (fs_operations, include/h5osfs/fs/fs.h). It calls the
 * operations of fs_dir.c, fs_file.c and fs_change.c and no file calls it: the top of the FUSE
 * layer, as libfuse's examples end in their fuse_lowlevel_ops. */
#include "fs_int.h"

/*
 * Each inode is one version of a domain whose attributes and bytes never change (inode.h), so
 * the kernel needs no re-checks of them before cached reads (auto_inval_data: one GETATTR per
 * read when attributes expire). An O_TRUNC open must not empty the kernel's view of an inode
 * that other handles still read: without atomic_o_trunc the kernel asks with a setattr, whose
 * answer is the version's size (op_setattr), and the writer's staged file alone is emptied.
 */
static void op_init(void *userdata, struct fuse_conn_info *conn)
{
    (void)userdata;
    conn->want &= ~(unsigned)(FUSE_CAP_AUTO_INVAL_DATA | FUSE_CAP_ATOMIC_O_TRUNC);
    /* READ replies from chunk files by splice (fs_file.c, reply_spliced) */
    conn->want |= conn->capable & FUSE_CAP_SPLICE_WRITE;
}

static const struct fuse_lowlevel_ops fs_ops = {
    .init = op_init,
    .lookup = op_lookup,
    .forget = op_forget,
    .forget_multi = op_forget_multi,
    .getattr = op_getattr,
    .access = op_access,
    .opendir = op_opendir,
    .readdir = op_readdir,
    .releasedir = op_releasedir,
    .open = op_open,
    .read = op_read,
    .release = op_release,
    .write = op_write,
    .flush = op_flush,
    .fsync = op_fsync,
    .statfs = op_statfs,
    .getxattr = op_getxattr,
    .listxattr = op_listxattr,
    .setattr = op_setattr,
    .mknod = op_mknod,
    .mkdir = op_mkdir,
    .unlink = op_unlink,
    .rmdir = op_rmdir,
    .symlink = op_symlink,
    .rename = op_rename,
    .link = op_link,
    .create = op_create,
    .setxattr = op_setxattr,
    .removexattr = op_removexattr,
};

const struct fuse_lowlevel_ops *fs_operations(void)
{
    return &fs_ops;
}
