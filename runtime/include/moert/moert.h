/*===- moert.h - C ABI that compiled MoE programs call ------------*- C -*-===//
 *
 * Every function here is called by code that moe-compile generates and is
 * resolved against the moe-run executable when it loads model.so.
 *
 * Groups. `axes` encodes an ordered list of grid axes: nibble i (bits
 * 4i..4i+3) holds axis_i + 1 and the list ends at the first zero nibble. The
 * group of a rank for `axes` is the set of ranks that share its coordinates on
 * every axis not listed; its position is the linear index of its coordinates
 * on the listed axes, in the listed order, last fastest; G is the product of
 * the listed extents. An empty list makes a group of the rank alone.
 *
 * dtype codes: 0 f32, 1 f64, 2 i32, 3 i64.
 *
 * Every collective first checks that the whole group calls the same operation
 * with the same sizes; any misuse (bad axes, sizes that disagree, negative
 * counts, a too small output) prints `moe-run: error: [rank R] ...` and ends
 * every rank with a non-zero exit status.
 *
 *===----------------------------------------------------------------------===*/

#ifndef MOERT_MOERT_H
#define MOERT_MOERT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types, as the `dtype` arguments of the runtime's calls name them.
 * The CPU runtime's sums take f32, f64, i32 and i64; the CUDA runtime's
 * take all six, its kernels f32, f16 and bf16. */
enum moert_dtype {
  MOERT_F32 = 0,
  MOERT_F64 = 1,
  MOERT_I32 = 2,
  MOERT_I64 = 3,
  MOERT_F16 = 4,
  MOERT_BF16 = 5
};

/* World rank of this process (0 without MPI). Touches no memory of the
 * program, so code compiled for CUDA calls it with GPU work pending. */
int64_t moert_rank(void);

/* out = the G inputs of bytesPerRank bytes, concatenated by position. */
void moert_all_gather(const void *in, void *out, int64_t bytesPerRank,
                      int64_t axes);

/* out = element-wise sum of `in` over the group. */
void moert_all_reduce_sum(const void *in, void *out, int64_t count,
                          int32_t dtype, int64_t axes);

/* in holds G chunks of countPerRank elements; out = sum over the group of
 * chunk p, where p is this rank's position. */
void moert_reduce_scatter_sum(const void *in, void *out, int64_t countPerRank,
                              int32_t dtype, int64_t axes);

/* Chunk p of in goes to position p; chunk s of out comes from position s. */
void moert_all_to_all(const void *in, void *out, int64_t bytesPerRank,
                      int64_t axes);

/* Rows of rowBytes bytes, L = groupsPerRank groups of rows per destination.
 * counts[d*L + l]: rows for destination position d and local group l, laid
 * out consecutively in `in` in that order. On return outCounts[s*L + l] is
 * source s's counts[me*L + l] and out holds the rows from source 0, then 1,
 * ...; rows past the received total are zeroed. Receiving more than outRows
 * rows, or a negative count, is an error. */
void moert_ragged_all_to_all(const void *in, const int32_t *counts, void *out,
                             int32_t *outCounts, int64_t rowBytes,
                             int64_t groupsPerRank, int64_t outRows,
                             int64_t axes);

/* moe.slot_grad_sum: the group holds the numSlots slots of `table` (slot
 * -> expert), S = numSlots / G per position. partials has G * S rows of
 * rowElems floats: row s*S + j is what source position s's tokens gave this
 * position's slot j. out row j (expert e = table[me*S + j]) is 0 + part(e,
 * 0) + ... + part(e, G-1) in that order, part(e, s) being the row computed
 * by the slot serving e's choices from s (the replica rule of moe.place,
 * moe/Planner/ReplicaRule.h); parts of replicated experts travel between
 * their holders. */
void moert_slot_grad_sum(const float *partials, const int32_t *table,
                         float *out, int64_t numSlots, int64_t rowElems,
                         int64_t axes);

/* out = sum of `in` over the positions before this one (zeros at 0). */
void moert_exclusive_scan_sum(const void *in, void *out, int64_t count,
                              int32_t dtype, int64_t axes);

/* Point to point within the group; dest and source are positions. A rank may
 * send to itself: the message waits for its own moert_recv. */
void moert_send(const void *in, int64_t bytes, int64_t axes, int64_t dest);
void moert_recv(void *out, int64_t bytes, int64_t axes, int64_t source);

/* out = root's `in` on every position, root included. */
void moert_broadcast(const void *in, void *out, int64_t bytes, int64_t axes,
                     int64_t root);

/* For each of `batch` problems b:
 *   C[b*sCb + m*sCm + n*sCn] (+)= sum_k A[b*sAb + m*sAm + k*sAk]
 *                                      * B[b*sBb + k*sBk + n*sBn]
 * adding to C when accumulate is non-zero, overwriting it otherwise. A or
 * B may repeat over the batch (stride 0); C may not. Strides oneDNN's
 * matmul takes (positive ones) go to it as one batched matmul, anything
 * else to a plain loop. site 1 marks an expert GEMM, whose time and flops
 * --stats reports; 0 is any other. */
void moert_matmul_f32(int64_t batch, int64_t M, int64_t N, int64_t K,
                      const float *A, int64_t sAb, int64_t sAm, int64_t sAk,
                      const float *B, int64_t sBb, int64_t sBk, int64_t sBn,
                      float *C, int64_t sCb, int64_t sCm, int64_t sCn,
                      int32_t accumulate, int32_t site);

/* moe.dispatch without capacity: rows [T*k, H] = the (token, slot) pairs of
 * x [T, H] whose id (ids [T, k]) is in [0, experts), grouped by expert in
 * expert order and in token order within one; slots [T, k] = each pair's
 * row, -1 for other ids; counts [experts] = each expert's rows; the rows
 * past the last group are zeroed. Any dtype. */
void moert_dispatch(int32_t dtype, const void *x, int64_t tokens,
                    int64_t hidden, const int32_t *ids, int64_t k,
                    int64_t experts, void *rows, int32_t *slots,
                    int32_t *counts);

/* The expert GEMMs of moe.experts: rows of A [rows, K] in `groups` groups,
 * group g holding counts[g] rows from its first row (packed one after the
 * other, or every groupStride rows when groupStride > 0, as capacity
 * buffers are), and belonging to expert g mod experts. Each group's rows of
 * C [rows, N] = its rows of A times W_e^T, W [experts, N, K] (the [out, in]
 * weights), plus bias[e] (bias [experts, N], or null for none); every other
 * row of C is zeroed. A negative count, a count past
 * the stride or groups past `rows` end the process. The CPU runtime takes
 * f32 (dtype 0); its GEMMs are expert GEMMs (site 1). */
void moert_grouped_matmul(int32_t dtype, int64_t groups, int64_t experts,
                          const int32_t *counts, int64_t groupStride,
                          int64_t rows, int64_t K, int64_t N, const void *A,
                          const void *W, const void *bias, void *C);

/* moert_grouped_matmul for dropless rows of a few per expert (decode),
 * which the compiler chooses by the layer's shape: every group by the
 * runtime's own kernel, which streams each weight once and computes a row's
 * outputs the same way whatever the group's size (so that results do not
 * depend on how the rows are grouped: the placement of experts). */
void moert_grouped_matmul_few_rows(int32_t dtype, int64_t groups,
                                   int64_t experts, const int32_t *counts,
                                   int64_t rows, int64_t K, int64_t N,
                                   const void *A, const void *W,
                                   const void *bias, void *C);

/* Statistics of MoE layer `layer` (ids from 0), always collected.
 * begin/end bracket the layer's time in a run. moert_layer_tokens counts the
 * ids in [0, numExperts) (others are ignored) and moert_layer_dropped adds
 * *dropped, both only on ranks whose coordinate is 0 on every axis of
 * replicaAxes, so that replicas are counted once. */
void moert_layer_begin(int64_t layer);
void moert_layer_end(int64_t layer);
void moert_layer_tokens(int64_t layer, const int32_t *ids, int64_t numIds,
                        int64_t numExperts, int64_t replicaAxes);
void moert_layer_dropped(int64_t layer, const int64_t *dropped,
                         int64_t replicaAxes);

/* Ends the program with an error, as every other error of the runtime
 * does: `moe-run: error: [rank R] <op>: index <index> is out of range for
 * dim <dim> of size <size> (ONNX allows [-size, size-1])`, exit status 1.
 * Compiled gathers and scatters call it where the indices they were given
 * leave the dim they select in; `op` is the operator's name (a C string,
 * e.g. "onnx.Gather"). Does not return. */
void moert_index_out_of_range(const char *op, int64_t index, int64_t dim,
                              int64_t size);

/* The memref lowering's generic allocation functions, which compiled code
 * calls for its buffers: freed blocks are kept by size and reused by later
 * calls, so repeated runs do not fault in fresh pages. 64-byte aligned. */
void *_mlir_memref_to_llvm_alloc(size_t size);
void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t size);
void _mlir_memref_to_llvm_free(void *block);

#ifdef __cplusplus
}
#endif

#endif /* MOERT_MOERT_H */
