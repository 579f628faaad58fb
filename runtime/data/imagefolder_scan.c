/*
 * imagefolder_scan.c - the image-folder reader's folder walk: lists a split's class folders and
 * every image below each, in torchvision's order (datasets.folder.make_dataset: symlinked folders
 * followed, ordered by (folder path, file name)), into the split's string arena. Only names
 * ending in .jpg, .jpeg or .png (any case) count; hidden entries and anything not a regular file
 * are counted as ignored.
 */
#include "runtime/data/imagefolder_scan.h"
#include "runtime/data/reader.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* Appends s1 (then '/' and s2 when s2 is not NULL) to a, its offset in *at; -1 when out of memory. */
static int imagefolder_arena_add(arena *a, const char *s1, const char *s2, size_t *at)
{
    const size_t n1 = strlen(s1), n2 = s2 ? strlen(s2) + 1 : 0, need = n1 + n2 + 1;
    if (a->cap - a->len < need) {
        size_t cap = a->cap ? a->cap : 4096;
        while (cap - a->len < need) cap *= 2;
        char *p = realloc(a->p, cap);
        if (!p) return -1;
        a->p = p, a->cap = cap;
    }
    *at = a->len;
    memcpy(a->p + a->len, s1, n1);
    if (s2) {
        a->p[a->len + n1] = '/';
        memcpy(a->p + a->len + n1 + 1, s2, n2 - 1);
    }
    a->p[a->len + need - 1] = '\0';
    a->len += need;
    return 0;
}

/* Appends x to o; -1 when out of memory. */
static int imagefolder_offs_add(offs *o, size_t x)
{
    if (o->n == o->cap) {
        const size_t cap = o->cap ? o->cap * 2 : 256;
        size_t *v = realloc(o->v, cap * sizeof *v);
        if (!v) return -1;
        o->v = v, o->cap = cap;
    }
    o->v[o->n++] = x;
    return 0;
}

static int is_image_name(const char *n)
{
    const size_t l = strlen(n);
    return (l > 4 && (strcasecmp(n + l - 4, ".jpg") == 0 || strcasecmp(n + l - 4, ".png") == 0)) ||
           (l > 5 && strcasecmp(n + l - 5, ".jpeg") == 0);
}

const char *const imagefolder_other_exts[IF_OTHER_EXTS] = {".webp", ".bmp", ".tif", ".tiff", ".ppm", ".pgm"};

/* The index in imagefolder_other_exts of n's extension (any case), or -1. */
static int other_image_ext(const char *n)
{
    const char *dot = strrchr(n, '.');
    for (int i = 0; dot && i < IF_OTHER_EXTS; i++)
        if (strcasecmp(dot, imagefolder_other_exts[i]) == 0) return i;
    return -1;
}

static dt_status dir_error(const char *path, int err)
{
    if (err == EACCES)
        return status_set_error(DT_ERR_IO,
                                "cannot read directory %s: permission denied; let the user running dtrain "
                                "list it (chmod -R a+rX on the dataset)",
                                path);
    return status_set_error(DT_ERR_IO, "cannot read directory %s: %s", path, strerror(err));
}

/* 'd' (a directory, symlinks followed), 'f' (a regular file) or 0 (anything else) for entry e of
 * the directory at dir; stat only when readdir's type does not say. */
static int entry_kind(const char *dir, const struct dirent *e)
{
    if (e->d_type == DT_DIR) return 'd';
    if (e->d_type == DT_REG) return 'f';
    if (e->d_type != DT_LNK && e->d_type != DT_UNKNOWN) return 0;
    char p[IF_PATH_MAX];
    struct stat sb;
    if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= sizeof p || stat(p, &sb) != 0) return 0;
    return S_ISDIR(sb.st_mode) ? 'd' : S_ISREG(sb.st_mode) ? 'f' : 0;
}

/* Whether entry e of dir is a symlink whose target does not exist (entry_kind gave 0). */
static int dangling_link(const char *dir, const struct dirent *e)
{
    if (e->d_type != DT_LNK && e->d_type != DT_UNKNOWN) return 0;
    char p[IF_PATH_MAX];
    struct stat sb;
    if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= sizeof p) return 0;
    return lstat(p, &sb) == 0 && S_ISLNK(sb.st_mode) && stat(p, &sb) != 0 && errno == ENOENT;
}

/* One image found in a class: the folder it is in (index into the walk's folder list) and its
 * name, both offsets into the walk's arena. */
typedef struct found {
    size_t dir, name;
} found;

typedef struct walk {
    arena a;    /* folder paths relative to the split's folder, and file names */
    offs dirs;  /* offsets of folder paths */
    offs depth; /* per folder: how far below the class folder */
    found *files;
    size_t nfiles, capfiles;
} walk;

static int walk_cmp(const void *x, const void *y, void *arg)
{
    const walk *w = arg;
    const found *a = x, *b = y;
    const int d = strcmp(w->a.p + w->dirs.v[a->dir], w->a.p + w->dirs.v[b->dir]);
    return d ? d : strcmp(w->a.p + a->name, w->a.p + b->name);
}

dt_status imagefolder_nomem(const char *what)
{
    return status_set_error(DT_ERR_NOMEM, "out of memory scanning %s", what);
}

/* One entry e of folder d (path dir) of class cname: a subfolder to walk, an image to keep, or
 * something counted as ignored (an image of another format, a broken link: counted for the
 * warnings too). */
static dt_status scan_entry(if_impl *f, walk *w, size_t d, const char *dir, const struct dirent *e, const char *cname)
{
    if (e->d_name[0] == '.') {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) f->ignored++;
        return DT_OK;
    }
    if (d == 0 && !f->marked && ds_marker_name(e->d_name)) f->marked = 1;
    const int kind = entry_kind(dir, e);
    size_t at;
    if (kind == 'd') {
        if (w->depth.v[d] + 1 > IF_MAX_DEPTH)
            return status_set_error(DT_ERR_INVALID_ARG,
                                    "%s/%s is nested more than %d folders below its class "
                                    "folder %s/%s: a symlink loop? remove the loop or flatten the folders",
                                    dir, e->d_name, IF_MAX_DEPTH, f->root, cname);
        const size_t parent = w->dirs.v[d], depth = w->depth.v[d] + 1;
        /* arena_add may move w->a.p: copy the parent's path out first */
        char rel[IF_PATH_MAX];
        snprintf(rel, sizeof rel, "%s", w->a.p + parent);
        if (imagefolder_arena_add(&w->a, rel, e->d_name, &at) || imagefolder_offs_add(&w->dirs, at) ||
            imagefolder_offs_add(&w->depth, depth))
            return imagefolder_nomem(f->root);
        return DT_OK;
    }
    if (kind == 'f' && is_image_name(e->d_name)) {
        if (w->nfiles == w->capfiles) {
            const size_t cap = w->capfiles ? w->capfiles * 2 : 256;
            found *nf = realloc(w->files, cap * sizeof *nf);
            if (!nf) return imagefolder_nomem(f->root);
            w->files = nf, w->capfiles = cap;
        }
        if (imagefolder_arena_add(&w->a, e->d_name, NULL, &at)) return imagefolder_nomem(f->root);
        w->files[w->nfiles++] = (found){d, at};
        return DT_OK;
    }
    const int other = kind == 'f' ? other_image_ext(e->d_name) : -1;
    if (other >= 0) f->other_images[other]++;
    /* The first one's path, for the warning (cut short if it must be). */
    if (kind == 0 && is_image_name(e->d_name) && dangling_link(dir, e) && f->broken++ == 0 &&
        (size_t)snprintf(f->broken_first, sizeof f->broken_first, "%s/%s", dir, e->d_name) >= sizeof f->broken_first)
        f->broken_first[sizeof f->broken_first - 1] = '\0';
    f->ignored++;
    return DT_OK;
}

/* The entries of folder d of class cname, in readdir's order. */
static dt_status scan_dir(if_impl *f, walk *w, size_t d, const char *cname)
{
    char dir[IF_PATH_MAX];
    if ((size_t)snprintf(dir, sizeof dir, "%s/%s", f->root, w->a.p + w->dirs.v[d]) >= sizeof dir)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "a path under %s/%s is longer than %d bytes; shorten the "
                                "folder names",
                                f->root, cname, IF_PATH_MAX);
    DIR *dh = opendir(dir);
    if (!dh) return dir_error(dir, errno);
    struct dirent *e;
    dt_status st = DT_OK;
    errno = 0;
    while (!st && (e = readdir(dh)) != NULL) {
        st = scan_entry(f, w, d, dir, e, cname);
        errno = 0;
    }
    const int err = errno;
    closedir(dh);
    if (st) return st;
    if (err) return dir_error(dir, err);
    return DT_OK;
}

/* Appends the images of class k (folder name at f->names + f->cls[k]) to f->img, in torchvision's
 * order. w is reused from class to class. */
static dt_status scan_class(if_impl *f, int k, walk *w, size_t *nimg, offs *img)
{
    const char *cname = f->names.p + f->cls[k];
    w->a.len = 0, w->dirs.n = 0, w->depth.n = 0, w->nfiles = 0;
    size_t at;
    if (imagefolder_arena_add(&w->a, cname, NULL, &at) || imagefolder_offs_add(&w->dirs, at) ||
        imagefolder_offs_add(&w->depth, 0))
        return imagefolder_nomem(f->root);
    for (size_t d = 0; d < w->dirs.n; d++) {
        const dt_status st = scan_dir(f, w, d, cname);
        if (st) return st;
    }
    if (w->nfiles == 0)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "%s/%s has no .jpg/.jpeg/.png file: remove the folder or add images "
                                "(every class folder needs at least one)",
                                f->root, cname);
    if (*nimg + w->nfiles > IF_MAX_IMAGES)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "%s holds more than %zu images, more than dtrain reads from one "
                                "folder; split it or convert it to .dts shards",
                                f->root, IF_MAX_IMAGES);
    qsort_r(w->files, w->nfiles, sizeof *w->files, walk_cmp, w);
    for (size_t i = 0; i < w->nfiles; i++) {
        const char *rel = w->a.p + w->dirs.v[w->files[i].dir], *name = w->a.p + w->files[i].name;
        if (strlen(f->root) + strlen(rel) + strlen(name) + 3 > IF_PATH_MAX)
            return status_set_error(DT_ERR_INVALID_ARG,
                                    "the path of %s/%s/%s is longer than %d bytes; shorten the "
                                    "folder or file names",
                                    f->root, rel, name, IF_PATH_MAX);
        if (imagefolder_arena_add(&f->names, rel, name, &at) || imagefolder_offs_add(img, at))
            return imagefolder_nomem(f->root);
    }
    *nimg += w->nfiles;
    return DT_OK;
}

static int name_cmp(const void *x, const void *y, void *arg)
{
    const char *base = arg;
    return strcmp(base + *(const size_t *)x, base + *(const size_t *)y);
}

/* The class folders of root, their names added to names and their offsets, sorted by name, into
 * cls (the caller frees cls->v); entries that are not folders counted in *ignored. */
dt_status imagefolder_list_classes(const char *root, arena *names, offs *cls, size_t *ignored)
{
    DIR *dh = opendir(root);
    if (!dh) return dir_error(root, errno);
    dt_status st = DT_OK;
    struct dirent *e;
    errno = 0;
    while (!st && (e = readdir(dh)) != NULL) {
        if (e->d_name[0] == '.') {
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) (*ignored)++;
        } else if (entry_kind(root, e) != 'd') {
            (*ignored)++;
        } else if (cls->n >= DS_MAX_CLASSES) {
            st = status_set_error(DT_ERR_INVALID_ARG,
                                  "%s holds more than %d class folders, more than dtrain handles; "
                                  "is it the right folder (ROOT/<class>/<image>)?",
                                  root, DS_MAX_CLASSES);
        } else {
            size_t at;
            if (imagefolder_arena_add(names, e->d_name, NULL, &at) || imagefolder_offs_add(cls, at))
                st = imagefolder_nomem(root);
        }
        errno = 0;
    }
    const int err = errno;
    closedir(dh);
    if (!st && err) st = dir_error(root, err);
    if (!st && cls->n == 0)
        st = status_set_error(DT_ERR_INVALID_ARG,
                              "%s holds no class folder: an image folder is ROOT/<class>/<image>.jpg "
                              "(or .png), one folder per class, as torchvision's ImageFolder; point --data at ROOT",
                              root);
    if (!st) qsort_r(cls->v, cls->n, sizeof *cls->v, name_cmp, names->p);
    return st;
}

dt_status imagefolder_scan(if_impl *f, int *classes, size_t *count)
{
    offs cls = {0};
    dt_status st = imagefolder_list_classes(f->root, &f->names, &cls, &f->ignored);
    if (st) {
        free(cls.v);
        return st;
    }
    f->cls = cls.v;
    *classes = f->nfolders = (int)cls.n;
    f->first = calloc(cls.n + 1, sizeof *f->first);
    if (!f->first) return imagefolder_nomem(f->root);
    walk w = {0};
    offs img = {0};
    size_t n = 0;
    for (int k = 0; k < *classes && !st; k++) {
        f->first[k] = n;
        st = scan_class(f, k, &w, &n, &img);
    }
    free(w.a.p);
    free(w.dirs.v);
    free(w.depth.v);
    free(w.files);
    f->img = img.v;
    f->first[*classes] = n;
    *count = n;
    return st;
}
