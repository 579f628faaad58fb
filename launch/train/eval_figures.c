/*
 * eval_figures.c - the per-class figures of `dtrain eval` (eval_figures.h): the accuracy of every
 * class and the confusion matrix, or for many classes the ones that need a look, and the matrix
 * as CSV.
 */
#include "launch/train/eval_figures.h"

#include "launch/cli.h"
#include "runtime/checkpoint/ckpt_write_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Up to 20 classes every class's figures are printed, and the matrix; more would be a line of
 * thousands of characters and a matrix no terminal shows, so the classes that need a look are
 * picked instead: the EVAL_WORST lowest accuracies and the EVAL_WORST largest confusions. */
#define EVAL_PRINT_ALL 20
#define EVAL_WORST 10

/* Inserts (key, a, b) into the n-long list best (at most EVAL_WORST, sorted by key, highest first
 * when high, else lowest; ties keep the order met, the lower class first). */
typedef struct eval_pick {
    double key;
    int a, b;
} eval_pick;

static void pick_insert(eval_pick *best, int *n, int high, double key, int a, int b)
{
    int at = *n;
    while (at > 0 && (high ? key > best[at - 1].key : key < best[at - 1].key)) at--;
    if (at >= EVAL_WORST) return;
    if (*n < EVAL_WORST) (*n)++;
    memmove(best + at + 1, best + at, (size_t)(*n - 1 - at) * sizeof *best);
    best[at] = (eval_pick){key, a, b};
}

/* Over EVAL_PRINT_ALL classes: the mean of the per-class accuracies, the classes with the lowest,
 * and the largest off-diagonal counts of the matrix (which class is taken for which). */
static void print_summary(const dt_eval_result *r, int K)
{
    eval_pick low[EVAL_WORST], conf[EVAL_WORST];
    int nlow = 0, nconf = 0, seen = 0, none_right = 0;
    long off = 0;
    double mean = 0;
    for (int k = 0; k < K; k++) {
        if (!r->class_count[k]) continue;
        const double acc = (double)r->class_correct[k] / r->class_count[k];
        mean += acc, seen++, none_right += !r->class_correct[k];
        pick_insert(low, &nlow, 0, acc, k, 0);
    }
    for (int i = 0; i < K; i++)
        for (int j = 0; j < K; j++) {
            const long c = r->confusion[(size_t)i * K + j];
            if (i == j || !c) continue;
            off++;
            pick_insert(conf, &nconf, 1, (double)c, i, j);
        }
    printf("per class: %d of the %d classes have samples, mean accuracy over them %.4f, %d with none right; the %d "
           "lowest (class: accuracy (samples)):",
           seen, K, seen ? mean / seen : 0, none_right, nlow);
    for (int i = 0; i < nlow; i++)
        printf("%s %d: %.3f (%ld)", i ? "," : "", low[i].a, low[i].key, r->class_count[low[i].a]);
    printf("\n");
    if (!nconf) {
        printf("confusions: none, every sample's prediction is its class\n");
        return;
    }
    printf("confusions: %ld (true, predicted) pairs of classes have some; the %d largest (true -> predicted: "
           "samples):",
           off, nconf);
    for (int i = 0; i < nconf; i++) printf("%s %d -> %d: %.0f", i ? "," : "", conf[i].a, conf[i].b, conf[i].key);
    printf("\n");
}

void eval_figures_print(const dt_eval_result *r, int K, int csv_given)
{
    if (K > EVAL_PRINT_ALL) {
        print_summary(r, K);
        if (!csv_given) printf("confusion matrix: %d classes, too many to print: --confusion-csv FILE writes it\n", K);
        return;
    }
    printf("per class (accuracy, samples):");
    for (int k = 0, first = 1; k < K; k++) {
        if (!r->class_count[k]) continue;
        printf("%s %d: %.3f (%ld)", first ? "" : ",", k, (double)r->class_correct[k] / r->class_count[k],
               r->class_count[k]);
        first = 0;
    }
    printf("\n");
    printf("confusion matrix (row: true class, column: predicted):\n      ");
    for (int k = 0; k < K; k++) printf(" %6d", k);
    printf("\n");
    for (int i = 0; i < K; i++) {
        printf("%6d", i);
        for (int j = 0; j < K; j++) printf(" %6ld", r->confusion[(size_t)i * K + j]);
        printf("\n");
    }
}

/* The matrix as CSV at path, built in memory and written atomically: a full disk or a crash leaves
 * the previous file whole, never a truncated one. */
int eval_figures_write_csv(const char *path, const dt_eval_result *r, int K)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        cli_error("--confusion-csv %s: out of memory for the matrix of %d classes", path, K);
        return EXIT_FAIL;
    }
    fprintf(f, "true\\predicted");
    for (int k = 0; k < K; k++) fprintf(f, ",%d", k);
    fprintf(f, "\n");
    for (int i = 0; i < K; i++) {
        fprintf(f, "%d", i);
        for (int j = 0; j < K; j++) fprintf(f, ",%ld", r->confusion[(size_t)i * K + j]);
        fprintf(f, "\n");
    }
    if (fclose(f) != 0) {
        free(buf);
        cli_error("--confusion-csv %s: out of memory for the matrix of %d classes", path, K);
        return EXIT_FAIL;
    }
    const ckpt_part part = {buf, len};
    const dt_status s = ckpt_write_file_atomic(path, "confusion matrix", "--confusion-csv", &part, 1);
    free(buf);
    if (s) {
        cli_error("%s (the figures are printed above; %s is as it was)", dt_last_error(), path);
        return EXIT_FAIL;
    }
    return EXIT_OK;
}
