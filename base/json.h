/*
 * json.h - writing JSON text: one string escaper for every JSON the project writes (doctor's
 * --json, the trace files, metrics), so a hostname or an error message with a quote or a control
 * character cannot break the document.
 */
#ifndef DT_BASE_JSON_H
#define DT_BASE_JSON_H

#include <stdio.h>

/* Writes s to f as a JSON string, quotes included: " and \ escaped, control characters as \n, \t
 * or \u00XX; well-formed UTF-8 is copied, and each byte that is not part of a well-formed UTF-8
 * character becomes \ufffd (U+FFFD), so the output is valid JSON whatever the bytes. NULL is written
 * as null. */
void json_write_string(FILE *f, const char *s);

#endif
