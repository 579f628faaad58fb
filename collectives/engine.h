/*
 * engine.h - the communication engine: allreduces started while backward still runs, completed
 * by a communication thread, each with a sequence number and a deadline (the watchdog).
 *
 * The allreduce is rank-ordered and deterministic: a bucket is split into one part per rank, rank
 * r receives every rank's copy of part r and adds them in rank order 0, 1, ..., then every rank
 * gathers the summed parts. Every element is summed in the same order whatever the bucket
 * boundaries, so any bucketing gives bitwise the same gradients as one allreduce of the whole
 * buffer. Traffic per rank is 2 (W-1)/W of the bucket, like a ring, in 2 (W-1) messages.
 * Across nodes, with each node's ranks contiguous, large fp32 buckets take a pipelined chain
 * instead (engine_chain.c: the same fold 0, 1, ..., W-1 computed along the ranks, so bitwise the
 * same result), which crosses each node boundary once each way (dt_allreduce_algo).
 *
 * With MPI_THREAD_MULTIPLE a communication thread drives the requests and polls them with short
 * sleeps (so it does not take the core from compute); otherwise (or dt_config::comm_thread 0) the
 * requests progress whenever the main thread calls engine_poke or engine_wait_all.
 */
#ifndef DT_COLLECTIVES_ENGINE_H
#define DT_COLLECTIVES_ENGINE_H

#include "dtrain.h"

#include <mpi.h>
#include <stdint.h>

typedef struct engine engine;

/* An engine over a duplicate of `world`. timeout_s 0 means no deadline. use_thread 1: a communication
 * thread when MPI provides MPI_THREAD_MULTIPLE (dt_config::comm_thread); 0: inline. algo: how fp32
 * allreduces travel (dt_config::allreduce). Collective over world: it also finds the nodes
 * (MPI_COMM_TYPE_SHARED) and whether each node's ranks are contiguous. engine_prepare then
 * engine_connect; *out is NULL on a failure. */
dt_status engine_create(MPI_Comm world, double timeout_s, int use_thread, dt_allreduce_algo algo, engine **out);
/* The two halves of engine_create, for a caller whose ranks must agree that every one of them got
 * this far before any enters a collective (the reducer's verdict goes between them). engine_prepare:
 * everything that can fail on this rank alone (memory); nothing is sent; *out is NULL on a failure.
 * engine_connect: collective over world: the duplicate communicator, by a nonblocking MPI_Comm_idup
 * polled under timeout_s (a rank that never comes: the job is aborted, as by the watchdog), then
 * the topology and the thread; after the duplicate nothing fails on one rank alone. DT_ERR_MPI.
 * engine_destroy frees a prepared engine, connected or not; after MPI_Finalize (a program that
 * finalized MPI before freeing its reducer) it frees the memory only: MPI_Comm_free then would
 * make MPI end the job, and engine_mpi_finalized tells its callers to skip their own waits. */
dt_status engine_prepare(MPI_Comm world, double timeout_s, int use_thread, dt_allreduce_algo algo, engine **out);
dt_status engine_connect(engine *e, MPI_Comm world);

/* The chain's segment in elements (default 16000 floats) and the smallest bucket in bytes that
 * DT_ALLREDUCE_AUTO may send by the chain (default 64 KiB; also at least 2 (W-1) segments), for
 * tests and measurements; 0 keeps a value. Call before the first request, with the same values on
 * every rank. */
void engine_set_chain(engine *e, size_t seg_elems, size_t min_bytes);

/* How an fp32 allreduce of count elements travels: "chain", "direct", "mpi" (2 ranks by
 * MPI_Allreduce) or "none" (one rank); for reports. */
const char *engine_algo_name(const engine *e, size_t count);
void engine_destroy(engine *e);
int engine_mpi_finalized(void);

/* Starts the in-place fp32 allreduce (sum, or average when op is DT_AVG) of buf[0..count);
 * `bucket` names it in watchdog messages (and keys its scratch memory). `wire` is the type sent
 * between ranks: DT_F32, or DT_F16/DT_BF16 to halve the bytes (each rank's values are rounded to
 * 16 bits, summed in fp32 in rank order, the sum rounded to 16 bits once more and widened back, so
 * the result is identical on every rank and still independent of the buckets; fp16 overflows
 * beyond 65504, so scale before). Every rank must start the same requests in the same order.
 * Returns at once. */
dt_status engine_start(engine *e, float *buf, size_t count, dt_redop op, int bucket, dt_dtype wire);

/* The same for a bucket kept in 16 bits (t is DT_F16 or DT_BF16, and also the wire type): the
 * values travel as they are, are summed in fp32 in rank order and rounded once into buf. */
dt_status engine_start16(engine *e, uint16_t *buf, size_t count, dt_redop op, int bucket, dt_dtype t);

/* The two halves of the allreduce alone, for ZeRO-1 (optimizer state sharded across ranks).
 * Rank r owns part r of every bucket (engine_part): the same split the allreduce uses, so a
 * reduce-scatter sums each element in the same rank order and gives bitwise the values the
 * allreduce gives in the owned part.
 * engine_start_reduce_scatter: like engine_start / engine_start16 (buf16 non-NULL: a bucket kept in
 * 16 bits, wire its type), but only this rank's part of buf (or buf16) holds the sum when it
 * completes; the rest keeps this rank's own values (or, on a 16-bit wire, its values as they were).
 * engine_start_allgather: every rank's part of the fp32 buf[0..count) to every rank, in place
 * (the updated parameters after the optimizer stepped on the owned parts). Both are point to point
 * like the allreduce (not MPI_Reduce_scatter_block, whose summation order MPI leaves open), so the
 * watchdog still names the ranks not heard from. Every rank must start the same requests in the
 * same order. */
dt_status engine_start_reduce_scatter(engine *e, float *buf, uint16_t *buf16, size_t count, dt_redop op, int bucket,
                                      dt_dtype wire);
dt_status engine_start_allgather(engine *e, float *buf, size_t count, int bucket);

/* Part j of a bucket of n elements split among `size` ranks: the first n % size parts have one
 * element more. */
void engine_part(size_t n, int j, int size, size_t *off, size_t *cnt);

/* This rank and the world of the engine's communicator. */
int engine_rank(const engine *e);
int engine_size(const engine *e);

/* Lets requests progress without waiting (inline mode); a no-op with a communication thread. */
void engine_poke(engine *e);

/* Returns when every started request has finished; the first failure if any. */
dt_status engine_wait_all(engine *e);
/* Requests started so far (a sequence number: the next start is number engine_started()), and
 * waiting until the requests numbered below seq have finished (requests finish in the order they
 * were started), the first failure if any: what waits for one bucket while later ones go on. */
uint64_t engine_started(const engine *e);
dt_status engine_wait_upto(engine *e, uint64_t seq);

/* The context whose trace (dt_trace_start) gets a span per request, from its start to its completion,
 * on the communication track. Set before the first request; ctx outlives the engine. */
void engine_set_ctx(engine *e, const dt_ctx *ctx);

/* 1 when a communication thread drives the requests. */
int engine_threaded(const engine *e);

#endif
