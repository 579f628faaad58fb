/*
 * hostlist_expand.c - hostlist_parse (runtime/placement/hostlist.c) as a filter, for the property
 * test tests/unit/test_hostlist_prop.py: each line of stdin is one host list; each line of stdout is
 * "OK<TAB>name name ..." with the expansion, or "ERR<TAB>message" with dt_last_error().
 */
#include "runtime/placement/hostlist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
    static char line[1 << 16];
    while (fgets(line, sizeof line, stdin)) {
        size_t n = strlen(line);
        if (n && line[n - 1] == '\n') line[--n] = '\0';
        char **names = NULL;
        int count = 0;
        if (hostlist_parse("SLURM_JOB_NODELIST", line, &names, &count) != DT_OK) {
            if (names || count) {
                fprintf(stderr, "hostlist_expand: a refusal left names %p, count %d\n", (void *)names, count);
                return 1;
            }
            printf("ERR\t%s\n", dt_last_error());
            continue;
        }
        fputs("OK\t", stdout);
        for (int i = 0; i < count; i++) printf(i ? " %s" : "%s", names[i]);
        putchar('\n');
        hostlist_free(names, count);
    }
    return ferror(stdin) ? 1 : 0;
}
