/* Kiln's microkernels: the ABI between the code generator and the kernels
 * (runtime/kernels), which are compiled into the runtime.
 *
 * Generated code calls each kernel with the address of a constant block of
 * 64-bit parameters (one of the structs below, built at compile time by
 * lib/codegen/conversion/LowerKernels.cpp, so that LLVM can propagate the
 * shapes into the kernel), then the buffers' addresses and scalars. Both
 * sides include this header, so a field, a flag or the panel size cannot
 * change on one side alone. The runtime exports each kernel once per
 * instruction-set variant, its name suffixed (kiln_matmul_f32__avx512,
 * __avx2, __neon); generated code calls the variant its target can run.
 *
 * C, and freestanding: the kernels are built with -nostdinc, so only the
 * compiler's predefined types are used here. */
#ifndef KILN_KERNELS_H
#define KILN_KERNELS_H

typedef __INT64_TYPE__ kiln_kernel_i64;
typedef __INTPTR_TYPE__ kiln_kernel_addr;

/* Weights of convolutions and constant matrix products are packed in
 * panels of this many output channels (zero padded). */
#define KILN_KERNEL_PANEL 32

/* kiln_attention_f32 keeps one block of scores on the stack: at most this
 * many keys at a time (longer sequences go in chunks of this many, with a
 * running max and sum per query row). */
#define KILN_ATTENTION_MAX_KEYS 4096

/* Every entry point, once: X(name). Read by runtime/kernels/CMakeLists.txt
 * (which keeps these external and suffixes them per variant), by the code
 * generator (which renames its calls to the variant it picks) and by the
 * JIT (which resolves them in the runtime). */
#define KILN_KERNEL_ENTRIES(X) \
  X(kiln_attention_f32) \
  X(kiln_attention_mask_f32) \
  X(kiln_conv2d_nhwc_f32) \
  X(kiln_det_f32) \
  X(kiln_dwconv2d_nhwc_f32) \
  X(kiln_layer_norm_f32) \
  X(kiln_matmul_f32) \
  X(kiln_maxpool2d_nhwc_i8) \
  X(kiln_nms_f32) \
  X(kiln_nonzero_u8) \
  X(kiln_pool2d_nhwc_f32) \
  X(kiln_qconv2d_nhwc_u8s8) \
  X(kiln_qdwconv2d_nhwc_u8s8) \
  X(kiln_softmax_f32) \
  X(kiln_topk_f32)

/* kiln_conv2d_nhwc_f32 and kiln_dwconv2d_nhwc_f32: NHWC input [n][h][w][c],
 * output [n][oh][ow][oc]; window kh x kw, strides, leading pads, dilations. */
typedef struct kiln_conv2d_params {
  kiln_kernel_i64 n, h, w, c, oh, ow, oc, kh, kw, sh, sw, ph, pw, dh, dw, groups, flags;
} kiln_conv2d_params;
#define KILN_CONV_HAS_RESIDUAL 1 /* out += residual before the clamp */
#define KILN_CONV_GELU 2         /* GELU of the result (after the residual) */
/* kiln_conv2d_nhwc_f32's schedule: how its work is cut into items and in
 * which order they go to the threads. The same sums either way; with none
 * of these bits the kernel's own heuristic (kiln_conv2d_pixel_major, blocks
 * of KILN_CONV_PIXEL_BLOCK pixels). The compiler sets them from a layer's
 * tuned choice (`kilnc --tune`, lib/api/KernelTuning.cpp). */
#define KILN_CONV_PIXEL_MAJOR 32  /* items nest (image, pixel block, group, panel) */
#define KILN_CONV_PANEL_MAJOR 64  /* items nest (image, group, panel, pixel block) */
#define KILN_CONV_HALF_BLOCKS 128 /* pixel blocks of KILN_CONV_PIXEL_BLOCK / 2 */
#define KILN_CONV_DOUBLE_BLOCKS 256 /* pixel blocks of 2 * KILN_CONV_PIXEL_BLOCK */
#define KILN_CONV_SCHEDULE_BITS \
  (KILN_CONV_PIXEL_MAJOR | KILN_CONV_PANEL_MAJOR | KILN_CONV_HALF_BLOCKS | KILN_CONV_DOUBLE_BLOCKS)
#define KILN_CONV_PIXEL_BLOCK 48 /* a multiple of every variant's register-tile rows */

/* The pixel blocks of a convolution's m output pixels, `rows` each, the
 * last one taking the remainder too (a block of its own for the 49th pixel
 * of a 7x7 map would stream every weight panel once more for one pixel). */
static inline kiln_kernel_i64 kiln_conv2d_pixel_blocks(kiln_kernel_i64 m, kiln_kernel_i64 rows) {
  return m < 2 * rows ? 1 : m / rows;
}

/* The default order of a convolution's work items (1: pixel-major), given
 * its number of pixel blocks. Pixel-major when there are many blocks and
 * the weights are small: a thread's contiguous range is then a range of
 * pixels, the same ones the runtime's static split gives it in the layers
 * before and after, so activations stay in its cache (MobileNet-v2 at two
 * threads: 6.7 -> 5.8 ms), and a block's input stays in L1 across panels.
 * With few blocks (late layers) pixels cannot be split evenly, and with
 * large weights (a 3x3 conv to 256 channels: 590 KB) every pixel block
 * would stream all of them from L3; then panel-major: one panel's weights
 * stay in L2 while the pixels stream past, and threads split the panels.
 * Shared by the kernel and the tuner, which must know which candidate is
 * the default. */
static inline int kiln_conv2d_pixel_major(const kiln_conv2d_params *p, kiln_kernel_i64 blocks) {
  kiln_kernel_i64 panels = (p->oc / p->groups + KILN_KERNEL_PANEL - 1) / KILN_KERNEL_PANEL;
  kiln_kernel_i64 weightBytes =
      p->groups * panels * KILN_KERNEL_PANEL * p->kh * p->kw * (p->c / p->groups) * 4;
  return blocks >= 8 && weightBytes <= (128 << 10);
}

/* The schedule a convolution runs with: its flags' choices, else the
 * defaults above. The kernel and the tuner (which must know which
 * candidates give the same items) both resolve it here. */
typedef struct kiln_conv2d_schedule {
  kiln_kernel_i64 block_rows, blocks;
  int pixel_major;
} kiln_conv2d_schedule;
static inline kiln_conv2d_schedule kiln_conv2d_schedule_of(const kiln_conv2d_params *p) {
  kiln_conv2d_schedule s;
  s.block_rows = p->flags & KILN_CONV_HALF_BLOCKS     ? KILN_CONV_PIXEL_BLOCK / 2
                 : p->flags & KILN_CONV_DOUBLE_BLOCKS ? 2 * KILN_CONV_PIXEL_BLOCK
                                                      : KILN_CONV_PIXEL_BLOCK;
  s.blocks = kiln_conv2d_pixel_blocks(p->oh * p->ow, s.block_rows);
  s.pixel_major = p->flags & KILN_CONV_PIXEL_MAJOR   ? 1
                  : p->flags & KILN_CONV_PANEL_MAJOR ? 0
                                                     : kiln_conv2d_pixel_major(p, s.blocks);
  return s;
}
/* kiln_qconv2d_nhwc_u8s8 takes the same block (groups 1), and this flag:
 * the weights are packed with the window flattened (few input channels),
 * kh * kw * c rounded up to 4 at most KILN_QCONV_FLAT_K_MAX_BYTES. */
#define KILN_QCONV_FLAT_K 4
#define KILN_QCONV_FLAT_K_MAX_BYTES 1024
/* Both integer convolutions: the result is requantized to 8 bits (the
 * `requant` block below) instead of stored as the i32 sum. */
#define KILN_QCONV_REQUANT 8
/* kiln_qdwconv2d_nhwc_u8s8: the activations are s8 (else u8). */
#define KILN_QCONV_SIGNED_INPUT 16

/* The requantization of an integer convolution's sum s (i32) to its 8-bit
 * output, as ONNX's QuantizeLinear does it in f32:
 *   out = (8-bit) min(max(roundeven((float)s * scale[oc]) + zero_point, lo), hi)
 * (lo, hi within the output type's range: the conversion truncates the
 * integral value to its low byte). scale follows the header, one per
 * output channel, padded as the bias is. */
typedef struct kiln_requant_params {
  float zero_point, lo, hi, reserved;
  /* float scale[channels rounded up to KILN_KERNEL_PANEL]; */
} kiln_requant_params;

/* kiln_pool2d_nhwc_f32: NHWC max or average pooling; pads at both ends. */
typedef struct kiln_pool2d_params {
  kiln_kernel_i64 n, h, w, c, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, pad_end_h, pad_end_w, flags;
} kiln_pool2d_params;
#define KILN_POOL_AVERAGE 1   /* average, not max */
#define KILN_POOL_COUNT_PAD 2 /* the average divides by the whole window */
#define KILN_POOL_SIGNED 4    /* kiln_maxpool2d_nhwc_i8: s8 values, not u8 */

/* kiln_matmul_f32: batched C[b] = A[b] x B[b]; strides and offsets in
 * floats, batch strides 0 to broadcast, trans_b: B given as [N][K]. */
typedef struct kiln_matmul_params {
  kiln_kernel_i64 batch, m, n, k, stride_a, stride_b, stride_c, lda, ldb, ldc, trans_b, offset_a,
      offset_b;
} kiln_matmul_params;

/* kiln_attention_f32: softmax(scale * Q K^T) V per batch, M queries, N keys
 * (any number), head size D (DV for V); for Q, K and V their
 * offset, batch stride and row stride in floats; k_transposed: 1 when K is
 * given as its N rows of D (B = K^T of the scores' product, read transposed),
 * 0 when given as K^T [D][N] (its row stride is then the stride along N). */
typedef struct kiln_attention_params {
  kiln_kernel_i64 batch, m, n, d, dv, q_offset, q_batch_stride, q_row_stride, k_offset,
      k_batch_stride, k_row_stride, k_transposed, v_offset, v_batch_stride, v_row_stride,
      out_batch_stride, out_row_stride;
} kiln_attention_params;

/* kiln_attention_mask_f32: softmax(scale * (qk_scale * Q K^T + mask)) V, with
 * an additive mask (a padding or causal mask, a position bias) read in
 * place: entry (i, j) of batch b at mask_offset + ((b / mask_batch_div) %
 * mask_batch_mod) * mask_batch_stride + i * mask_row_stride + j, so that a
 * [batch, 1, 1, keys] padding mask serves every head (div = heads) and a
 * [queries, keys] one every batch (stride 0). A separate entry point, so
 * that kiln_attention_f32's block stays what older bundles pass. */
typedef struct kiln_attention_mask_params {
  kiln_attention_params attention;
  kiln_kernel_i64 mask_offset, mask_batch_div, mask_batch_mod, mask_batch_stride,
      mask_row_stride;
} kiln_attention_mask_params;

/* kiln_softmax_f32 and kiln_layer_norm_f32: `rows` rows of n floats. */
typedef struct kiln_row_params {
  kiln_kernel_i64 rows, n, flags;
} kiln_row_params;
#define KILN_ROW_LOG_SOFTMAX 1 /* softmax: log of it */
#define KILN_ROW_HAS_SCALE 2   /* layer norm: a scale operand */
#define KILN_ROW_HAS_BIAS 4    /* layer norm: a bias operand */

/* kiln_nms_f32: ONNX NonMaxSuppression. */
typedef struct kiln_nms_params {
  kiln_kernel_i64 batches, classes, boxes, max_per_class, center_point_box;
} kiln_nms_params;

/* kiln_det_f32: determinants of `count` row-major n x n matrices. */
typedef struct kiln_det_params {
  kiln_kernel_i64 count, n;
} kiln_det_params;

/* kiln_nonzero_u8: ONNX NonZero of a byte mask of `elements` entries and
 * `rank` dims; the dims follow the struct in the same block. */
typedef struct kiln_nonzero_params {
  kiln_kernel_i64 elements, rank;
  /* kiln_kernel_i64 dims[rank]; */
} kiln_nonzero_params;

/* kiln_topk_f32: ONNX TopK over [outer][dim][inner] floats, of a k and a
 * number of valid entries along the axis known at run time. */
typedef struct kiln_topk_params {
  kiln_kernel_i64 outer, dim, inner, capacity, largest;
} kiln_topk_params;

#ifdef __cplusplus
extern "C" {
#endif

/* out = clamp(conv(in, w) + bias (+ residual), lo, hi) (or its GELU); w and
 * bias packed in panels of KILN_KERNEL_PANEL; in_stride/out_stride: floats
 * between consecutive pixels (more than c/oc in a channel slice). */
void kiln_conv2d_nhwc_f32(kiln_kernel_addr params, kiln_kernel_addr in, kiln_kernel_addr w,
                          kiln_kernel_addr bias, kiln_kernel_addr residual, kiln_kernel_addr out,
                          float lo, float hi, kiln_kernel_i64 in_stride,
                          kiln_kernel_i64 out_stride);
/* The same for depthwise convolutions (groups == c == oc). */
void kiln_dwconv2d_nhwc_f32(kiln_kernel_addr params, kiln_kernel_addr in, kiln_kernel_addr w,
                            kiln_kernel_addr bias, kiln_kernel_addr residual,
                            kiln_kernel_addr out, float lo, float hi,
                            kiln_kernel_i64 in_stride, kiln_kernel_i64 out_stride);
/* Integer form (groups 1): u8 activations (s8 ones with flip 0x80808080,
 * read as u8 + 128) x s8 weights packed [panels][kh][kw][ceil(c/4)][PANEL][4]
 * -> i32 out = the exact sum + bias (i32, [panels][PANEL]); padding reads
 * `pad` (ceil(c/4)*4 bytes of the input's zero point); strides in bytes
 * (input) and i32s (output) between consecutive pixels. */
/* With KILN_QCONV_REQUANT: out holds 8-bit values (requant, a
 * kiln_requant_params block; out_stride then in bytes). */
void kiln_qconv2d_nhwc_u8s8(kiln_kernel_addr params, kiln_kernel_addr in, kiln_kernel_addr w,
                            kiln_kernel_addr bias, kiln_kernel_addr pad, kiln_kernel_addr out,
                            kiln_kernel_i64 flip, kiln_kernel_i64 in_stride,
                            kiln_kernel_i64 out_stride, kiln_kernel_addr requant);
/* Depthwise integer form (groups == c == oc): u8 (s8 with
 * KILN_QCONV_SIGNED_INPUT) activations, weights as floats (exact s8 values)
 * packed [kh][kw][C rounded up to KILN_PANEL], bias i32 [C rounded up];
 * padding reads `zero_point` (the input's, as its type reads it), so the
 * bias holds bias - zero_point x each channel's weight sum. The sum is
 * exact: the products accumulate in f32 below 2^24 (kh * kw <= 512).
 * out: i32, or 8-bit with KILN_QCONV_REQUANT (requant: as above). Strides
 * in elements of the input's and output's types. */
void kiln_qdwconv2d_nhwc_u8s8(kiln_kernel_addr params, kiln_kernel_addr in, kiln_kernel_addr w,
                              kiln_kernel_addr bias, kiln_kernel_addr requant,
                              kiln_kernel_addr out, kiln_kernel_i64 zero_point,
                              kiln_kernel_i64 in_stride, kiln_kernel_i64 out_stride);
void kiln_matmul_f32(kiln_kernel_addr params, kiln_kernel_addr a, kiln_kernel_addr b,
                     kiln_kernel_addr c);
void kiln_attention_f32(kiln_kernel_addr params, kiln_kernel_addr q, kiln_kernel_addr k,
                        kiln_kernel_addr v, kiln_kernel_addr out, float scale);
void kiln_attention_mask_f32(kiln_kernel_addr params, kiln_kernel_addr q, kiln_kernel_addr k,
                             kiln_kernel_addr v, kiln_kernel_addr mask, kiln_kernel_addr out,
                             float scale, float qk_scale);
void kiln_pool2d_nhwc_f32(kiln_kernel_addr params, kiln_kernel_addr in, kiln_kernel_addr out,
                          kiln_kernel_i64 in_stride, kiln_kernel_i64 out_stride);
/* Max pooling of u8 values (s8 with KILN_POOL_SIGNED) over NHWC, the same
 * windows; strides in bytes. */
void kiln_maxpool2d_nhwc_i8(kiln_kernel_addr params, kiln_kernel_addr in, kiln_kernel_addr out,
                            kiln_kernel_i64 in_stride, kiln_kernel_i64 out_stride);
void kiln_softmax_f32(kiln_kernel_addr params, kiln_kernel_addr in, kiln_kernel_addr out,
                      float scale);
void kiln_layer_norm_f32(kiln_kernel_addr params, kiln_kernel_addr in, kiln_kernel_addr scale,
                         kiln_kernel_addr bias, kiln_kernel_addr out, float epsilon);
/* out: [0] the number of selected boxes, then (batch, class, box) triples. */
void kiln_nms_f32(kiln_kernel_addr params, kiln_kernel_addr boxes, kiln_kernel_addr scores,
                  kiln_kernel_addr out, float iou_threshold, float score_threshold);
void kiln_det_f32(kiln_kernel_addr params, kiln_kernel_addr in, kiln_kernel_addr out);
/* out (i64): [0] the count, then `rank` rows of `elements` coordinates. */
void kiln_nonzero_u8(kiln_kernel_addr params, kiln_kernel_addr mask, kiln_kernel_addr out);
/* out (i64): [outer][capacity][inner] positions along the axis, then `dim`
 * elements of scratch; k and valid: addresses of one i64 each. */
void kiln_topk_f32(kiln_kernel_addr params, kiln_kernel_addr in, kiln_kernel_addr k,
                   kiln_kernel_addr valid, kiln_kernel_addr out);

/* Provided by the runtime to the kernels (runtime/src/cpu_features.cpp):
 * whether the CPU has AArch64's 8-bit dot products (ARMv8.2 DotProd, from
 * the kernel's HWCAP); 0 elsewhere. */
int kiln_cpu_has_dotprod(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif
