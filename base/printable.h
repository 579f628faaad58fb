/*
 * printable.h - text made safe to print on a terminal: what dtrain prints of names and values it
 * did not choose (a dataset's file and folder names, a lock file's line, an environment variable, a
 * library caller's strings) may hold control characters, and a terminal acts on them: an escape
 * sequence can retitle, clear or recolour another user's terminal, and a newline can forge a line
 * of the log.
 */
#ifndef DT_BASE_PRINTABLE_H
#define DT_BASE_PRINTABLE_H

#include <stddef.h>

/* Copies in to out (n bytes, always terminated, cut short where it does not fit) with each control
 * character written as C writes it: \n, \t, \r, else \xNN for C0 (0x00-0x1f), DEL (0x7f) and each
 * byte of a C1 control (U+0080-U+009F, UTF-8 0xc2 0x80-0x9f: CSI, U+009B, starts an escape sequence
 * as ESC [ does), and \xNN for each byte that is not part of well-formed UTF-8 (a lone 0x9b, a name
 * in Latin-1). Other UTF-8 (a class folder named "café") is copied as it is. So a value with a
 * stray newline reads SLURM_PROCID='3\n', on one line. in and out must not overlap. */
void text_escape_controls(const char *in, char *out, size_t n);

#endif
