/* inode: see inode.h. */
#include "inode.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/strmap.h"

struct inode {
    uint64_t nlookup;
    uint64_t generation;
    char path[];
};

struct inode_table {
    pthread_mutex_t lock;       /* guards by_path, every node's nlookup, next_generation */
    struct strmap *by_path;     /* path -> struct inode */
    uint64_t next_generation;
};

int inode_table_new(struct inode_table **out)
{
    struct inode_table *t = calloc(1, sizeof *t);
    if (!t)
        return -ENOMEM;
    t->by_path = strmap_new();
    if (!t->by_path || pthread_mutex_init(&t->lock, NULL) != 0) {
        strmap_free(t->by_path, NULL);
        free(t);
        return -ENOMEM;
    }
    t->next_generation = 1;
    *out = t;
    return 0;
}

void inode_table_free(struct inode_table *table)
{
    if (!table)
        return;
    strmap_free(table->by_path, free);
    pthread_mutex_destroy(&table->lock);
    free(table);
}

char *inode_path(struct inode_table *table, fuse_ino_t ino)
{
    if (ino == FUSE_ROOT_ID)
        return strdup("/");
    pthread_mutex_lock(&table->lock);
    /* The kernel only names inodes it has not forgotten, so the node is still alive. */
    char *path = strdup(((struct inode *)(uintptr_t)ino)->path);
    pthread_mutex_unlock(&table->lock);
    return path;
}

int inode_lookup(struct inode_table *table, const char *path, fuse_ino_t *ino, uint64_t *gen)
{
    if (strcmp(path, "/") == 0) {
        *ino = FUSE_ROOT_ID;
        *gen = 0;
        return 0;
    }
    int rc = 0;
    pthread_mutex_lock(&table->lock);
    struct inode *node = strmap_get(table->by_path, path);
    if (!node) {
        size_t len = strlen(path);
        node = malloc(sizeof *node + len + 1);
        if (!node) {
            rc = -ENOMEM;
            goto out_unlock;
        }
        memcpy(node->path, path, len + 1);
        node->nlookup = 0;
        node->generation = table->next_generation++;
        if (strmap_put(table->by_path, path, node, NULL) != 0) {
            free(node);
            rc = -ENOMEM;
            goto out_unlock;
        }
    }
    node->nlookup++;
    *ino = (fuse_ino_t)(uintptr_t)node;
    *gen = node->generation;
out_unlock:
    pthread_mutex_unlock(&table->lock);
    return rc;
}

void inode_forget(struct inode_table *table, fuse_ino_t ino, uint64_t n)
{
    if (ino == FUSE_ROOT_ID)
        return;
    pthread_mutex_lock(&table->lock);
    struct inode *node = (struct inode *)(uintptr_t)ino;
    node->nlookup = node->nlookup > n ? node->nlookup - n : 0;
    if (node->nlookup == 0) {
        strmap_remove(table->by_path, node->path);
        free(node);
    }
    pthread_mutex_unlock(&table->lock);
}
