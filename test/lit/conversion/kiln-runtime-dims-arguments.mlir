// RUN: kiln-opt %s --kiln-runtime-dims-arguments | FileCheck %s

// Buffers of dims known only at run time reach the model function as one
// pointer each (memref<0xT>) and one i64 array of every such dim, inputs
// then outputs; inside, each buffer is rebuilt from its sizes. main_dims
// reads the symbol from its first input, checks the other input that
// names it (returning 1 + the array index of a dim that disagrees) and
// writes the output's dims from kiln.dim_map.
// CHECK: module attributes {kiln.runtime_dims = 4 : i64}
// CHECK-LABEL: func.func @main(
// CHECK-SAME: %[[X:.*]]: memref<0xf32> {kiln.dim_names = ["n", ""]},
// CHECK-SAME: %[[Y:.*]]: memref<0xf32> {kiln.dim_names = ["n", "m"]},
// CHECK-SAME: %[[OUT:.*]]: memref<0xf32> {kiln.dim_map = {{.*}}},
// CHECK-SAME: %[[DIMS:.*]]: memref<4xi64>)
// CHECK: %[[N0:.*]] = memref.load %[[DIMS]][%c0]
// CHECK: %[[N:.*]] = arith.index_cast %[[N0]]
// CHECK: memref.reinterpret_cast %[[X]] to offset: [0], sizes: [%[[N]], 4], strides: [4, 1]
// CHECK: memref.load %[[DIMS]][%c1]
// CHECK: memref.load %[[DIMS]][%c2]
// CHECK: memref.reinterpret_cast %[[Y]]
// CHECK: memref.load %[[DIMS]][%c3]
// CHECK: memref.reinterpret_cast %[[OUT]] to offset: [0], sizes: [%{{.*}}, 4], strides: [4, 1]
// CHECK-LABEL: func.func @main_dims(
// CHECK-SAME: %[[D:.*]]: memref<4xi64>) -> i64
// CHECK-DAG: %[[SYM:.*]] = memref.load %[[D]][%c0]
// CHECK-DAG: %[[OTHER:.*]] = memref.load %[[D]][%c1]
// CHECK: arith.cmpi ne, %[[OTHER]], %[[SYM]]
// CHECK: %[[BAD:.*]] = arith.select {{.*}}, %c2_i64,
// A dim inside the model that must be at least 1 (kiln.dim_checks, a
// window's output size (m - 3) floordiv 2 + 1): -2 where it is not and no
// input disagreed first.
// CHECK: %[[SIZE:.*]] = affine.apply #{{.*}}()[%{{.*}}]
// CHECK: %[[SMALL:.*]] = arith.cmpi slt, %[[SIZE]], %c1
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[BAD]], %c0_i64
// CHECK: %[[BOTH:.*]] = arith.andi %[[SMALL]], %[[FIRST]]
// CHECK: %[[BAD2:.*]] = arith.select %[[BOTH]], %c-2_i64, %[[BAD]]
// What a Slice of bounds from the input dims assumed (kiln.slice_checks,
// a table of 16 positions sliced to m: 16 - m >= 0): -3 where it does not
// hold and nothing failed first.
// CHECK: %[[ROOM:.*]] = affine.apply #{{.*}}()[%{{.*}}]
// CHECK: %[[PAST:.*]] = arith.cmpi slt, %[[ROOM]], %c0
// CHECK: %[[FIRST3:.*]] = arith.cmpi eq, %[[BAD2]], %c0_i64
// CHECK: %[[BOTH3:.*]] = arith.andi %[[PAST]], %[[FIRST3]]
// CHECK: %[[RET:.*]] = arith.select %[[BOTH3]], %c-3_i64, %[[BAD2]]
// CHECK: memref.store %{{.*}}, %[[D]][%c3]
// CHECK: return %[[RET]]
func.func @main(%x: memref<?x4xf32> {kiln.dim_names = ["n", ""]},
                %y: memref<?x?xf32> {kiln.dim_names = ["n", "m"]},
                %out: memref<?x4xf32> {kiln.dim_map = affine_map<()[s0, s1] -> (s0 + 1, 4)>})
    attributes {kiln.runtime_symbols = [array<i64: 0, 0>, array<i64: 1, 1>],
                kiln.runtime_symbol_names = ["n", "m"],
                kiln.dim_checks = [affine_map<()[s0, s1] -> ((s1 - 3) floordiv 2 + 1)>],
                kiln.slice_checks = [affine_map<()[s0, s1] -> (-s1 + 16)>]} {
  %s = memref.subview %out[0, 0] [4, 4] [1, 1] : memref<?x4xf32> to memref<4x4xf32, strided<[4, 1]>>
  %t = memref.subview %x[0, 0] [4, 4] [1, 1] : memref<?x4xf32> to memref<4x4xf32, strided<[4, 1]>>
  memref.copy %t, %s : memref<4x4xf32, strided<[4, 1]>> to memref<4x4xf32, strided<[4, 1]>>
  %u = memref.subview %y[0, 0] [1, 1] [1, 1] : memref<?x?xf32> to memref<1x1xf32, strided<[?, 1]>>
  return
}
