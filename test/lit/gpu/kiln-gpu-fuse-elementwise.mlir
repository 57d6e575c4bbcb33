// RUN: kiln-opt %s --kiln-gpu-fuse-elementwise | FileCheck %s

// The elementwise exp fuses into the elementwise add, which reads it through
// the identity map; it does not fuse into the matrix product, which reads
// it through (m, k, n) -> (m, k) and would evaluate it once per n.
// CHECK-LABEL: func.func @fuse
// CHECK: %[[E:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]
// CHECK: math.exp
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction", "parallel"]{{.*}}ins(%[[E]],
// CHECK-NOT: math.exp
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]
// CHECK: math.exp
// CHECK: arith.addf
#id = affine_map<(i, j) -> (i, j)>
#mk = affine_map<(m, k, n) -> (m, k)>
#kn = affine_map<(m, k, n) -> (k, n)>
#mn = affine_map<(m, k, n) -> (m, n)>
func.func @fuse(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>, %acc: tensor<4x8xf32>)
    -> (tensor<4x8xf32>, tensor<4x16xf32>) {
  %e0 = tensor.empty() : tensor<4x16xf32>
  %e = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x16xf32>) outs(%e0 : tensor<4x16xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = math.exp %v : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  %mm = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "reduction", "parallel"]} ins(%e, %w : tensor<4x16xf32>, tensor<16x8xf32>) outs(%acc : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %d0 = tensor.empty() : tensor<4x16xf32>
  %d = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%e, %x : tensor<4x16xf32>, tensor<4x16xf32>) outs(%d0 : tensor<4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  return %mm, %d : tensor<4x8xf32>, tensor<4x16xf32>
}
