// RUN: kiln-opt %s --kiln-gpu-split-reductions --split-input-file | FileCheck %s

// A layer norm's row sum, 128 rows of 256: r = 16 (16 * 16 = 256). The
// first op is parallel over (row, partial) and reads x[row, 16 * j + p]
// (consecutive partials, consecutive elements); the second adds each
// row's 16 partials into the original init. The partials need no fill:
// the first op starts from 0 at its first step (j == 0).
#map_in = affine_map<(d0, d1) -> (d0, d1)>
#map_out = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @row_sum
// CHECK-SAME: (%[[X:.*]]: tensor<128x256xf32>, %[[INIT:.*]]: tensor<128xf32>)
// CHECK: %[[XS:.*]] = tensor.expand_shape %[[X]] {{\[}}[0], [1, 2]] output_shape [128, 16, 16]
// CHECK: %[[PARTIAL:.*]] = tensor.empty() : tensor<128x16xf32>
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NOT: linalg.fill
// CHECK: %[[SPLIT:.*]] = linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "reduction", "parallel"]
// CHECK-SAME: ins(%[[XS]] : tensor<128x16x16xf32>) outs(%[[PARTIAL]] : tensor<128x16xf32>)
// CHECK-NEXT: ^bb0(%[[IN:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK-NEXT: %[[J:.*]] = linalg.index 1 : index
// CHECK-NEXT: %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT: %[[FIRST:.*]] = arith.cmpi eq, %[[J]], %[[C0]] : index
// CHECK-NEXT: %[[START:.*]] = arith.select %[[FIRST]], %[[ZERO]], %[[ACC]] : f32
// CHECK-NEXT: arith.addf %[[IN]], %[[START]] : f32
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "reduction"]
// CHECK-SAME: ins(%[[SPLIT]] : tensor<128x16xf32>) outs(%[[INIT]] : tensor<128xf32>)
// CHECK: arith.addf
func.func @row_sum(%x: tensor<128x256xf32>, %init: tensor<128xf32>) -> tensor<128xf32> {
  %r = linalg.generic {indexing_maps = [#map_in, #map_out], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<128x256xf32>) outs(%init : tensor<128xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<128xf32>
  return %r : tensor<128xf32>
}

// -----

// A row maximum over 1000 (softmax): 1000 is divisible by 8, not 16. The
// original init is a fill used by nothing else: the combining op takes its
// value (-inf) at its first step, and that fill goes too.
#map_in = affine_map<(d0, d1) -> (d0, d1)>
#map_out = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @row_max
// CHECK: %[[LOWEST:.*]] = arith.constant -3.40282347E+38 : f32
// CHECK-NOT: linalg.fill
// CHECK: tensor.expand_shape %{{.*}} {{\[}}[0], [1, 2]] output_shape [4, 125, 8]
// CHECK: %[[NEG:.*]] = arith.constant 0xFF800000 : f32
// CHECK-NOT: linalg.fill
// CHECK: arith.select %{{.*}}, %[[NEG]], %{{.*}} : f32
// CHECK: arith.maximumf
// CHECK: linalg.index 1 : index
// CHECK: arith.select %{{.*}}, %[[LOWEST]], %{{.*}} : f32
// CHECK: arith.maximumf
func.func @row_max(%x: tensor<4x1000xf32>) -> tensor<4xf32> {
  %lowest = arith.constant -3.40282347E+38 : f32
  %empty = tensor.empty() : tensor<4xf32>
  %init = linalg.fill ins(%lowest : f32) outs(%empty : tensor<4xf32>) -> tensor<4xf32>
  %r = linalg.generic {indexing_maps = [#map_in, #map_out], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x1000xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %m = arith.maximumf %a, %acc : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// Left alone: enough outputs (2^14 rows), a short reduction (32), two
// reduction loops, and a reduction length with no power-of-two factor of 8.
#map2 = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1) -> (d0)>
#map3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map3o = affine_map<(d0, d1, d2) -> (d0)>
// CHECK-LABEL: func.func @kept
// CHECK-NOT: tensor.expand_shape
// CHECK-COUNT-4: linalg.generic
// CHECK-NOT: linalg.generic
func.func @kept(%many: tensor<16384x256xf32>, %i1: tensor<16384xf32>, %short: tensor<8x32xf32>,
                %i2: tensor<8xf32>, %two: tensor<8x16x16xf32>, %odd: tensor<8x1001xf32>)
    -> (tensor<16384xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %a = linalg.generic {indexing_maps = [#map2, #map1], iterator_types = ["parallel", "reduction"]}
      ins(%many : tensor<16384x256xf32>) outs(%i1 : tensor<16384xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %x, %acc : f32
    linalg.yield %s : f32
  } -> tensor<16384xf32>
  %b = linalg.generic {indexing_maps = [#map2, #map1], iterator_types = ["parallel", "reduction"]}
      ins(%short : tensor<8x32xf32>) outs(%i2 : tensor<8xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %x, %acc : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  %c = linalg.generic {indexing_maps = [#map3, #map3o], iterator_types = ["parallel", "reduction", "reduction"]}
      ins(%two : tensor<8x16x16xf32>) outs(%i2 : tensor<8xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %x, %acc : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  %d = linalg.generic {indexing_maps = [#map2, #map1], iterator_types = ["parallel", "reduction"]}
      ins(%odd : tensor<8x1001xf32>) outs(%i2 : tensor<8xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %x, %acc : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  return %a, %b, %c, %d : tensor<16384xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// A variance: the mean is read at a constant index of its kept unit dim,
// (d0, d1, 0). That input is collapsed to 1x128 first, so every map is a
// projected permutation, then the reduction is split as above.
#x = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#mean = affine_map<(d0, d1, d2) -> (d0, d1, 0)>
#out = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @variance
// CHECK-SAME: (%[[X:.*]]: tensor<1x128x256xf32>, %[[MEAN:.*]]: tensor<1x128x1xf32>
// CHECK: %[[M2:.*]] = tensor.collapse_shape %[[MEAN]] {{\[}}[0], [1, 2]] : tensor<1x128x1xf32> into tensor<1x128xf32>
// CHECK: %[[XS:.*]] = tensor.expand_shape %[[X]] {{\[}}[0], [1], [2, 3]] output_shape [1, 128, 16, 16]
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "reduction", "parallel"]
// CHECK-SAME: ins(%[[XS]], %[[M2]] : tensor<1x128x16x16xf32>, tensor<1x128xf32>)
// CHECK: linalg.index 2 : index
// CHECK: arith.subf
// CHECK: arith.mulf
// CHECK: linalg.generic
// CHECK-SAME: ins(%{{.*}} : tensor<1x128x16xf32>)
func.func @variance(%x: tensor<1x128x256xf32>, %mean: tensor<1x128x1xf32>, %init: tensor<1x128xf32>) -> tensor<1x128xf32> {
  %r = linalg.generic {indexing_maps = [#x, #mean, #out], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %mean : tensor<1x128x256xf32>, tensor<1x128x1xf32>) outs(%init : tensor<1x128xf32>) {
  ^bb0(%a: f32, %m: f32, %acc: f32):
    %d = arith.subf %a, %m : f32
    %sq = arith.mulf %d, %d : f32
    %s = arith.addf %sq, %acc : f32
    linalg.yield %s : f32
  } -> tensor<1x128xf32>
  return %r : tensor<1x128xf32>
}

// -----

// A body that reads linalg.index is left alone: upstream's split would not
// renumber it (a gathered row fused into its sum reads its own index).
#in = affine_map<(d0, d1) -> (d0, d1)>
#o = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @indexed
// CHECK-NOT: tensor.expand_shape
// CHECK: linalg.index 1
// CHECK-NOT: linalg.generic
func.func @indexed(%x: tensor<128x256xf32>, %init: tensor<128xf32>) -> tensor<128xf32> {
  %r = linalg.generic {indexing_maps = [#in, #o], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<128x256xf32>) outs(%init : tensor<128xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %k = linalg.index 1 : index
    %ki = arith.index_cast %k : index to i32
    %kf = arith.sitofp %ki : i32 to f32
    %w = arith.mulf %a, %kf : f32
    %s = arith.addf %w, %acc : f32
    linalg.yield %s : f32
  } -> tensor<128xf32>
  return %r : tensor<128xf32>
}
