/*
 * imagefolder_scan.h - internal to the image-folder reader: the split's state and the folder walk
 * (imagefolder_scan.c) that fills it; imagefolder.c reads, numbers and opens.
 */
#ifndef DTRAIN_IMAGEFOLDER_SCAN_H
#define DTRAIN_IMAGEFOLDER_SCAN_H

#include "base/status.h"

#include <stddef.h>
#include <stdint.h>

#define IF_PATH_MAX 4096
#define IF_MAX_DEPTH 16                /* folders below a class: deeper is a symlink loop */
#define IF_MAX_FILE_BYTES (256u << 20) /* one image file */
#define IF_MAX_IMAGES ((size_t)UINT32_MAX)

/* A growable string arena: strings end in NUL and are found by their offset. */
typedef struct arena {
    char *p;
    size_t len, cap;
} arena;

/* A growable array of offsets (or indices). */
typedef struct offs {
    size_t *v;
    size_t n, cap;
} offs;

/* torchvision's IMG_EXTENSIONS less dtrain's own (.jpg, .jpeg, .png): imagefolder_other_ext. */
enum { IF_OTHER_EXTS = 6 };
extern const char *const imagefolder_other_exts[IF_OTHER_EXTS];

typedef struct if_impl {
    char root[IF_PATH_MAX]; /* the split's folder: ROOT, ROOT/train or ROOT/val */
    arena names;            /* class names, then image paths relative to root */
    size_t *cls;            /* classes: offset of each class's name */
    size_t *first;          /* classes + 1: the first image of each class; [classes] = count */
    size_t *img;            /* count: offset of each image's path */
    size_t ignored;         /* entries that are not images (hidden, other names, not regular) */
    /* Regular files with an image extension that torchvision's ImageFolder reads and dtrain does
     * not (IF_OTHER_EXTS, in that order): said, since they make the sample counts differ. */
    size_t other_images[IF_OTHER_EXTS];
    /* Symlinks with an image's name whose target is gone (a dataset linked from a place that
     * moved): skipped, where torchvision's ImageFolder would list them and fail reading them;
     * said with the first one's path, since the sample count is short by them. */
    size_t broken;
    char broken_first[IF_PATH_MAX];
    int nfolders; /* class folders here: the entries of cls and first (less first's end) */
    /* A class folder holds an entry named as a dataset's marker file (imagefolder_marked). */
    int marked;
    /* The label of each class folder when another split numbers them (a val/ folder follows its
     * train/, whose classes it may not all have): NULL, the folder's own sorted order. The
     * split's class count is then the other split's, which may exceed nfolders. */
    int32_t *label_of;
} if_impl;

/* DT_ERR_NOMEM naming what was being scanned. */
dt_status imagefolder_nomem(const char *what);
/* The class folders of root, their names added to names and their offsets, sorted by name (strcmp),
 * into cls (the caller frees cls->v, also on error); entries that are not folders counted in
 * *ignored. Fails when root cannot be read, holds no class folder or more than DS_MAX_CLASSES. */
dt_status imagefolder_list_classes(const char *root, arena *names, offs *cls, size_t *ignored);
/* The class folders of f->root, sorted, into f->cls and f->nfolders (also *classes); then every
 * class's images, in torchvision's order, into f->img and f->first (*count of them). On error f
 * holds what was found so far, for if_free. */
dt_status imagefolder_scan(if_impl *f, int *classes, size_t *count);

#endif
