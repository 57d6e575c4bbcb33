// RUN: kiln-opt %s --kiln-gpu-vectorize-elementwise --canonicalize --cse --split-input-file | FileCheck %s

// Bias + ReLU on NCHW: the bias reads the channel, so G is (h, w), 16
// elements collapsed to one dim; each thread reads and writes 4 of them
// with 16-byte accesses and broadcasts its channel's bias. x is a planned
// buffer (a view of the workspace at a multiple of 64 bytes).
#nchw = affine_map<(n, c, h, w) -> (n, c, h, w)>
#chan = affine_map<(n, c, h, w) -> (c)>
// CHECK-LABEL: func.func @bias_relu
// CHECK-NOT: linalg.generic
// CHECK: scf.parallel (%[[C:.*]], %[[J:.*]]) = (%c0, %c0) to (%c8, %c4)
// CHECK: %[[AT:.*]] = arith.muli %[[J]], %c4
// CHECK: %[[X:.*]] = memref.collapse_shape %{{.*}} {{\[}}[0], [1], [2, 3]] : memref<1x8x4x4xf32> into memref<1x8x16xf32>
// CHECK: %[[V:.*]] = vector.load %[[X]][%c0, %[[C]], %[[AT]]] {alignment = 16 : i64} : memref<1x8x16xf32>, vector<4xf32>
// CHECK: %[[B:.*]] = memref.load %arg1[%[[C]]]
// CHECK: %[[BB:.*]] = vector.broadcast %[[B]] : f32 to vector<4xf32>
// CHECK: %[[S:.*]] = arith.addf %[[V]], %[[BB]] : vector<4xf32>
// CHECK: %[[R:.*]] = arith.maximumf %[[S]], %{{.*}} : vector<4xf32>
// CHECK: %[[Y:.*]] = memref.collapse_shape %arg2
// CHECK: vector.store %[[R]], %[[Y]][%c0, %[[C]], %[[AT]]] {alignment = 16 : i64}
func.func @bias_relu(%ws: memref<4096xi8>, %b: memref<8xf32>, %y: memref<1x8x4x4xf32>) {
  %c512 = arith.constant 512 : index
  %x = memref.view %ws[%c512][] : memref<4096xi8> to memref<1x8x4x4xf32>
  linalg.generic {indexing_maps = [#nchw, #chan, #nchw],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x, %b : memref<1x8x4x4xf32>, memref<8xf32>) outs(%y : memref<1x8x4x4xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    %z = arith.constant 0.0 : f32
    %r = arith.maximumf %s, %z : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A concat's second part (a planned buffer), copied to column 6 of rows
// of 12 of an output: 16-byte accesses would be misaligned (6 floats = 24
// bytes), so 2 elements at a time, 8-byte aligned.
// CHECK-LABEL: func.func @concat_part
// CHECK-NOT: memref.copy
// CHECK: scf.parallel (%[[I:.*]], %[[J:.*]]) = (%c0, %c0) to (%c4, %c3)
// CHECK: %[[AT:.*]] = arith.muli %[[J]], %c2
// CHECK: %[[V:.*]] = vector.load %{{.*}}[%[[I]], %[[AT]]] {alignment = 8 : i64} : memref<4x6xf32>, vector<2xf32>
// CHECK: vector.store %[[V]], %{{.*}}[%[[I]], %[[AT]]] {alignment = 8 : i64} : memref<4x6xf32, strided<[12, 1], offset: 6>>, vector<2xf32>
func.func @concat_part(%ws: memref<4096xi8>, %y: memref<4x12xf32>) {
  %c64 = arith.constant 64 : index
  %a = memref.view %ws[%c64][] : memref<4096xi8> to memref<4x6xf32>
  %v = memref.subview %y[0, 6] [4, 6] [1, 1] : memref<4x12xf32> to memref<4x6xf32, strided<[12, 1], offset: 6>>
  memref.copy %a, %v : memref<4x6xf32> to memref<4x6xf32, strided<[12, 1], offset: 6>>
  return
}

// -----

// A padded buffer: zeroed (a linalg.map and a linalg.fill, their value
// broadcast), then the image copied into its interior at an odd offset.
// Each thread copies 4 elements: its loads are 16-byte aligned, its
// stores only 4 (NVPTX splits them).
// CHECK-LABEL: func.func @pad
// CHECK-DAG: %[[Z:.*]] = arith.constant dense<0.000000e+00> : vector<4xf32>
// CHECK-DAG: %[[ONE:.*]] = arith.constant dense<1.000000e+00> : vector<4xf32>
// CHECK-NOT: linalg.
// CHECK: scf.parallel (%[[I:.*]]) = (%c0) to (%c25)
// CHECK: %[[AT:.*]] = arith.muli %[[I]], %c4
// CHECK: vector.store %[[Z]], %{{.*}}[%[[AT]]] {alignment = 16 : i64} : memref<100xf32>, vector<4xf32>
// CHECK: scf.parallel (%[[I:.*]]) = (%c0) to (%c25)
// CHECK: vector.store %[[ONE]], %{{.*}} {alignment = 16 : i64} : memref<100xf32>, vector<4xf32>
// CHECK: scf.parallel (%[[R:.*]], %[[J:.*]]) = (%c0, %c0) to (%c8, %c2)
// CHECK: %[[AT:.*]] = arith.muli %[[J]], %c4
// CHECK: %[[V:.*]] = vector.load %{{.*}}[%[[R]], %[[AT]]] {alignment = 16 : i64} : memref<8x8xf32>, vector<4xf32>
// CHECK: vector.store %[[V]], %{{.*}}[%[[R]], %[[AT]]] {alignment = 4 : i64} : memref<8x8xf32, strided<[10, 1], offset: 11>>, vector<4xf32>
func.func @pad(%ws: memref<4096xi8>, %padded: memref<10x10xf32>, %ones: memref<10x10xf32>) {
  %c0 = arith.constant 0 : index
  %x = memref.view %ws[%c0][] : memref<4096xi8> to memref<8x8xf32>
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  linalg.map outs(%padded : memref<10x10xf32>)
    (%init: f32) {
      linalg.yield %zero : f32
    }
  linalg.fill ins(%one : f32) outs(%ones : memref<10x10xf32>)
  %inner = memref.subview %padded[1, 1] [8, 8] [1, 1] : memref<10x10xf32> to memref<8x8xf32, strided<[10, 1], offset: 11>>
  memref.copy %x, %inner : memref<8x8xf32> to memref<8x8xf32, strided<[10, 1], offset: 11>>
  return
}

// -----

// A cast from f16: the widest element (f32) sets 4 per thread; the f16
// loads are then 8 bytes. Every dim is contiguous in both: one G of 48.
// CHECK-LABEL: func.func @cast
// CHECK: scf.parallel (%[[J:.*]]) = (%c0) to (%c12)
// CHECK: vector.load %{{.*}} {alignment = 8 : i64} : memref<48xf16>, vector<4xf16>
// CHECK: arith.extf %{{.*}} : vector<4xf16> to vector<4xf32>
// CHECK: vector.store %{{.*}} {alignment = 16 : i64} : memref<48xf32>, vector<4xf32>
func.func @cast(%ws: memref<4096xi8>, %y: memref<2x3x8xf32>) {
  %c128 = arith.constant 128 : index
  %a = memref.view %ws[%c128][] : memref<4096xi8> to memref<2x3x8xf16>
  linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, j, k)>, affine_map<(i, j, k) -> (i, j, k)>],
                  iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%a : memref<2x3x8xf16>) outs(%y : memref<2x3x8xf32>) {
  ^bb0(%x: f16, %o: f32):
    %e = arith.extf %x : f16 to f32
    linalg.yield %e : f32
  }
  return
}

// -----

// The output read too (in place), and linalg.index of the row: G is the
// row alone (the index's dim cannot be in G); the row index is the same in
// every lane.
// CHECK-LABEL: func.func @index_and_inplace
// CHECK: scf.parallel (%[[I:.*]], %[[J:.*]]) = (%c0, %c0) to (%c4, %c4)
// CHECK: %[[AT:.*]] = arith.muli %[[J]], %c4
// CHECK: %[[X:.*]] = vector.load %{{.*}}[%[[I]], %[[AT]]] {alignment = 16 : i64}
// CHECK: %[[O:.*]] = vector.load %arg1[%[[I]], %[[AT]]] {alignment = 16 : i64}
// CHECK: vector.broadcast %[[I]] : index to vector<4xindex>
// CHECK: arith.addf %[[X]], %[[O]] : vector<4xf32>
// CHECK: vector.store %{{.*}}, %arg1[%[[I]], %[[AT]]]
func.func @index_and_inplace(%ws: memref<4096xi8>, %y: memref<4x16xf32>) {
  %c0 = arith.constant 0 : index
  %a = memref.view %ws[%c0][] : memref<4096xi8> to memref<4x16xf32>
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<4x16xf32>) outs(%y : memref<4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %i = linalg.index 0 : index
    %ii = arith.index_cast %i : index to i32
    %f = arith.sitofp %ii : i32 to f32
    %s = arith.addf %x, %o : f32
    %t = arith.addf %s, %f : f32
    linalg.yield %t : f32
  }
  return
}

// -----

// What a buffer's start is known to be aligned to bounds each access: a
// model input may be at any address (4 bytes for f32), a view of the
// workspace 4 bytes past a multiple of 64 too, one 32 bytes past it 16
// bytes; an output is 64-byte aligned by the ABI.
// CHECK-LABEL: func.func @buffer_starts
// CHECK: vector.load %arg0[%{{.*}}] {alignment = 4 : i64}
// CHECK: vector.load %{{.*}} {alignment = 4 : i64}
// CHECK: vector.load %{{.*}} {alignment = 16 : i64}
// CHECK: vector.store %{{.*}}, %arg2[%{{.*}}] {alignment = 16 : i64}
func.func @buffer_starts(%in: memref<16xf32>, %ws: memref<4096xi8>, %y: memref<16xf32>) {
  %c4 = arith.constant 4 : index
  %c32 = arith.constant 32 : index
  %odd = memref.view %ws[%c4][] : memref<4096xi8> to memref<16xf32>
  %even = memref.view %ws[%c32][] : memref<4096xi8> to memref<16xf32>
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>, affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                  iterator_types = ["parallel"]}
      ins(%in, %odd, %even : memref<16xf32>, memref<16xf32>, memref<16xf32>) outs(%y : memref<16xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    %t = arith.addf %s, %c : f32
    linalg.yield %t : f32
  }
  return
}

// -----

// A copy between two slices at column 2 of rows of 10 (planned buffers):
// neither is 16-byte aligned at 4 elements, both are 8-byte aligned at 2.
// CHECK-LABEL: func.func @even_offset
// CHECK: vector.load %{{.*}} {alignment = 8 : i64} : memref<4x8xf32, strided<[10, 1], offset: 2>>, vector<2xf32>
// CHECK: vector.store %{{.*}} {alignment = 8 : i64} : memref<4x8xf32, strided<[10, 1], offset: 2>>, vector<2xf32>
func.func @even_offset(%ws: memref<4096xi8>) {
  %c0 = arith.constant 0 : index
  %c256 = arith.constant 256 : index
  %a = memref.view %ws[%c0][] : memref<4096xi8> to memref<4x10xf32>
  %b = memref.view %ws[%c256][] : memref<4096xi8> to memref<4x10xf32>
  %sa = memref.subview %a[0, 2] [4, 8] [1, 1] : memref<4x10xf32> to memref<4x8xf32, strided<[10, 1], offset: 2>>
  %sb = memref.subview %b[0, 2] [4, 8] [1, 1] : memref<4x10xf32> to memref<4x8xf32, strided<[10, 1], offset: 2>>
  memref.copy %sa, %sb : memref<4x8xf32, strided<[10, 1], offset: 2>> to memref<4x8xf32, strided<[10, 1], offset: 2>>
  return
}

// -----

// Left to kiln-gpu-loops: a transpose (the input reads G's dim first), 147
// elements (no W >= 2 divides them), a bool input (i1 vectors are
// bit-packed, the buffer is not), a reduction.
// CHECK-LABEL: func.func @transpose
// CHECK: linalg.generic
// CHECK-LABEL: func.func @odd
// CHECK: linalg.generic
// CHECK-LABEL: func.func @where
// CHECK: linalg.generic
// CHECK-LABEL: func.func @sum
// CHECK: linalg.generic
// CHECK-NOT: vector.
func.func @transpose(%a: memref<4x8xf32>, %y: memref<8x4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (j, i)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<4x8xf32>) outs(%y : memref<8x4xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  }
  return
}
func.func @odd(%a: memref<3x7x7xf32>, %y: memref<3x7x7xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, j, k)>, affine_map<(i, j, k) -> (i, j, k)>],
                  iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%a : memref<3x7x7xf32>) outs(%y : memref<3x7x7xf32>) {
  ^bb0(%x: f32, %o: f32):
    %n = arith.negf %x : f32
    linalg.yield %n : f32
  }
  return
}
func.func @where(%c: memref<16xi1>, %a: memref<16xf32>, %y: memref<16xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                  iterator_types = ["parallel"]}
      ins(%c, %a : memref<16xi1>, memref<16xf32>) outs(%y : memref<16xf32>) {
  ^bb0(%k: i1, %x: f32, %o: f32):
    %z = arith.constant 0.0 : f32
    %s = arith.select %k, %x, %z : f32
    linalg.yield %s : f32
  }
  return
}
func.func @sum(%a: memref<4x16xf32>, %y: memref<4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%a : memref<4x16xf32>) outs(%y : memref<4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %s = arith.addf %x, %o : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Neither crashes the pass: a poison operand (no splat of it is built) and
// a generic without outputs.
// CHECK-LABEL: func.func @poison
// CHECK-NOT: vector.
// CHECK-LABEL: func.func @no_outputs
// CHECK-NOT: vector.
// CHECK: return
func.func @poison(%a: memref<16xf32>, %y: memref<16xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%a : memref<16xf32>) outs(%y : memref<16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %p = ub.poison : f32
    %s = arith.addf %x, %p : f32
    linalg.yield %s : f32
  }
  return
}
func.func @no_outputs(%a: memref<16xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%a : memref<16xf32>) {
  ^bb0(%x: f32):
    linalg.yield
  }
  return
}
