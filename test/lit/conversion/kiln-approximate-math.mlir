// RUN: kiln-opt %s --kiln-approximate-math | FileCheck %s --implicit-check-not=math.erf \
// RUN:   --implicit-check-not=math.tanh --implicit-check-not='math.exp %{{.*}} : f32'

// exp, erf and tanh on f32 become arithmetic (no libm call left); other
// math ops and f64 are left alone.
// CHECK-LABEL: func.func @approximated
// CHECK: arith.mulf
// CHECK: math.log
// CHECK: math.exp %{{.*}} : f64
func.func @approximated(%x: f32, %d: f64) -> (f32, f32, f32, f32, f64) {
  %0 = math.exp %x : f32
  %1 = math.erf %x : f32
  %2 = math.tanh %x : f32
  %3 = math.log %x : f32
  %4 = math.exp %d : f64
  return %0, %1, %2, %3, %4 : f32, f32, f32, f32, f64
}
