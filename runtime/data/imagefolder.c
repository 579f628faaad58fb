/*
 * imagefolder.c - torchvision's ImageFolder layout as a dataset format (reader.h):
 *
 *   ROOT/<class>/<image>           classes = the subdirectories of ROOT, sorted by strcmp (byte
 *   ROOT/<class>/<sub>/.../<image>   order, as Python sorts str); label = index in that order
 *   ROOT/train/<class>/... + ROOT/val/<class>/...   when both exist: split "train" and "test"
 *
 * As torchvision (datasets.folder.make_dataset), a class holds every image below its folder,
 * symlinked folders followed, ordered by (folder path, file name); images are the names ending in
 * .jpg, .jpeg or .png in any case; other files are ignored, and so are hidden ones (".*", which
 * torchvision would take: macOS "._x.jpg" files are not images) and anything that is not a
 * regular file (a FIFO never blocks a scan or a read). Unlike torchvision, an empty class folder
 * is an error rather than a silently unused label.
 *
 * The scan keeps every image's path (relative to the split's folder) in one string arena with an
 * offset per image, and the first image of each class, so a 1.3-million-image ImageNet costs about
 * 60 MiB and one allocation per growth step, not one per file. read(i) reads the file and decodes
 * it at the --input shape (image_decode.c); it shares nothing writable, so loader threads call it
 * at once.
 */
#include "runtime/data/image_decode.h"
#include "base/log.h"
#include "runtime/data/reader.h"
#include "base/status.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define IF_PATH_MAX 4096
#define IF_MAX_DEPTH 16                /* folders below a class: deeper is a symlink loop */
#define IF_MAX_FILE_BYTES (256u << 20) /* one image file */
#define IF_MAX_IMAGES ((size_t)UINT32_MAX)

/* A growable string arena: strings end in NUL and are found by their offset. */
typedef struct arena {
    char *p;
    size_t len, cap;
} arena;

static int arena_add(arena *a, const char *s1, const char *s2, size_t *at)
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

/* A growable array of offsets (or indices). */
typedef struct offs {
    size_t *v;
    size_t n, cap;
} offs;

static int offs_add(offs *o, size_t x)
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

typedef struct if_impl {
    char root[IF_PATH_MAX]; /* the split's folder: ROOT, ROOT/train or ROOT/val */
    arena names;            /* class names, then image paths relative to root */
    size_t *cls;            /* classes: offset of each class's name */
    size_t *first;          /* classes + 1: the first image of each class; [classes] = count */
    size_t *img;            /* count: offset of each image's path */
    size_t ignored;         /* entries that are not images (hidden, other names, not regular) */
    int nfolders;           /* class folders here: the entries of cls and first (less first's end) */
    /* The label of each class folder when another split numbers them (a val/ folder follows its
     * train/, whose classes it may not all have): NULL, the folder's own sorted order. The
     * split's class count is then the other split's, which may exceed nfolders. */
    int32_t *label_of;
} if_impl;

static void if_free(if_impl *f)
{
    if (!f) return;
    free(f->names.p);
    free(f->cls);
    free(f->first);
    free(f->img);
    free(f->label_of);
    free(f);
}

/* ------------------------------------------------------------------ scanning */

static int is_image_name(const char *n)
{
    const size_t l = strlen(n);
    return (l > 4 && (strcasecmp(n + l - 4, ".jpg") == 0 || strcasecmp(n + l - 4, ".png") == 0)) ||
           (l > 5 && strcasecmp(n + l - 5, ".jpeg") == 0);
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

static dt_status nomem(const char *what) { return status_set_error(DT_ERR_NOMEM, "out of memory scanning %s", what); }

/* Appends the images of class k (folder name at f->names + f->cls[k]) to f->img, in torchvision's
 * order. w is reused from class to class. */
static dt_status scan_class(if_impl *f, int k, walk *w, size_t *nimg, offs *img)
{
    const char *cname = f->names.p + f->cls[k];
    w->a.len = 0, w->dirs.n = 0, w->depth.n = 0, w->nfiles = 0;
    size_t at;
    if (arena_add(&w->a, cname, NULL, &at) || offs_add(&w->dirs, at) || offs_add(&w->depth, 0)) return nomem(f->root);
    char dir[IF_PATH_MAX];
    for (size_t d = 0; d < w->dirs.n; d++) {
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
            if (e->d_name[0] == '.') {
                if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) f->ignored++;
                continue;
            }
            const int kind = entry_kind(dir, e);
            if (kind == 'd') {
                if (w->depth.v[d] + 1 > IF_MAX_DEPTH) {
                    st = status_set_error(DT_ERR_INVALID_ARG,
                                          "%s/%s is nested more than %d folders below its class "
                                          "folder %s/%s: a symlink loop? remove the loop or flatten the folders",
                                          dir, e->d_name, IF_MAX_DEPTH, f->root, cname);
                    break;
                }
                const size_t parent = w->dirs.v[d], depth = w->depth.v[d] + 1;
                /* arena_add may move w->a.p: copy the parent's path out first */
                char rel[IF_PATH_MAX];
                snprintf(rel, sizeof rel, "%s", w->a.p + parent);
                if (arena_add(&w->a, rel, e->d_name, &at) || offs_add(&w->dirs, at) || offs_add(&w->depth, depth))
                    st = nomem(f->root);
            } else if (kind == 'f' && is_image_name(e->d_name)) {
                if (w->nfiles == w->capfiles) {
                    const size_t cap = w->capfiles ? w->capfiles * 2 : 256;
                    found *nf = realloc(w->files, cap * sizeof *nf);
                    if (!nf) {
                        st = nomem(f->root);
                        break;
                    }
                    w->files = nf, w->capfiles = cap;
                }
                if (arena_add(&w->a, e->d_name, NULL, &at))
                    st = nomem(f->root);
                else
                    w->files[w->nfiles++] = (found){d, at};
            } else {
                f->ignored++;
            }
            errno = 0;
        }
        const int err = errno;
        closedir(dh);
        if (st) return st;
        if (err) return dir_error(dir, err);
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
        if (arena_add(&f->names, rel, name, &at) || offs_add(img, at)) return nomem(f->root);
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
static dt_status list_classes(const char *root, arena *names, offs *cls, size_t *ignored)
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
            if (arena_add(names, e->d_name, NULL, &at) || offs_add(cls, at)) st = nomem(root);
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

/* The class folders of f->root, sorted, into f->cls; then every class's images. */
static dt_status scan(if_impl *f, int *classes, size_t *count)
{
    offs cls = {0};
    dt_status st = list_classes(f->root, &f->names, &cls, &f->ignored);
    if (st) {
        free(cls.v);
        return st;
    }
    f->cls = cls.v;
    *classes = f->nfolders = (int)cls.n;
    f->first = calloc(cls.n + 1, sizeof *f->first);
    if (!f->first) return nomem(f->root);
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

/* ------------------------------------------------------------------ reading */

/* Reads the regular file at path whole (at most IF_MAX_FILE_BYTES) into *buf. */
static dt_status read_image_file(const char *path, unsigned char **buf, size_t *len)
{
    *buf = NULL;
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return status_set_error(DT_ERR_IO, "cannot open image %s: %s", path, strerror(errno));
    struct stat sb;
    dt_status st = DT_OK;
    if (fstat(fd, &sb) != 0)
        st = status_set_error(DT_ERR_IO, "cannot stat image %s: %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        st = status_set_error(DT_ERR_IO,
                              "image %s is not a regular file (a FIFO or device?); replace it with the "
                              "image file",
                              path);
    else if ((uint64_t)sb.st_size > IF_MAX_FILE_BYTES)
        st = status_set_error(DT_ERR_CORRUPT,
                              "image %s is %lld bytes, more than the %u an image may be; shrink it, "
                              "remove it, or pass --bad-samples skip",
                              path, (long long)sb.st_size, IF_MAX_FILE_BYTES);
    const size_t n = st ? 0 : (size_t)sb.st_size;
    if (!st && !(*buf = malloc(n ? n : 1))) st = status_set_error(DT_ERR_NOMEM, "out of memory reading %s", path);
    size_t got = 0;
    while (!st && got < n) {
        const ssize_t r = read(fd, *buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0)
            st = status_set_error(DT_ERR_IO, "cannot read image %s: %s", path, strerror(errno));
        else if (r == 0)
            st = status_set_error(DT_ERR_CORRUPT, "image %s ended after %zu of its %zu bytes (changed while read?)",
                                  path, got, n);
        else
            got += (size_t)r;
    }
    close(fd);
    if (st) {
        free(*buf);
        *buf = NULL;
        return st;
    }
    *len = n;
    return DT_OK;
}

static dt_status if_read(const ds_split *s, size_t i, float *x, int32_t *label)
{
    const if_impl *f = s->impl;
    if (i >= s->count)
        return status_set_error(DT_ERR_INVALID_ARG, "sample %zu of %s (%s split) does not exist: it has %zu (0..%zu)",
                                i, s->source, s->split, s->count, s->count ? s->count - 1 : 0);
    /* The class folder: the last k with first[k] <= i. */
    int lo = 0, hi = f->nfolders - 1;
    while (lo < hi) {
        const int mid = lo + (hi - lo + 1) / 2;
        if (f->first[mid] <= i)
            lo = mid;
        else
            hi = mid - 1;
    }
    char path[IF_PATH_MAX];
    /* the scan refused longer paths */
    if ((size_t)snprintf(path, sizeof path, "%s/%s", f->root, f->names.p + f->img[i]) >= sizeof path)
        return status_set_error(DT_ERR_INTERNAL, "image path %s/%s too long", f->root, f->names.p + f->img[i]);
    unsigned char *buf = NULL;
    size_t len = 0;
    dt_status st = read_image_file(path, &buf, &len);
    if (st) return st;
    st = image_decode(path, buf, len, s->c, s->h, s->w, 0, x);
    free(buf);
    if (!st) *label = f->label_of ? f->label_of[lo] : lo;
    return st;
}

static void if_close(ds_split *s)
{
    if_free(s->impl);
    s->impl = NULL;
}

static const ds_ops if_ops = {if_read, if_close};

const char *imagefolder_class_name(const ds_split *s, int k)
{
    if (!s || s->ops != &if_ops || k < 0 || k >= s->classes) return NULL;
    const if_impl *f = s->impl;
    if (!f->label_of) return f->names.p + f->cls[k];
    /* Numbered by another split: the folder given label k, if this split has one. */
    for (int j = 0; j < f->nfolders; j++)
        if (f->label_of[j] == k) return f->names.p + f->cls[j];
    return NULL;
}

/* Numbers f's class folders (classes of them) as ref's sorted names (nref) do: label_of[k] = the
 * position of class k's name among them, so a held-out split that lacks some of training's classes
 * keeps training's labels (torchvision's ImageFolder would number it afresh). A class the reference
 * lacks fails, naming it: no label could mean it. */
static dt_status number_like(if_impl *f, const char *const *ref, int nref, const char *ref_where)
{
    const int classes = f->nfolders;
    int32_t *map = malloc((size_t)(classes ? classes : 1) * sizeof *map);
    if (!map) return nomem(f->root);
    for (int k = 0; k < classes; k++) {
        const char *name = f->names.p + f->cls[k];
        int lo = 0, hi = nref - 1, at = -1;
        while (lo <= hi) {
            const int mid = lo + (hi - lo) / 2, c = strcmp(ref[mid], name);
            if (c == 0) {
                at = mid;
                break;
            }
            if (c < 0)
                lo = mid + 1;
            else
                hi = mid - 1;
        }
        if (at < 0) {
            free(map);
            return status_set_error(DT_ERR_INVALID_ARG,
                                    "%s/%s is a class folder that %s does not have: the held-out data's classes "
                                    "must be training's (%d of them); remove it or add it to the training data",
                                    f->root, name, ref_where, nref);
        }
        map[k] = at;
    }
    free(f->label_of);
    f->label_of = map;
    return DT_OK;
}

dt_status imagefolder_number_like(ds_split *s, const ds_split *ref)
{
    if (!s || !ref || s->ops != &if_ops || ref->ops != &if_ops) return DT_OK;
    const if_impl *r = ref->impl;
    if (r->label_of)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "%s is numbered by another split's classes: number %s by the training split itself",
                                r->root, ((const if_impl *)s->impl)->root);
    const char **names = malloc((size_t)ref->classes * sizeof *names);
    if (!names) return status_set_error(DT_ERR_NOMEM, "out of memory for %d class names", ref->classes);
    for (int k = 0; k < ref->classes; k++) names[k] = r->names.p + r->cls[k];
    const dt_status st = number_like(s->impl, names, ref->classes, r->root);
    free(names);
    if (!st) s->classes = ref->classes;
    return st;
}

/* The held-out split ROOT/val numbered by ROOT/train's class folders (their names only). */
static dt_status number_like_train(if_impl *f, const char *path, int *classes)
{
    char train[IF_PATH_MAX];
    const size_t pl = strlen(path);
    if ((size_t)snprintf(train, sizeof train, "%.*s/train", (int)(pl > 1 && path[pl - 1] == '/' ? pl - 1 : pl), path) >=
        sizeof train)
        return status_set_error(DT_ERR_INVALID_ARG, "image folder path %s is longer than %d bytes", path, IF_PATH_MAX);
    arena names = {0};
    offs cls = {0};
    size_t ignored = 0;
    dt_status st = list_classes(train, &names, &cls, &ignored);
    const char **ref = st ? NULL : malloc(cls.n * sizeof *ref);
    if (!st && !ref) st = nomem(train);
    for (size_t k = 0; !st && k < cls.n; k++) ref[k] = names.p + cls.v[k];
    if (!st) st = number_like(f, ref, (int)cls.n, train);
    if (!st) *classes = (int)cls.n;
    free(ref);
    free(cls.v);
    free(names.p);
    return st;
}

/* ------------------------------------------------------------------ open */

static int is_dir(const char *root, const char *sub)
{
    char p[IF_PATH_MAX];
    struct stat sb;
    return (size_t)snprintf(p, sizeof p, "%s/%s", root, sub) < sizeof p && stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

dt_status imagefolder_open(const char *path, const ds_open_opts *opts, ds_split *s)
{
    if (!path || !*path) return status_set_error(DT_ERR_INVALID_ARG, "no image folder path given");
    const int c = opts ? opts->c : 0, h = opts ? opts->h : 0, w = opts ? opts->w : 0;
    if (c == 0 && h == 0 && w == 0)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "an image folder needs the shape to decode to: give --input 3x224x224 "
                                "(CxHxW; C = 3 for RGB or 1 for gray) for %s",
                                path);
    if ((c != 1 && c != 3) || h < 1 || w < 1 || h > IMG_MAX_SIDE || w > IMG_MAX_SIDE)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "--input %dx%dx%d cannot be the shape of images from %s: C must be 1 "
                                "(gray) or 3 (RGB), H and W 1..%d; e.g. --input 3x224x224",
                                c, h, w, path, IMG_MAX_SIDE);
    const char *split = opts && opts->split ? opts->split : "train";
    const int test = strcmp(split, "test") == 0;
    if (!test && strcmp(split, "train") != 0)
        return status_set_error(DT_ERR_INVALID_ARG, "split '%s' is not train or test", split);
    struct stat sb;
    if (stat(path, &sb) != 0) return status_set_error(DT_ERR_IO, "image folder %s does not exist", path);
    if (!S_ISDIR(sb.st_mode))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "%s is not a folder: an image folder is ROOT/<class>/<image>.jpg; "
                                "point --data at ROOT",
                                path);
    const int split_dirs = is_dir(path, "train") && is_dir(path, "val");
    if (test && !split_dirs)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "no held-out split: %s has no train/ and val/ folders (ROOT/val/<class>/"
                                "... is the test split); use --eval-data PATH or --holdout F",
                                path);

    if_impl *f = calloc(1, sizeof *f);
    if (!f) return status_set_error(DT_ERR_NOMEM, "out of memory opening %s", path);
    const size_t pl = strlen(path);
    const int n = snprintf(f->root, sizeof f->root, "%.*s%s%s", (int)(pl > 1 && path[pl - 1] == '/' ? pl - 1 : pl),
                           path, split_dirs ? "/" : "", split_dirs ? (test ? "val" : "train") : "");
    if (n < 0 || (size_t)n >= sizeof f->root) {
        if_free(f);
        return status_set_error(DT_ERR_INVALID_ARG, "image folder path %s is longer than %d bytes", path, IF_PATH_MAX);
    }
    int classes = 0;
    size_t count = 0;
    dt_status st = scan(f, &classes, &count);
    if (!st && test) st = number_like_train(f, path, &classes);
    /* ROOT/train alone (or ROOT/val) would read as one class named "train" of all its images. */
    if (!st && classes == 1 && !test &&
        (!strcmp(f->names.p + f->cls[0], "train") || !strcmp(f->names.p + f->cls[0], "val")))
        st = status_set_error(DT_ERR_INVALID_ARG,
                              "%s holds only a %s/ folder, which would be one class of all its images: the split "
                              "layout needs both %s/train and %s/val; or point --data at %s/%s",
                              path, f->names.p + f->cls[0], path, path, path, f->names.p + f->cls[0]);
    if (st) {
        if_free(f);
        return st;
    }
    if (f->ignored)
        log_msg(LOG_LEVEL_INFO,
                "%s: %zu images in %d classes; %zu other entries ignored (not .jpg/.jpeg/.png "
                "regular files, or hidden)",
                f->root, count, classes, f->ignored);
    s->ops = &if_ops;
    s->impl = f;
    s->count = count;
    s->c = c, s->h = h, s->w = w;
    s->classes = classes;
    s->uint8_values = 1;
    snprintf(s->format, sizeof s->format, "imagefolder");
    if (!s->split[0]) snprintf(s->split, sizeof s->split, "%s", split);
    if (!s->source[0]) snprintf(s->source, sizeof s->source, "%s", path);
    return DT_OK;
}
