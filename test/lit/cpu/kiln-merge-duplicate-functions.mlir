// RUN: kiln-opt %s --kiln-merge-duplicate-functions --split-input-file | FileCheck %s

// Two layers' outlined ops, the same but for their names and locations:
// one function is kept and both calls go to it. @add_three differs in a
// constant, @add_one_nf in an argument attribute, @add_one_pub is public:
// all three stay.
// CHECK-LABEL: func.func private @add_one(
// CHECK-NOT: func.func private @add_one_again
// CHECK: func.func private @add_three(
// CHECK: func.func private @add_one_nf(
// CHECK: func.func @add_one_pub(
// CHECK-LABEL: func.func @main
// CHECK: call @add_one(%arg0, %arg1)
// CHECK: call @add_one(%arg1, %arg2)
// CHECK: call @add_three(%arg0, %arg2)
// CHECK: call @add_one_nf(%arg0, %arg1)
// CHECK: call @add_one_pub(%arg0, %arg1)
#map = affine_map<(d0) -> (d0)>
func.func private @add_one(%a: memref<8xf32> {llvm.noalias}, %b: memref<8xf32> {llvm.noalias}) {
  %one = arith.constant 1.0 : f32
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%a : memref<8xf32>) outs(%b : memref<8xf32>) {
  ^bb0(%x: f32, %y: f32):
    %s = arith.addf %x, %one : f32
    linalg.yield %s : f32
  } loc("layer0")
  return
}
func.func private @add_one_again(%a: memref<8xf32> {llvm.noalias}, %b: memref<8xf32> {llvm.noalias}) {
  %one = arith.constant 1.0 : f32
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%a : memref<8xf32>) outs(%b : memref<8xf32>) {
  ^bb0(%x: f32, %y: f32):
    %s = arith.addf %x, %one : f32
    linalg.yield %s : f32
  } loc("layer1")
  return
}
func.func private @add_three(%a: memref<8xf32> {llvm.noalias}, %b: memref<8xf32> {llvm.noalias}) {
  %three = arith.constant 3.0 : f32
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%a : memref<8xf32>) outs(%b : memref<8xf32>) {
  ^bb0(%x: f32, %y: f32):
    %s = arith.addf %x, %three : f32
    linalg.yield %s : f32
  }
  return
}
func.func private @add_one_nf(%a: memref<8xf32>, %b: memref<8xf32>) {
  %one = arith.constant 1.0 : f32
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%a : memref<8xf32>) outs(%b : memref<8xf32>) {
  ^bb0(%x: f32, %y: f32):
    %s = arith.addf %x, %one : f32
    linalg.yield %s : f32
  }
  return
}
func.func @add_one_pub(%a: memref<8xf32> {llvm.noalias}, %b: memref<8xf32> {llvm.noalias}) {
  %one = arith.constant 1.0 : f32
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%a : memref<8xf32>) outs(%b : memref<8xf32>) {
  ^bb0(%x: f32, %y: f32):
    %s = arith.addf %x, %one : f32
    linalg.yield %s : f32
  }
  return
}
func.func @main(%x: memref<8xf32>, %y: memref<8xf32>, %z: memref<8xf32>) {
  call @add_one(%x, %y) : (memref<8xf32>, memref<8xf32>) -> ()
  call @add_one_again(%y, %z) : (memref<8xf32>, memref<8xf32>) -> ()
  call @add_three(%x, %z) : (memref<8xf32>, memref<8xf32>) -> ()
  call @add_one_nf(%x, %y) : (memref<8xf32>, memref<8xf32>) -> ()
  call @add_one_pub(%x, %y) : (memref<8xf32>, memref<8xf32>) -> ()
  return
}

// -----

// Same ops in a different order of operands (a - b against b - a): kept
// apart, as are functions whose operand types differ.
// CHECK-LABEL: func.func private @sub_ab(
// CHECK: func.func private @sub_ba(
// CHECK: func.func private @sub_ab16(
// CHECK-LABEL: func.func @pair
// CHECK: call @sub_ab(
// CHECK: call @sub_ba(
// CHECK: call @sub_ab16(
func.func private @sub_ab(%a: f32, %b: f32, %o: memref<f32>) {
  %d = arith.subf %a, %b : f32
  memref.store %d, %o[] : memref<f32>
  return
}
func.func private @sub_ba(%a: f32, %b: f32, %o: memref<f32>) {
  %d = arith.subf %b, %a : f32
  memref.store %d, %o[] : memref<f32>
  return
}
func.func private @sub_ab16(%a: f16, %b: f16, %o: memref<f16>) {
  %d = arith.subf %a, %b : f16
  memref.store %d, %o[] : memref<f16>
  return
}
func.func @pair(%a: f32, %b: f32, %o: memref<f32>, %a16: f16, %b16: f16, %o16: memref<f16>) {
  call @sub_ab(%a, %b, %o) : (f32, f32, memref<f32>) -> ()
  call @sub_ba(%a, %b, %o) : (f32, f32, memref<f32>) -> ()
  call @sub_ab16(%a16, %b16, %o16) : (f16, f16, memref<f16>) -> ()
  return
}

// -----

// A duplicate used other than by a call (its address taken) stays, and so
// do its calls.
// CHECK-LABEL: func.func private @neg(
// CHECK: func.func private @neg_again(
// CHECK-LABEL: func.func @addressed
// CHECK: call @neg(
// CHECK: call @neg_again(
// CHECK: constant @neg_again
func.func private @neg(%a: f32, %o: memref<f32>) {
  %d = arith.negf %a : f32
  memref.store %d, %o[] : memref<f32>
  return
}
func.func private @neg_again(%a: f32, %o: memref<f32>) {
  %d = arith.negf %a : f32
  memref.store %d, %o[] : memref<f32>
  return
}
func.func @addressed(%a: f32, %o: memref<f32>) -> ((f32, memref<f32>) -> ()) {
  call @neg(%a, %o) : (f32, memref<f32>) -> ()
  call @neg_again(%a, %o) : (f32, memref<f32>) -> ()
  %f = func.constant @neg_again : (f32, memref<f32>) -> ()
  return %f : (f32, memref<f32>) -> ()
}
