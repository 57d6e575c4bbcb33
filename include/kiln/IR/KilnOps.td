#ifndef KILN_OPS_TD
#define KILN_OPS_TD

include "kiln/IR/KilnDialect.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

// A signless i64 attribute read back as int64_t: axes may be negative, and
// upstream I64Attr returns uint64_t.
def Kiln_I64Attr : TypedSignlessIntegerAttrBase<I64, "int64_t",
                                                "64-bit signless integer attribute"> {
  let convertFromStorage = "$_self.getValue().getSExtValue()";
}

//===----------------------------------------------------------------------===//
// Base classes
//===----------------------------------------------------------------------===//

// Every kiln op is side-effect free and infers its result types. The
// inferred type may be more precise than the one an op carries (a `?` that
// later became known): `isCompatibleReturnTypes` accepts that, and the
// `kiln-infer-shapes` pass writes the refinement back.
class Kiln_Op<string mnemonic, list<Trait> traits = []>
    : Op<Kiln_Dialect, mnemonic,
         !listconcat(traits, [Pure, InferTypeOpAdaptorWithIsCompatible])> {
  code compatDef = [{
    bool $cppClass::isCompatibleReturnTypes(::mlir::TypeRange l,
                                            ::mlir::TypeRange r) {
      return ::kiln::detail::areCompatibleReturnTypes(l, r);
    }
  }];
  code inferDef = "";
  let extraClassDefinition = compatDef # inferDef;
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

// Elementwise ops that keep their operand's type.
class Kiln_UnaryOp<string mnemonic, string what>
    : Kiln_Op<mnemonic, [SameOperandsAndResultElementType]> {
  let summary = "elementwise " # what;
  let description = "Applies " # what # " to every element.\n\n"
    # "```mlir\n%y = kiln." # mnemonic
    # " %x : (tensor<2x?xf32>) -> tensor<2x?xf32>\n```";
  let arguments = (ins AnyTensor:$input);
  let results = (outs AnyTensor:$output);
  let inferDef = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location>, Adaptor a,
        ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      types.push_back(a.getInput().getType());
      return ::mlir::success();
    }
  }];
  let hasFolder = 1;
}

// Elementwise binary ops with ONNX multidirectional (numpy) broadcasting.
// `resultIsBool` is set for comparisons, which produce i1.
class Kiln_BinaryOp<string mnemonic, string what, bit resultIsBool = 0>
    : Kiln_Op<mnemonic> {
  let summary = "elementwise " # what # " with broadcasting";
  let description = "Computes " # what # " element by element after "
    # "broadcasting both operands to a common shape (ONNX multidirectional "
    # "broadcasting).\n\n```mlir\n%z = kiln." # mnemonic
    # " %a, %b : (tensor<4x1xf32>, tensor<3xf32>) -> tensor<4x3x"
    # !if(resultIsBool, "i1", "f32") # ">\n```";
  let arguments = (ins AnyTensor:$lhs, AnyTensor:$rhs);
  let results = (outs AnyTensor:$output);
  let inferDef = "::llvm::LogicalResult $cppClass::inferReturnTypes("
    # "::mlir::MLIRContext *ctx, std::optional<::mlir::Location> loc, "
    # "Adaptor a, ::llvm::SmallVectorImpl<::mlir::Type> &types) {\n"
    # "  return ::kiln::detail::inferBroadcast(loc, {a.getLhs(), a.getRhs()}, "
    # !if(resultIsBool, "true", "false") # ", types);\n}\n";
  let hasFolder = 1;
}

// Reductions over `axes` (normalized, non-negative, sorted).
class Kiln_ReduceOp<string mnemonic, string what> : Kiln_Op<mnemonic> {
  let summary = what # " reduction over the given axes";
  let description = "Reduces `input` with " # what # " over `axes`. With "
    # "`keepdims` the reduced axes stay as size-1 dimensions.\n\n```mlir\n"
    # "%r = kiln." # mnemonic # " %x {axes = array<i64: 1>, keepdims = true}"
    # " : (tensor<2x3xf32>) -> tensor<2x1xf32>\n```";
  let arguments = (ins AnyTensor:$input, DenseI64ArrayAttr:$axes,
                       BoolAttr:$keepdims);
  let results = (outs AnyTensor:$output);
  let inferDef = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location> loc, Adaptor a,
        ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      return ::kiln::detail::inferReduce(loc, a.getInput(), a.getAxes(),
                                         a.getKeepdims(), types);
    }
  }];
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Code generation
//===----------------------------------------------------------------------===//

// Not a Kiln_Op: it has no inferred type and is not pure (it stands for a
// call that writes memory once bufferized).
def Kiln_CallKernelOp : Op<Kiln_Dialect, "call_kernel"> {
  let summary = "a call to one of Kiln's microkernels, in destination-passing style";
  let description = [{
    Made by `kiln-lower-to-linalg`. Tensor arguments are read by the kernel
    and scalar ones passed as they are; `init` is the destination the kernel
    writes (its contents are not read) and the result is that tensor. Its
    bufferization model (lib/codegen/KernelCallBufferization.cpp) turns it
    into a `func.call` of `kernel` with each buffer's address as an i64, the
    destination's at `result_position`, copying any buffer that is not
    dense row-major.

    `row_strides` lists pairs (tensor argument, i64 argument), with -1 for
    the destination: the kernel takes that tensor's row stride (elements
    between consecutive rows of its last dimension) in that i64 argument. A
    buffer that is dense except for its row stride (a slice of a
    concatenation along the last dimension) is then passed without a copy,
    and the bufferization model writes its stride into the argument.

    ```mlir
    %y = kiln.call_kernel @kiln_matmul_f32(%params, %a, %b) into %init {result_position = 3 : i64}
         : (tensor<11xi64>, tensor<4x8xf32>, tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$kernel, Variadic<AnyType>:$args,
                       AnyRankedTensor:$init, I64Attr:$result_position,
                       OptionalAttr<DenseI64ArrayAttr>:$row_strides);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $kernel `(` $args `)` `into` $init attr-dict `:` functional-type(operands, results)
  }];
}

// Not a Kiln_Op either: it has an effect (it may stop the run) and no tensors.
def Kiln_LoopGuardOp : Op<Kiln_Dialect, "loop_guard",
                          [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "whether an ONNX Loop may start another iteration";
  let description = [{
    Written by the Loop importer into the condition of the `scf.while` it
    makes, so that a Loop whose trip count or condition is only known at run
    time cannot run forever: false once `iteration` reaches the runtime's
    limit (`kiln_max_loop_iterations()`, which the user can raise), which
    also records an error naming `node` that ends the run, and false for
    every Loop of a run that has already stopped that way. Lowered to a call
    of the runtime's `kiln_loop_guard`; the interpreter applies the same
    limit.

    ```mlir
    %go = kiln.loop_guard %i {node = "loop_1"} : i1
    ```
  }];
  let arguments = (ins I64:$iteration, StrAttr:$node);
  let results = (outs I1:$go);
  let assemblyFormat = "$iteration attr-dict `:` type($go)";
}

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

def Kiln_ConstantOp : Kiln_Op<"constant", [ConstantLike]> {
  let summary = "a constant tensor (weights, ONNX Constant nodes, folded values)";
  let description = [{
    ```mlir
    %w = kiln.constant {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
  let assemblyFormat = "attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

def Kiln_NegOp : Kiln_UnaryOp<"neg", "negation">;
def Kiln_AbsOp : Kiln_UnaryOp<"abs", "absolute value">;
def Kiln_ExpOp : Kiln_UnaryOp<"exp", "the exponential">;
def Kiln_LogOp : Kiln_UnaryOp<"log", "the natural logarithm">;
def Kiln_SqrtOp : Kiln_UnaryOp<"sqrt", "the square root">;
def Kiln_ReluOp : Kiln_UnaryOp<"relu", "max(x, 0)">;
def Kiln_SigmoidOp : Kiln_UnaryOp<"sigmoid", "the logistic function 1/(1+exp(-x))">;
def Kiln_TanhOp : Kiln_UnaryOp<"tanh", "the hyperbolic tangent">;
def Kiln_ErfOp : Kiln_UnaryOp<"erf", "the Gauss error function">;
def Kiln_FloorOp : Kiln_UnaryOp<"floor", "rounding down">;
def Kiln_CeilOp : Kiln_UnaryOp<"ceil", "rounding up">;
def Kiln_RoundOp : Kiln_UnaryOp<"round", "rounding half to even">;
def Kiln_ReciprocalOp : Kiln_UnaryOp<"reciprocal", "1/x">;
def Kiln_SignOp : Kiln_UnaryOp<"sign", "the sign (-1, 0 or 1)">;
def Kiln_NotOp : Kiln_UnaryOp<"not", "logical negation">;
def Kiln_SinOp : Kiln_UnaryOp<"sin", "the sine">;
def Kiln_CosOp : Kiln_UnaryOp<"cos", "the cosine">;
def Kiln_TanOp : Kiln_UnaryOp<"tan", "the tangent">;
def Kiln_AsinOp : Kiln_UnaryOp<"asin", "the arc sine">;
def Kiln_AcosOp : Kiln_UnaryOp<"acos", "the arc cosine">;
def Kiln_AtanOp : Kiln_UnaryOp<"atan", "the arc tangent">;
def Kiln_SinhOp : Kiln_UnaryOp<"sinh", "the hyperbolic sine">;
def Kiln_CoshOp : Kiln_UnaryOp<"cosh", "the hyperbolic cosine">;
def Kiln_AsinhOp : Kiln_UnaryOp<"asinh", "the inverse hyperbolic sine">;
def Kiln_AcoshOp : Kiln_UnaryOp<"acosh", "the inverse hyperbolic cosine">;
def Kiln_AtanhOp : Kiln_UnaryOp<"atanh", "the inverse hyperbolic tangent">;

def Kiln_AddOp : Kiln_BinaryOp<"add", "a + b">;
def Kiln_SubOp : Kiln_BinaryOp<"sub", "a - b">;
def Kiln_MulOp : Kiln_BinaryOp<"mul", "a * b">;
def Kiln_DivOp : Kiln_BinaryOp<"div", "a / b (integer division truncates)">;
def Kiln_PowOp : Kiln_BinaryOp<"pow", "a raised to b"> {
  // pow(x, 2) and pow(x, 3) become products (ONNX Runtime computes them the
  // same way): powf is a libm call on the CPU and a long libdevice routine
  // on the GPU, in the middle of every layer and RMS norm.
  let hasCanonicalizer = 1;
}
def Kiln_MaxOp : Kiln_BinaryOp<"max", "max(a, b)">;
def Kiln_MinOp : Kiln_BinaryOp<"min", "min(a, b)">;
def Kiln_RemOp : Kiln_BinaryOp<"rem", "the remainder with the sign of the divisor">;
def Kiln_FRemOp : Kiln_BinaryOp<"frem", "the remainder with the sign of the dividend (fmod)">;
def Kiln_AndOp : Kiln_BinaryOp<"and", "logical and">;
def Kiln_OrOp : Kiln_BinaryOp<"or", "logical or">;
def Kiln_XorOp : Kiln_BinaryOp<"xor", "logical exclusive or">;
def Kiln_ShiftLeftOp : Kiln_BinaryOp<"shift_left", "a << b">;
def Kiln_ShiftRightOp : Kiln_BinaryOp<"shift_right", "a >> b (logical)">;
def Kiln_EqualOp : Kiln_BinaryOp<"equal", "a == b", 1>;
def Kiln_LessOp : Kiln_BinaryOp<"less", "a < b", 1>;
def Kiln_LessEqualOp : Kiln_BinaryOp<"less_equal", "a <= b", 1>;
def Kiln_GreaterOp : Kiln_BinaryOp<"greater", "a > b", 1>;
def Kiln_GreaterEqualOp : Kiln_BinaryOp<"greater_equal", "a >= b", 1>;

def Kiln_SelectOp : Kiln_Op<"select"> {
  let summary = "elementwise choice between two tensors (ONNX Where)";
  let description = [{
    Picks `lhs` where `condition` is true and `rhs` elsewhere; all three
    operands broadcast.

    ```mlir
    %r = kiln.select %c, %a, %b : (tensor<3xi1>, tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
    ```
  }];
  let arguments = (ins AnyTensor:$condition, AnyTensor:$lhs, AnyTensor:$rhs);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def Kiln_CastOp : Kiln_Op<"cast"> {
  let summary = "elementwise conversion to another element type";
  let description = [{
    Float to integer truncates toward zero; to i1 tests for non-zero.

    ```mlir
    %i = kiln.cast %x {to = i64} : (tensor<4xf32>) -> tensor<4xi64>
    ```
  }];
  let arguments = (ins AnyTensor:$input, TypeAttr:$to);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Linear algebra and neural-network ops
//===----------------------------------------------------------------------===//

def Kiln_MatMulOp : Kiln_Op<"matmul"> {
  let summary = "matrix product with numpy semantics (batch dims broadcast)";
  let description = [{
    ```mlir
    %c = kiln.matmul %a, %b : (tensor<2x?x64xf32>, tensor<64x32xf32>) -> tensor<2x?x32xf32>
    ```
  }];
  let arguments = (ins AnyTensor:$lhs, AnyTensor:$rhs);
  let results = (outs AnyTensor:$output);
}

def Kiln_ConvOp : Kiln_Op<"conv"> {
  let summary = "N-d grouped convolution in NC[D]HW layout";
  let description = [{
    `pads` holds the begin pads of each spatial axis followed by the end pads.

    Integer form: an 8-bit input (`ui8` or `i8`) and `i8` weights give an
    `i32` result (an `i32` bias), the exact sum of `(input -
    input_zero_point) * weight`; padding reads the zero point (it adds
    nothing). This is a quantized convolution before requantization: the
    CPU runs it on the int8 kernels (VNNI where the CPU has it).

    ```mlir
    %y = kiln.conv %x, %w, %b {dilations = array<i64: 1, 1>, group = 1 : i64,
           pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>}
         : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
    ```
  }];
  let arguments = (ins AnyTensor:$input, AnyTensor:$weight,
                       Optional<AnyTensor>:$bias,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations, Kiln_I64Attr:$group,
                       OptionalAttr<Kiln_I64Attr>:$input_zero_point);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
  // Kernel taps that only ever read padding are dropped (DeepLab's ASPP:
  // a 3x3 convolution dilated by 24 on a 14x14 map is a 1x1 one).
  let hasCanonicalizer = 1;
}

def Kiln_Conv2DNhwcOp : Kiln_Op<"conv2d_nhwc", [AttrSizedOperandSegments]> {
  let summary = "2-D grouped convolution in NHWC layout with a fused epilogue";
  let description = [{
    Computes `clamp(act(conv(input, weight) + bias + residual), clamp_min,
    clamp_max)` on NHWC tensors, where `act` is GELU (erf form, `x/2 * (1 +
    erf(x/sqrt(2)))`) when `gelu` is set and the identity otherwise. `weight` keeps ONNX's [O, I/group, KH, KW]
    layout (the code generator packs it); `residual`, when present, has the
    result's shape. `kiln-convert-layout` creates it from `kiln.conv`, and
    `kiln-fuse-epilogues` folds bias, BatchNorm scales, residual adds,
    GELU and Relu/Clip into it. The integer form (`kiln.conv`'s: 8-bit
    input, `i8` weights, `i32` bias, `input_zero_point`) has no residual or
    GELU. Its result is the exact `i32` sum, or, with `requant_type` (`ui8`
    or `si8`), that sum requantized as ONNX's QuantizeLinear does it:
    `cast(clamp(round_half_even(f32(sum) * requant_scale[oc]) +
    requant_zero_point, clamp_min, clamp_max))` (`requant_scale`: one value
    per output channel, or one for all; the clamp within the type's range,
    it and the zero point integers),
    which `kiln-fuse-epilogues` folds in from the elementwise ops the
    importer writes, so that the kernel stores 8-bit results.

    ```mlir
    %y = kiln.conv2d_nhwc %x, %w bias %b {clamp_max = 6.0 : f32, clamp_min = 0.0 : f32,
           dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>,
           strides = array<i64: 1, 1>}
         : (tensor<1x8x8x3xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x8x8x4xf32>
    ```
  }];
  let arguments = (ins AnyTensor:$input, AnyTensor:$weight,
                       Optional<AnyTensor>:$bias, Optional<AnyTensor>:$residual,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations, Kiln_I64Attr:$group,
                       F32Attr:$clamp_min, F32Attr:$clamp_max, UnitAttr:$gelu,
                       OptionalAttr<Kiln_I64Attr>:$input_zero_point,
                       OptionalAttr<DenseF32ArrayAttr>:$requant_scale,
                       OptionalAttr<F32Attr>:$requant_zero_point,
                       OptionalAttr<TypeAttr>:$requant_type);
  let results = (outs AnyTensor:$output);
  let assemblyFormat = [{
    $input `,` $weight (`bias` $bias^)? (`residual` $residual^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

// Row ops: created by `kiln-fuse-row-ops` from the reductions and
// elementwise ops that exporters write, lowered to Kiln's row kernels.
class Kiln_RowOp<string mnemonic, list<Trait> traits = []> : Kiln_Op<mnemonic, traits> {
  let inferDef = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location>, Adaptor a,
        ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      types.push_back(a.getInput().getType());
      return ::mlir::success();
    }
  }];
  let hasVerifier = 1;
}

def Kiln_SoftmaxOp : Kiln_RowOp<"softmax"> {
  let summary = "softmax or log-softmax over the trailing axes [axis, rank)";
  let description = [{
    Each slice over the trailing axes `[axis, rank)` of `scale * input`
    (`scale` > 0, default 1: attention's 1/sqrt(d)) becomes
    `exp(x - max) / sum(exp(x - max))`, or with `log`,
    `x - max - log(sum(exp(x - max)))`.

    ```mlir
    %y = kiln.softmax %x {axis = 2 : i64, log = false}
         : (tensor<4x128x128xf32>) -> tensor<4x128x128xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, Kiln_I64Attr:$axis, BoolAttr:$log,
                       DefaultValuedAttr<F32Attr, "1.0f">:$scale);
  let results = (outs AnyRankedTensor:$output);
}

def Kiln_LayerNormOp : Kiln_RowOp<"layer_norm", [AttrSizedOperandSegments]> {
  let summary = "normalisation over the trailing axes [axis, rank), with scale and bias";
  let description = [{
    Each slice over the trailing axes becomes
    `(x - mean) / sqrt(var + epsilon) * scale + bias`, where `var` is the
    mean of the squared deviations. `scale` and `bias`, when present, hold
    one value per element of a slice.

    ```mlir
    %y = kiln.layer_norm %x scale %g bias %b {axis = 2 : i64, epsilon = 1.0e-05 : f32}
         : (tensor<1x128x256xf32>, tensor<256xf32>, tensor<256xf32>) -> tensor<1x128x256xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, Optional<AnyRankedTensor>:$scale,
                       Optional<AnyRankedTensor>:$bias, Kiln_I64Attr:$axis, F32Attr:$epsilon);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat = [{
    $input (`scale` $scale^)? (`bias` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Kiln_MaxPoolOp : Kiln_Op<"max_pool"> {
  let summary = "N-d max pooling in NC[D]HW layout";
  let description = [{
    Padding never wins the maximum. Ceil-mode pooling is expressed by the
    importer as extra end padding. With `channels_last` the layout is
    N[D]HWC (set by `kiln-convert-layout`).

    ```mlir
    %y = kiln.max_pool %x {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>,
           pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>}
         : (tensor<1x64x112x112xf32>) -> tensor<1x64x56x56xf32>
    ```
  }];
  let arguments = (ins AnyTensor:$input, DenseI64ArrayAttr:$kernel_shape,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations, UnitAttr:$channels_last);
  let results = (outs AnyTensor:$output);
}

def Kiln_AvgPoolOp : Kiln_Op<"avg_pool"> {
  let summary = "N-d average pooling in NC[D]HW layout";
  let description = [{
    `pads` are the ONNX pads; `ceil_pads` is extra end padding that ceil mode
    adds, which never counts in the divisor. With `channels_last` the layout
    is N[D]HWC (set by `kiln-convert-layout`).

    ```mlir
    %y = kiln.avg_pool %x {ceil_pads = array<i64: 0, 0>, count_include_pad = false,
           kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>}
         : (tensor<1x8x4x4xf32>) -> tensor<1x8x2x2xf32>
    ```
  }];
  let arguments = (ins AnyTensor:$input, DenseI64ArrayAttr:$kernel_shape,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$ceil_pads, BoolAttr:$count_include_pad,
                       UnitAttr:$channels_last);
  let results = (outs AnyTensor:$output);
  // A zero Pad of the spatial dims right before becomes the pool's own
  // pads (counted in the divisor), so the pool reaches the NHWC kernel.
  let hasCanonicalizer = 1;
}

def Kiln_ReduceSumOp : Kiln_ReduceOp<"reduce_sum", "sum">;
def Kiln_ReduceMaxOp : Kiln_ReduceOp<"reduce_max", "maximum">;
def Kiln_ReduceMinOp : Kiln_ReduceOp<"reduce_min", "minimum">;
def Kiln_ReduceProdOp : Kiln_ReduceOp<"reduce_prod", "product">;
def Kiln_ReduceMeanOp : Kiln_ReduceOp<"reduce_mean", "mean">;

def Kiln_ArgMaxOp : Kiln_Op<"arg_max"> {
  let summary = "index of the largest element along an axis";
  let description = [{
    ```mlir
    %i = kiln.arg_max %x {axis = 1 : i64, keepdims = false, select_last_index = false}
         : (tensor<2x5xf32>) -> tensor<2xi64>
    ```
  }];
  let arguments = (ins AnyTensor:$input, Kiln_I64Attr:$axis, BoolAttr:$keepdims,
                       BoolAttr:$select_last_index, BoolAttr:$is_min);
  let results = (outs AnyTensor:$output);
}

//===----------------------------------------------------------------------===//
// Data movement and shape ops
//===----------------------------------------------------------------------===//

def Kiln_TransposeOp : Kiln_Op<"transpose", [SameOperandsAndResultElementType]> {
  let summary = "permutes dimensions";
  let description = [{
    ```mlir
    %t = kiln.transpose %x {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
    ```
  }];
  let arguments = (ins AnyTensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def Kiln_ReshapeOp : Kiln_Op<"reshape"> {
  let summary = "reshape to a shape given as a 1-D i64 tensor (ONNX Reshape)";
  let description = [{
    A 0 in `shape` copies the input dimension (unless `allowzero`) and one -1
    is inferred. The result shape is known once `shape` is constant.

    ```mlir
    %r = kiln.reshape %x, %s {allowzero = false} : (tensor<2x6xf32>, tensor<2xi64>) -> tensor<3x4xf32>
    ```
  }];
  let arguments = (ins AnyTensor:$input, AnyTensor:$shape, BoolAttr:$allowzero);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def Kiln_UnsqueezeOp : Kiln_Op<"unsqueeze", [SameOperandsAndResultElementType]> {
  let summary = "inserts size-1 dimensions at `axes` (positions in the result)";
  let description = [{
    ```mlir
    %u = kiln.unsqueeze %x {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<1x3xf32>
    ```
  }];
  let arguments = (ins AnyTensor:$input, DenseI64ArrayAttr:$axes);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def Kiln_SqueezeOp : Kiln_Op<"squeeze", [SameOperandsAndResultElementType]> {
  let summary = "removes size-1 dimensions at `axes`";
  let description = [{
    ```mlir
    %s = kiln.squeeze %x {axes = array<i64: 0>} : (tensor<1x3xf32>) -> tensor<3xf32>
    ```
  }];
  let arguments = (ins AnyTensor:$input, DenseI64ArrayAttr:$axes);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def Kiln_FlattenOp : Kiln_Op<"flatten", [SameOperandsAndResultElementType]> {
  let summary = "flattens to 2-D around `axis`";
  let description = [{
    ```mlir
    %f = kiln.flatten %x {axis = 1 : i64} : (tensor<2x3x4xf32>) -> tensor<2x12xf32>
    ```
  }];
  let arguments = (ins AnyTensor:$input, Kiln_I64Attr:$axis);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def Kiln_ConcatOp : Kiln_Op<"concat"> {
  let summary = "concatenates tensors along `axis`";
  let description = [{
    ```mlir
    %c = kiln.concat %a, %b {axis = 0 : i64} : (tensor<1xi64>, tensor<2xi64>) -> tensor<3xi64>
    ```
  }];
  let arguments = (ins Variadic<AnyTensor>:$inputs, Kiln_I64Attr:$axis);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def Kiln_SliceOp : Kiln_Op<"slice"> {
  let summary = "strided slice (ONNX Slice) with 1-D i64 starts/ends/axes/steps";
  let description = [{
    ```mlir
    %s = kiln.slice %x, %starts, %ends, %axes, %steps
         : (tensor<10xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<5xf32>
    ```
  }];
  let arguments = (ins AnyTensor:$input, AnyTensor:$starts, AnyTensor:$ends,
                       AnyTensor:$axes, AnyTensor:$steps);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
  let assemblyFormat = "$input `,` $starts `,` $ends `,` $axes `,` $steps attr-dict `:` functional-type(operands, results)";
}

def Kiln_GatherOp : Kiln_Op<"gather"> {
  let summary = "gathers slices along `axis` at `indices` (negative indices count from the end)";
  let description = [{
    ```mlir
    %g = kiln.gather %x, %i {axis = 0 : i64} : (tensor<5x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
    ```
  }];
  let arguments = (ins AnyTensor:$input, AnyTensor:$indices, Kiln_I64Attr:$axis);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def Kiln_GatherElementsOp : Kiln_Op<"gather_elements"> {
  let summary = "elementwise gather along `axis` (ONNX GatherElements)";
  let description = [{
    ```mlir
    %g = kiln.gather_elements %x, %i {axis = 1 : i64} : (tensor<2x2xf32>, tensor<2x2xi64>) -> tensor<2x2xf32>
    ```
  }];
  let arguments = (ins AnyTensor:$input, AnyTensor:$indices, Kiln_I64Attr:$axis);
  let results = (outs AnyTensor:$output);
}

def Kiln_GatherNDOp : Kiln_Op<"gather_nd"> {
  let summary = "gathers slices addressed by index tuples (ONNX GatherND)";
  let description = [{
    The last dimension of `indices` holds coordinates into `input` after the
    first `batch_dims` dimensions, which both share.

    ```mlir
    %g = kiln.gather_nd %x, %i {batch_dims = 0 : i64} : (tensor<2x2xf32>, tensor<2x2xi64>) -> tensor<2xf32>
    ```
  }];
  let arguments = (ins AnyTensor:$input, AnyTensor:$indices, Kiln_I64Attr:$batch_dims);
  let results = (outs AnyTensor:$output);
}

def Kiln_ScatterElementsOp : Kiln_Op<"scatter_elements"> {
  let summary = "writes `updates` into a copy of `input` at `indices` along `axis`";
  let description = [{
    Updates are applied in order; `reduction` is "none", "add" or "mul".

    ```mlir
    %s = kiln.scatter_elements %x, %i, %u {axis = 1 : i64, reduction = "none"}
         : (tensor<1x5xf32>, tensor<1x2xi64>, tensor<1x2xf32>) -> tensor<1x5xf32>
    ```
  }];
  let arguments = (ins AnyTensor:$input, AnyTensor:$indices, AnyTensor:$updates,
                       Kiln_I64Attr:$axis, StrAttr:$reduction);
  let results = (outs AnyTensor:$output);
}

def Kiln_ScatterNDOp : Kiln_Op<"scatter_nd"> {
  let summary = "writes slices of `updates` into a copy of `input` at index tuples";
  let description = [{
    ```mlir
    %s = kiln.scatter_nd %x, %i, %u {reduction = "none"}
         : (tensor<8xf32>, tensor<4x1xi64>, tensor<4xf32>) -> tensor<8xf32>
    ```
  }];
  let arguments = (ins AnyTensor:$input, AnyTensor:$indices, AnyTensor:$updates,
                       StrAttr:$reduction);
  let results = (outs AnyTensor:$output);
}

def Kiln_ExpandOp : Kiln_Op<"expand"> {
  let summary = "broadcasts to a shape given as a 1-D i64 tensor";
  let description = [{
    ```mlir
    %e = kiln.expand %x, %s : (tensor<3x1xf32>, tensor<2xi64>) -> tensor<3x4xf32>
    ```
  }];
  let arguments = (ins AnyTensor:$input, AnyTensor:$shape);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def Kiln_TileOp : Kiln_Op<"tile"> {
  let summary = "repeats the input along each axis";
  let description = [{
    ```mlir
    %t = kiln.tile %x, %r : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<4x3xf32>
    ```
  }];
  let arguments = (ins AnyTensor:$input, AnyTensor:$repeats);
  let results = (outs AnyTensor:$output);
}

def Kiln_PadOp : Kiln_Op<"pad"> {
  let summary = "pads with a constant, by edge replication or by reflection";
  let description = [{
    `pads` is a 1-D i64 tensor of begin pads then end pads (negative crops);
    `value` is a rank-0 tensor used in `constant` mode.

    ```mlir
    %p = kiln.pad %x, %pads, %v {mode = "constant"} : (tensor<2xf32>, tensor<2xi64>, tensor<f32>) -> tensor<4xf32>
    ```
  }];
  let arguments = (ins AnyTensor:$input, AnyTensor:$pads, AnyTensor:$value,
                       StrAttr:$mode);
  let results = (outs AnyTensor:$output);  // Zero pads are the identity (PyTorch exports AvgPool2d with one).
  let hasFolder = 1;
}

def Kiln_ShapeOp : Kiln_Op<"shape"> {
  let summary = "the shape of a tensor as a 1-D i64 tensor, dims [start, end)";
  let description = [{
    Folds to a constant as soon as the selected dimensions are static.

    ```mlir
    %s = kiln.shape %x {start = 0 : i64, end = 2 : i64} : (tensor<1x?x256xf32>) -> tensor<2xi64>
    ```
  }];
  let arguments = (ins AnyTensor:$input, Kiln_I64Attr:$start, Kiln_I64Attr:$end);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def Kiln_ConstantOfShapeOp : Kiln_Op<"constant_of_shape"> {
  let summary = "a tensor of the given shape filled with one value";
  let description = [{
    ```mlir
    %z = kiln.constant_of_shape %s {value = dense<0.0> : tensor<1xf32>} : (tensor<2xi64>) -> tensor<3x4xf32>
    ```
  }];
  let arguments = (ins AnyTensor:$shape, ElementsAttr:$value);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def Kiln_RangeOp : Kiln_Op<"range"> {
  let summary = "start, start+delta, ... up to (not including) limit";
  let description = [{
    ```mlir
    %r = kiln.range %start, %limit, %delta : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<5xi64>
    ```
  }];
  let arguments = (ins AnyTensor:$start, AnyTensor:$limit, AnyTensor:$delta);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def Kiln_RandomUniformLikeOp : Kiln_Op<"random_uniform_like"> {
  let summary = "uniform random numbers in [low, high), shaped like the input";
  let description = [{
    A counter-based generator (SplitMix64 of the seed and the element's flat
    index), so elements are independent of evaluation order and threads,
    and a given seed always gives the same tensor.

    ```mlir
    %u = kiln.random_uniform_like %x {dtype = f32, low = 0.0, high = 1.0, seed = 7 : i64}
         : (tensor<3x4xf64>) -> tensor<3x4xf32>
    ```
  }];
  let arguments = (ins AnyTensor:$input, TypeAttr:$dtype, F64Attr:$low, F64Attr:$high,
                       Kiln_I64Attr:$seed);
  let results = (outs AnyTensor:$output);
}


def Kiln_NonMaxSuppressionOp : Kiln_Op<"non_max_suppression"> {
  let summary = "ONNX NonMaxSuppression on run-time boxes and scores, into one i64 buffer";
  let description = [{
    Greedy per-(batch, class) suppression, as ONNX Runtime does it. Its
    output size depends on the values, so the result is a buffer for the
    most it can select, K = batches x classes x min(max_output_boxes_per_class,
    boxes): element 0 is the number selected, then K (batch, class, box)
    rows (zero past the count), then `boxes` elements of scratch. The
    importer slices the rows and the count out and tracks the count to the
    graph outputs (lib/frontend/RowCounts.cpp). Lowered to the
    `kiln_nms_f32` kernel.

    ```mlir
    %r = kiln.non_max_suppression %boxes, %scores {center_point_box = 0 : i64,
           iou_threshold = 5.0e-01 : f32, max_output_boxes_per_class = 3 : i64,
           score_threshold = 0.0 : f32}
         : (tensor<1x6x4xf32>, tensor<1x1x6xf32>) -> tensor<16xi64>
    ```
  }];
  let arguments = (ins F32Tensor:$boxes, F32Tensor:$scores,
                       Kiln_I64Attr:$max_output_boxes_per_class, F32Attr:$iou_threshold,
                       F32Attr:$score_threshold, Kiln_I64Attr:$center_point_box);
  let results = (outs AnyTensor:$output);
}


def Kiln_NonZeroOp : Kiln_Op<"non_zero"> {
  let summary = "ONNX NonZero of a run-time mask, into one i64 buffer";
  let description = [{
    The coordinates of the non-zero bytes of `mask` (a ui8 tensor of 0 and
    1), in row-major order. Their number depends on the values, so the
    result is a buffer for all of them: element 0 is the count, then `rank`
    rows of `numel` coordinates each (zero past the count). The importer
    slices the rows and the count out (lib/frontend/RowCounts.cpp). Lowered
    to the `kiln_nonzero_u8` kernel.

    ```mlir
    %r = kiln.non_zero %mask : (tensor<2x3xui8>) -> tensor<13xi64>
    ```
  }];
  let arguments = (ins TensorOf<[UI8]>:$mask);
  let results = (outs AnyTensor:$output);
}


def Kiln_TopKOp : Kiln_Op<"top_k"> {
  let summary = "positions of the k largest (smallest) entries along an axis, k and the valid length known at run time";
  let description = [{
    ONNX TopK for a `k` and a number of valid entries along `axis` that are
    known only at run time (scalar i64 tensors): each line along the axis
    is searched in its first min(`valid`, dim) entries only (the rest is
    padding, see lib/frontend/RowCounts.cpp). The result is one i64
    buffer: the positions of each line's min(`k`, `valid`) best entries in
    order (ties: lower position first), laid out as the input with
    `capacity` slots along the axis, zero past them; then `dim` elements of
    scratch. The importer slices the positions out and gathers the values
    by them. Lowered to the
    `kiln_topk_f32` kernel, which sorts instead of the repeated arg-max the
    importer unrolls for a small constant k.

    ```mlir
    %i = kiln.top_k %x, %k, %valid {axis = 0 : i64, capacity = 300 : i64, largest = true}
         : (tensor<3234xf32>, tensor<i64>, tensor<i64>) -> tensor<3534xi64>
    ```
  }];
  let arguments = (ins F32Tensor:$input, TensorOf<[I64]>:$k, TensorOf<[I64]>:$valid,
                       Kiln_I64Attr:$axis, Kiln_I64Attr:$capacity, BoolAttr:$largest);
  let results = (outs AnyTensor:$output);
}


def Kiln_DetOp : Kiln_Op<"det"> {
  let summary = "determinants of the trailing n x n matrices, by pivoted LU";
  let description = [{
    For ONNX Det above 4x4 (smaller ones are imported as closed-form sums).
    Lowered to the `kiln_det_f32` kernel: LU with partial pivoting in double,
    n at most 64.

    ```mlir
    %d = kiln.det %x : (tensor<3x6x6xf32>) -> tensor<3xf32>
    ```
  }];
  let arguments = (ins F32Tensor:$input);
  let results = (outs F32Tensor:$output);
}

#endif
