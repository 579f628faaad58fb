/*
 * gnuplot.h - gnuplot as the PNG renderer of `dtrain plot` and `dtrain model-perf --plot`.
 */
#ifndef DT_LAUNCH_GNUPLOT_H
#define DT_LAUNCH_GNUPLOT_H

#include <stddef.h>
#include <stdio.h>

/* gnuplot on PATH as a full path into buf, or -1. */
int gnuplot_find(char *buf, size_t n);
/* s as a gnuplot single-quoted string: ' doubled, control characters shown as '?'. */
void gnuplot_quoted(FILE *f, const char *s);
/* Makes the temporary file gnuplot draws out's PNG into, before it is renamed over out:
 * out.tmp-PID (out.tmp-PID.K when that name exists: a link planted there is never followed), made
 * empty with O_EXCL, with "./" before a relative path, so that gnuplot's `set output` never reads
 * it as a pipe to a command ('|cmd') or a home directory ('~/'). Its name into buf (n bytes); 0, or
 * -1 with errno (ENAMETOOLONG: it does not fit). The caller removes it on every way out. */
int gnuplot_temp_path(char *buf, size_t n, const char *out);
/* Runs gnuplot (exe) on script (len bytes). Returns 0, or -1 after printing why, prefixed "who: ". */
int gnuplot_run(const char *who, const char *exe, const char *script, size_t len);
/* The file at path begins with the PNG signature. */
int gnuplot_is_png(const char *path);
/* Before any work: the PNG out (given as flag, "-o" or "--plot") must hold no control character
 * (gnuplot's strings cannot carry one: it would draw under another name), must not be one of the n
 * input files the command reads (the same name, or another name of the same file: a link,
 * ./m.jsonl, dir/../m.jsonl), which it would replace, nor a device, FIFO or stream (the PNG
 * replaces its file), and must be writable (ckpt_write_file_try). 0, or
 * EXIT_USAGE after printing why, prefixed "who: ", with hint (or "") appended to a path error. */
int gnuplot_output_check(const char *who, const char *flag, const char *out, const char *const *inputs, int n,
                         const char *hint);

#endif
