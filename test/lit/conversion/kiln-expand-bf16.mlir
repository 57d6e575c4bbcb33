// RUN: kiln-opt %s --kiln-expand-bf16 | FileCheck %s
// RUN: kiln-opt %s --kiln-expand-bf16 --convert-arith-to-llvm | FileCheck %s --check-prefix=LLVM

// f32 -> bf16 becomes integer ops (round to nearest even): no truncf to bf16
// is left for LLVM to lower to a call of __truncsfbf2.
// CHECK-LABEL: func.func @truncate
// CHECK-NOT: arith.truncf
// CHECK: arith.bitcast %{{.*}} : f32 to i32
// CHECK: arith.shrui
// CHECK: arith.trunci %{{.*}} : i32 to i16
// CHECK: arith.bitcast %{{.*}} : i16 to bf16
// LLVM-LABEL: @truncate
// LLVM-NOT: llvm.fptrunc
func.func @truncate(%x: f32) -> bf16 {
  %y = arith.truncf %x : f32 to bf16
  return %y : bf16
}

// bf16 arithmetic (a loop accumulating in bf16) is computed in f32, each
// result rounded back to bf16 once, as integer ops; vectors alike.
// CHECK-LABEL: func.func @accumulate
// CHECK-NOT: arith.truncf
// CHECK: arith.addf %{{.*}}, %{{.*}} : vector<4xf32>
// CHECK: arith.bitcast %{{.*}} : vector<4xi16> to vector<4xbf16>
// LLVM-LABEL: @accumulate
// LLVM-NOT: llvm.fptrunc
// LLVM-NOT: llvm.fpext
func.func @accumulate(%a: vector<4xbf16>, %b: vector<4xbf16>) -> vector<4xbf16> {
  %s = arith.addf %a, %b : vector<4xbf16>
  return %s : vector<4xbf16>
}

// Other types are left alone.
// CHECK-LABEL: func.func @other
// LLVM-LABEL: @other
// CHECK: arith.truncf %{{.*}} : f32 to f16
func.func @other(%x: f32) -> f16 {
  %y = arith.truncf %x : f32 to f16
  return %y : f16
}
