/*
 * model_plan.h - the activation pool's carve as one list (model_plan.c): what dt_model_create and
 * dt_model_set_precision allocate (model.c) and what dt_model_memory and dt_model_plan_memory
 * report are all read from act_plan, so the plan and the allocation cannot disagree.
 */
#ifndef DT_RUNTIME_MODEL_MODEL_PLAN_H
#define DT_RUNTIME_MODEL_MODEL_PLAN_H

#include "runtime/model/model.h"
#include "kernels/backend.h"

/* What a carved buffer counts as in dt_memory_summary. */
typedef enum { CARVE_ACT, CARVE_WORK, CARVE_P16 } carve_kind;
/* Which field of dt_model a carved buffer becomes (model.c resolves it); index: the layer for
 * SLOT_OUTPUT, SLOT_POOL_IDX and SLOT_RELU_MASK, the buffer (0, 1) for SLOT_DBUF. */
typedef enum {
    SLOT_OUTPUT,
    SLOT_POOL_IDX,
    SLOT_RELU_MASK,
    SLOT_DBUF,
    SLOT_WS,
    SLOT_SX,
    SLOT_SY,
    SLOT_SDY,
    SLOT_SW,
    SLOT_SG,
    SLOT_ST,
    SLOT_X16,
    SLOT_P16
} carve_slot;
typedef struct carve {
    carve_slot slot;
    int index;
    size_t bytes;
    carve_kind kind;
} carve;

#define POOL_ALIGN 256 /* every buffer of the pool starts on a 256-byte boundary */

/* Entries act_plan may write: per layer an output and pooling indices or a ReLU mask, then at
 * most 11 more. */
static inline size_t carve_max(const model_spec *s) { return 2 * (size_t)s->n + 16; }
static inline size_t carve_aligned(size_t bytes) { return (bytes + POOL_ALIGN - 1) / POOL_ALIGN * POOL_ALIGN; }

/* dt_model_create's flags buffer (dflags) for n layers: an int a layer, one for the loss scaler's
 * queued verdict, then, 16-byte aligned, a step graph's optimizer values (optim_consts, m->live_dev). */
static inline size_t flags_live_offset(size_t n) { return ((n + 1) * sizeof(int) + 15) / 16 * 16; }
static inline size_t flags_bytes(size_t n) { return flags_live_offset(n) + sizeof(optim_consts); }

/* Sets every convolution layer's geometry (l->cs) for `batch`: its check's error when a kernel
 * does not fit. */
dt_status plan_conv_shapes(model_spec *s, int batch);

/* The per-step buffers of a model of spec s (conv shapes set for batch) in precision prec on the
 * backend whose table is ops, at batch `batch`, into c (carve_max entries): their count. Asks the
 * table only for sizes (conv_ws_floats, scratch16, keeps_params16), which need no device. */
int act_plan(const model_spec *s, const backend_ops *ops, dt_dtype prec, int batch, carve *c);

/* The pool's size: the buffers' bytes, each rounded up to POOL_ALIGN. */
/* The pool's bytes for the k carves, aligned; SIZE_MAX when the sum passes it (a model whose
 * activations no memory holds: its allocation fails, never a wrapped small one). */
size_t carve_pool_bytes(const carve *c, int k);

/* "layer 3 (conv:64:3:1:1)": layer i of s as dt_model_layer_name writes it. */
void model_spec_layer_name(const model_spec *s, int i, char *buf, size_t n);

#endif
