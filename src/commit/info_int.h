/* info_int.h: what the summary (info.c) shares with the scan of a root (info_scan.c). */
#ifndef H5OSFS_COMMIT_INFO_INT_H
#define H5OSFS_COMMIT_INFO_INT_H

#include <jansson.h>

#define INFO_DATASET_JSON_MAX (64u << 20) /* a CHUNKED_REF layout lists every chunk */

/* HSDS's getDatasetLayout: a dataset JSON's creation properties' layout first, else its
 * stored one (NULL: neither). */
const json_t *info_dataset_layout(const json_t *doc);

#endif
