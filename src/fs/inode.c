/* inode: see inode.h. */
#include "inode.h"

#include <errno.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/util/grow.h"
#include "h5osfs/util/strmap.h"

struct inode {
    struct inode *prev, *next; /* every node, current or not: all are freed at unmount */
    uint64_t nlookup;
    uint64_t generation;
    char *path;          /* changes on rename; the node (its ino) does not */
    int current;         /* the node by_path has for its path (not replaced since) */
    uint64_t version;    /* see inode.h */
    struct ns_info info; /* attributes of that version, as the last lookup gave them */
    int written;         /* a writer's node (inode_writer_node) */
    int cached;          /* a reader opened it (inode_reader_open) */
    pid_t looked_up_by;  /* the thread of its lookups (inode_lookup_by), 0: none known */
    int shared;          /* another thread looked it up too (a reader may open it) */
};

struct inode_table {
    pthread_mutex_t lock;   /* guards by_path, the node list, every node's fields */
    struct strmap *by_path; /* path -> its current struct inode */
    struct strmap *writing; /* path -> the thread whose next lookup of it is a writer's */
    struct inode all;       /* head of the list of every node */
    uint64_t next_generation;
};

static void free_node(struct inode *node)
{
    node->prev->next = node->next;
    node->next->prev = node->prev;
    free(node->path);
    free(node);
}

int inode_table_new(struct inode_table **out)
{
    struct inode_table *t = calloc(1, sizeof *t);
    if (!t)
        return -ENOMEM;
    t->by_path = strmap_new();
    t->writing = strmap_new();
    if (!t->by_path || !t->writing || pthread_mutex_init(&t->lock, NULL) != 0) {
        strmap_free(t->by_path, NULL);
        strmap_free(t->writing, NULL);
        free(t);
        return -ENOMEM;
    }
    t->next_generation = 1;
    t->all.prev = t->all.next = &t->all;
    *out = t;
    return 0;
}

void inode_table_free(struct inode_table *table)
{
    if (!table)
        return;
    strmap_free(table->by_path, NULL);
    strmap_free(table->writing, NULL);
    while (table->all.next != &table->all)
        free_node(table->all.next); /* the kernel's last references went with the mount */
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

int inode_get(struct inode_table *table, fuse_ino_t ino, char **path, uint64_t *version,
              struct ns_info *info)
{
    if (ino == FUSE_ROOT_ID) {
        *version = INODE_NO_VERSION;
        memset(info, 0, sizeof *info);
        *path = strdup("/");
        return *path ? 0 : -ENOMEM;
    }
    pthread_mutex_lock(&table->lock);
    const struct inode *node = (const struct inode *)(uintptr_t)ino;
    *path = strdup(node->path);
    *version = node->version;
    *info = node->info;
    pthread_mutex_unlock(&table->lock);
    return *path ? 0 : -ENOMEM;
}

static struct inode *node_new(struct inode_table *table, const char *path)
{
    struct inode *node = calloc(1, sizeof *node);
    if (node)
        node->path = strdup(path);
    if (!node || !node->path) {
        free(node);
        return NULL;
    }
    node->generation = table->next_generation++;
    node->next = table->all.next;
    node->prev = &table->all;
    node->next->prev = node;
    table->all.next = node;
    return node;
}

/* The path's node for version, made (and put in by_path, replacing an older version's) when
 * it has none. NULL on ENOMEM. */
static struct inode *node_for(struct inode_table *table, const char *path, uint64_t version)
{
    struct inode *node = strmap_get(table->by_path, path), *old = NULL;
    if (node && node->version == version)
        return node;
    struct inode *fresh = node_new(table, path);
    if (!fresh)
        return NULL;
    fresh->version = version;
    if (strmap_put(table->by_path, path, fresh, (void **)&old) != 0) {
        free_node(fresh);
        return NULL;
    }
    fresh->current = 1;
    if (old)
        old->current = 0; /* lives on for the kernel's references to that version */
    return fresh;
}

/* Count one lookup of node, handed out with the attributes info (locked). */
static void hand_out(struct inode *node, const struct ns_info *info, fuse_ino_t *ino, uint64_t *gen)
{
    node->info = *info;
    node->nlookup++;
    *ino = (fuse_ino_t)(uintptr_t)node;
    *gen = node->generation;
}

int inode_lookup(struct inode_table *table, const char *path, uint64_t version,
                 const struct ns_info *info, fuse_ino_t *ino, uint64_t *gen)
{
    if (strcmp(path, "/") == 0) {
        *ino = FUSE_ROOT_ID;
        *gen = 0;
        return 0;
    }
    pthread_mutex_lock(&table->lock);
    struct inode *node = node_for(table, path, version);
    if (node)
        hand_out(node, info, ino, gen);
    pthread_mutex_unlock(&table->lock);
    return node ? 0 : -ENOMEM;
}

void inode_settle(struct inode_table *table, fuse_ino_t ino, uint64_t version,
                  const struct ns_info *info)
{
    if (ino == FUSE_ROOT_ID)
        return;
    pthread_mutex_lock(&table->lock);
    struct inode *node = (struct inode *)(uintptr_t)ino;
    if (node->version == INODE_STAGED) {
        node->version = version;
        node->info = *info;
    }
    pthread_mutex_unlock(&table->lock);
}

/* A writer's node for path at version, of the kernel's references but never the path's: a
 * lookup of the path by anyone else gets the readers' node (locked). NULL on ENOMEM. */
static struct inode *writer_node(struct inode_table *table, const char *path, uint64_t version)
{
    struct inode *node = node_new(table, path);
    if (node) {
        node->version = version;
        node->written = 1;
    }
    return node;
}

/* tid's wish that its next lookup of path hand out a writer's node (locked): 0 or -ENOMEM. */
static int wish(struct inode_table *table, const char *path, pid_t tid)
{
    return strmap_put(table->writing, path, (void *)(intptr_t)tid, NULL) != 0 ? -ENOMEM : 0;
}

static int wished_by(const struct inode_table *table, const char *path, pid_t tid)
{
    void *waiting = strmap_get(table->writing, path);
    return waiting && (pid_t)(intptr_t)waiting == tid;
}

int inode_lookup_by(struct inode_table *table, const char *path, uint64_t version,
                    const struct ns_info *info, pid_t tid, fuse_ino_t *ino, uint64_t *gen)
{
    if (strcmp(path, "/") == 0)
        return inode_lookup(table, path, version, info, ino, gen);
    pthread_mutex_lock(&table->lock);
    /* the wish stays until the writer opens a writer's node (inode_writer_node): the kernel
     * may look the name up twice, and forget the first answer, which differs from its entry */
    struct inode *node = wished_by(table, path, tid) ? writer_node(table, path, version)
                                                     : node_for(table, path, version);
    if (node) {
        hand_out(node, info, ino, gen);
        node->shared |= node->looked_up_by && node->looked_up_by != tid;
        node->looked_up_by = tid;
    }
    pthread_mutex_unlock(&table->lock);
    return node ? 0 : -ENOMEM;
}

int inode_lookup_writer(struct inode_table *table, const char *path, uint64_t version,
                        const struct ns_info *info, fuse_ino_t *ino, uint64_t *gen)
{
    pthread_mutex_lock(&table->lock);
    struct inode *node = writer_node(table, path, version);
    if (node)
        hand_out(node, info, ino, gen);
    pthread_mutex_unlock(&table->lock);
    return node ? 0 : -ENOMEM;
}

int inode_writer_wanted(struct inode_table *table, const char *path, pid_t tid)
{
    pthread_mutex_lock(&table->lock);
    int rc = wish(table, path, tid);
    pthread_mutex_unlock(&table->lock);
    return rc;
}

int inode_writer_node(struct inode_table *table, fuse_ino_t ino, pid_t tid)
{
    if (ino == FUSE_ROOT_ID)
        return 0;
    pthread_mutex_lock(&table->lock);
    struct inode *node = (struct inode *)(uintptr_t)ino;
    int rc = 0;
    if (node->written) {
        if (wished_by(table, node->path, tid))
            strmap_remove(table->writing, node->path); /* the wish is granted */
    } else if (node->version == INODE_STAGED || node->version == INODE_NO_VERSION) {
        rc = 0; /* a staged file's readers read past the page cache already */
    } else if (!node->cached && !node->shared && node->looked_up_by == tid) {
        /* only the writer's own lookups handed it out, and no reader holds its pages: the
         * writer's, no longer the path's (a node another thread looked up may be opened by
         * a reader any time, and a reader's second open must never meet a writer's node) */
        node->written = 1;
        if (node->current)
            strmap_remove(table->by_path, node->path);
        node->current = 0;
    } else {
        rc = wish(table, node->path, tid) != 0 ? -ENOMEM : 1;
    }
    pthread_mutex_unlock(&table->lock);
    return rc;
}

int inode_is_writers(struct inode_table *table, fuse_ino_t ino)
{
    if (ino == FUSE_ROOT_ID)
        return 0;
    pthread_mutex_lock(&table->lock);
    int written = ((const struct inode *)(uintptr_t)ino)->written;
    pthread_mutex_unlock(&table->lock);
    return written;
}

int inode_reader_open(struct inode_table *table, fuse_ino_t ino)
{
    if (ino == FUSE_ROOT_ID)
        return 0;
    pthread_mutex_lock(&table->lock);
    struct inode *node = (struct inode *)(uintptr_t)ino;
    int rc = node->written ? -ESTALE : 0;
    node->cached |= !node->written; /* from now on no writer takes it (inode_writer_node) */
    pthread_mutex_unlock(&table->lock);
    return rc;
}

fuse_ino_t inode_of(struct inode_table *table, const char *path)
{
    if (strcmp(path, "/") == 0)
        return FUSE_ROOT_ID;
    pthread_mutex_lock(&table->lock);
    fuse_ino_t ino = (fuse_ino_t)(uintptr_t)strmap_get(table->by_path, path);
    pthread_mutex_unlock(&table->lock);
    return ino;
}

void inode_forget(struct inode_table *table, fuse_ino_t ino, uint64_t n)
{
    if (ino == FUSE_ROOT_ID)
        return;
    pthread_mutex_lock(&table->lock);
    struct inode *node = (struct inode *)(uintptr_t)ino;
    node->nlookup = node->nlookup > n ? node->nlookup - n : 0;
    if (node->nlookup == 0) {
        if (node->current)
            strmap_remove(table->by_path, node->path);
        free_node(node);
    }
    pthread_mutex_unlock(&table->lock);
}

/* ---- rename ---- */

struct moved {
    const char *from;
    size_t from_len;
    struct inode **nodes;
    size_t n, cap;
    int failed;
};

/* Is path from (of length len) or below it? */
static int at_or_below(const char *path, const char *from, size_t len)
{
    return strncmp(path, from, len) == 0 && (!path[len] || path[len] == '/');
}

static int collect_moved(const char *key, void *value, void *ctx)
{
    struct moved *m = ctx;
    if (!at_or_below(key, m->from, m->from_len))
        return 0;
    if (m->n == m->cap) {
        struct inode **n = grow_array(m->nodes, &m->cap, m->cap + 1, sizeof *n, 16);
        if (!n) {
            m->failed = 1;
            return 0;
        }
        m->nodes = n;
    }
    m->nodes[m->n++] = value;
    return 1; /* out of the map; put back under the new path below */
}

/* Writers' nodes are no path's (writer_node), so the map does not move them (locked). */
static int rename_writers(struct inode_table *table, const char *from, const char *to)
{
    size_t from_len = strlen(from);
    for (struct inode *node = table->all.next; node != &table->all; node = node->next) {
        char *path = NULL;
        if (!node->written || node->current || !at_or_below(node->path, from, from_len))
            continue;
        if (asprintf(&path, "%s%s", to, node->path + from_len) < 0)
            return -ENOMEM;
        free(node->path);
        node->path = path;
    }
    return 0;
}

int inode_rename(struct inode_table *table, const char *from, const char *to)
{
    struct moved m = { from, strlen(from), NULL, 0, 0, 0 };
    pthread_mutex_lock(&table->lock);
    int rc = rename_writers(table, from, to);
    strmap_filter(table->by_path, collect_moved, &m);
    for (size_t i = 0; i < m.n; i++) {
        struct inode *node = m.nodes[i];
        char *path = NULL;
        if (asprintf(&path, "%s%s", to, node->path + m.from_len) < 0) {
            rc = -ENOMEM;
            path = NULL;
        }
        if (path) {
            free(node->path);
            node->path = path;
        }
        /* a node displaced here (the target's old node) keeps its ino and its version's
         * attributes, but is no longer the path's */
        struct inode *old = NULL;
        if (strmap_put(table->by_path, node->path, node, (void **)&old) != 0) {
            node->current = 0;
            rc = -ENOMEM;
        }
        if (old && old != node)
            old->current = 0;
    }
    pthread_mutex_unlock(&table->lock);
    free(m.nodes);
    return rc ? rc : m.failed ? -ENOMEM : 0;
}
