// Kiln-level transforms: on kiln ops, before the lowering to linalg.
#ifndef KILN_PASSES_TD
#define KILN_PASSES_TD

include "mlir/Pass/PassBase.td"

def KilnInferShapes : Pass<"kiln-infer-shapes", "mlir::func::FuncOp"> {
  let summary = "Refine kiln result types, folding constants on the way";
  let description = [{
    Walks each function in order and recomputes every kiln op's result type
    from its operands. Folding is interleaved with inference because each
    enables the other: `kiln.shape` folds once its input is static, and a
    `kiln.reshape` gets a static result once its shape operand has folded to
    a constant (the Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains
    of exported transformers). The function signature is updated to the
    refined result types. Fails on inconsistent shapes, naming the op.
  }];
  let dependentDialects = ["::kiln::KilnDialect"];
}

def KilnSymbolicDims : Pass<"kiln-symbolic-dims", "mlir::func::FuncOp"> {
  let summary = "Track unknown dims as expressions of the inputs' dims";
  let description = [{
    Runs the symbolic-dimension analysis (include/kiln/IR/SymbolicDims.h)
    over each function in order: every unknown input dim is a symbol (named
    by its ONNX dim_param, `kiln.dim_names` on the argument), and shape
    arithmetic (Shape, Gather, Slice, Concat, Unsqueeze, integer Add/Sub/
    Mul/Div/Max/Min, Where, Cast) carries expressions over them into the ops
    that take shapes (Reshape, Expand, ConstantOfShape, Tile, Range) and
    through elementwise, row, transpose, concat, gather and matmul ops.
    A dim whose expression is a constant becomes static in the result type
    (an Expand to [batch, 1, 768] has 1x768 known); each function result
    with unknown dims gets `kiln.dims`, one string per dim saying how it
    follows from the inputs ("batch", "past + new"). With concrete input
    shapes there are no symbols and nothing changes.

    ```mlir
    func.func @main(%k: tensor<1x4x?x16xf32> {kiln.dim_names = ["", "", "past", ""]},
                    %n: tensor<1x4x?x16xf32> {kiln.dim_names = ["", "", "new", ""]})
        -> (tensor<1x4x?x16xf32> {kiln.dims = ["1", "4", "past + new", "16"]})
    ```

    With `annotate-all`, every op's result of unknown dims gets `kiln.dims`
    too: what the analysis knows at each step, for tests and debugging.
  }];
  let options = [
    Option<"annotateAll", "annotate-all", "bool", /*default=*/"false",
           "Annotate every op result of unknown dims, not only the function's">,
    Option<"rounds", "rounds", "int", /*default=*/"1",
           "Sweeps at most, each after the last one's shape inference and "
           "folding (kiln-infer-shapes, canonicalize), until no dim becomes "
           "known: shape arithmetic that folds only once earlier dims are "
           "known (a pad list PyTorch reshapes, reverses and transposes)">,
  ];
  let dependentDialects = ["::kiln::KilnDialect"];
}

def KilnConvTo2D : Pass<"kiln-conv-to-2d", "mlir::func::FuncOp"> {
  let summary = "1-D and 3-D convolutions as 2-D ones";
  let description = [{
    On the CPU path, before `kiln-convert-layout`, so that 1-D and 3-D
    convolutions (static shapes) reach the 2-D convolution microkernels. A
    1-D `kiln.conv` reads its input [N, C, L] as [N, C, 1, L] and its
    kernel as [F, C/g, 1, K]. A 3-D one folds the kernel's depth into the
    input channels and the output depth into the batch: the input's depth
    is padded with zeros, one `kiln.gather` along depth with constant
    indices od * sd + kd * dd makes [N, C, OD, KD, H, W], a transpose and a
    reshape make it [N * OD, C * KD, H, W], the kernel [F, C/g, KD, KH, KW]
    is read as [F, C/g * KD, KH, KW] (a new constant when it is one), and
    the 2-D convolution's [N * OD, F, OH, OW] is reshaped to [N, OD, F, OH,
    OW] and transposed to [N, F, OD, OH, OW]. Strides, pads and dilations
    of H and W, groups and bias pass to the 2-D convolution.

    ```mlir
    %y = kiln.conv %x, %w {dilations = array<i64: 1, 1, 1>, group = 1 : i64,
           pads = array<i64: 1, 1, 1, 1, 1, 1>, strides = array<i64: 1, 1, 1>}
         : (tensor<1x2x4x6x6xf32>, tensor<3x2x3x3x3xf32>) -> tensor<1x3x4x6x6xf32>
    // becomes
    %p = kiln.pad %x, ... : -> tensor<1x2x6x6x6xf32>
    %g = kiln.gather %p, %depths {axis = 2 : i64} : -> tensor<1x2x4x3x6x6xf32>
    %t = kiln.transpose %g {perm = array<i64: 0, 2, 1, 3, 4, 5>} ...
    %x2 = kiln.reshape %t, ... : -> tensor<4x6x6x6xf32>
    %c = kiln.conv %x2, %w2 {...} : (..., tensor<3x6x3x3xf32>) -> tensor<4x3x6x6xf32>
    %r = kiln.reshape %c, ... : -> tensor<1x4x3x6x6xf32>
    %y = kiln.transpose %r {perm = array<i64: 0, 2, 1, 3, 4>} ...
    ```
  }];
  let dependentDialects = ["::kiln::KilnDialect"];
}

def KilnConvertLayout : Pass<"kiln-convert-layout", "mlir::func::FuncOp"> {
  let summary = "Move 2-D convolution chains to NHWC and fuse their epilogues";
  let description = [{
    Each NCHW `kiln.conv` with constant weights (static, f32, 2-D) becomes
    `kiln.conv2d_nhwc` between two transposes. The transposes then sink
    through elementwise ops (broadcast operands are re-laid out when they
    are constants or smaller than the result), keepdims reductions,
    concatenations and pooling (which switches to `channels_last`), and a
    transpose pair cancels, so data stays NHWC between convolutions and
    transposes remain only at the edges. A transpose that only moves size-1
    dims becomes a reshape. Runs the `kiln-fuse-epilogues` patterns too.

    ```mlir
    %0 = kiln.conv %x, %w, %b {...} : (tensor<1x3x8x8xf32>, ...) -> tensor<1x4x8x8xf32>
    %1 = kiln.relu %0 : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
    // becomes
    %t = kiln.transpose %x {perm = array<i64: 0, 2, 3, 1>} ...
    %c = kiln.conv2d_nhwc %t, %w bias %b {clamp_max = 0x7F800000 : f32, clamp_min = 0.0 : f32, ...}
    %1 = kiln.transpose %c {perm = array<i64: 0, 3, 1, 2>} ...
    ```
  }];
  let dependentDialects = ["::kiln::KilnDialect"];
}

def KilnFuseRowOps : Pass<"kiln-fuse-row-ops", "mlir::func::FuncOp"> {
  let summary = "Recognise Softmax, LogSoftmax and layer normalisation written as reductions";
  let description = [{
    Over the trailing axes of a static f32 tensor:
    `exp(x - max) / sum` becomes `kiln.softmax`, `s - log(sum(exp(s)))`
    (with `s = x - max`) becomes `kiln.softmax {log}`, and
    `(x - mean) / sqrt(mean((x - mean)^2) + eps)` (also with `d * d`, or
    `* reciprocal(...)`) becomes `kiln.layer_norm`, which then absorbs a
    following `* scale` and `+ bias` of one value per normalised element.
    These lower to row kernels that read each row once.
  }];
  let dependentDialects = ["::kiln::KilnDialect"];
}

def KilnFuseEpilogues : Pass<"kiln-fuse-epilogues", "mlir::func::FuncOp"> {
  let summary = "Fold per-channel scale/shift, bias, residual add and Relu/Clip into conv2d_nhwc";
  let description = [{
    The kernel computes `clamp(conv + bias + residual, lo, hi)` while the
    output tile is in registers. A single-use `kiln.conv2d_nhwc` absorbs, in
    that order: `kiln.mul`/`kiln.add` by per-channel constants (folded into
    the weights and bias: BatchNormalization), `kiln.add` of a tensor of the
    result's type (residual), and `kiln.relu` or `kiln.max`/`kiln.min` with
    a scalar constant (Relu, Clip, ReLU6).
  }];
  let dependentDialects = ["::kiln::KilnDialect"];
}

#endif
