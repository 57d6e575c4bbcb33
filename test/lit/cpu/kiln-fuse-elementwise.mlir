// RUN: kiln-opt %s --kiln-fuse-elementwise | FileCheck %s --check-prefix=ALL
// RUN: kiln-opt %s '--kiln-fuse-elementwise=max-body-ops=4' | FileCheck %s --check-prefix=BOUND

#id = affine_map<(d0) -> (d0)>

// A chain of four single-op generics (2 body ops each, with the yield):
// fused into one by default; with a bound of 4 body ops, pairs fuse (2 + 2)
// but two pairs would make 3 + 3 > 4, so the chain becomes two generics.
// ALL-LABEL: func.func @chain
// ALL:       linalg.generic
// ALL-COUNT-4: arith.mulf
// ALL-NOT:   linalg.generic
// BOUND-LABEL: func.func @chain
// BOUND:     linalg.generic
// BOUND-COUNT-2: arith.mulf
// BOUND-NEXT: linalg.yield
// BOUND:     linalg.generic
// BOUND-COUNT-2: arith.mulf
// BOUND-NEXT: linalg.yield
// BOUND-NOT: linalg.generic
func.func @chain(%x: tensor<4xf32>) -> tensor<4xf32> {
  %e0 = tensor.empty() : tensor<4xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<4xf32>) outs(%e0 : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.mulf %in, %in : f32
    linalg.yield %n : f32
  } -> tensor<4xf32>
  %e1 = tensor.empty() : tensor<4xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%a : tensor<4xf32>) outs(%e1 : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.mulf %in, %in : f32
    linalg.yield %n : f32
  } -> tensor<4xf32>
  %e2 = tensor.empty() : tensor<4xf32>
  %c = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%b : tensor<4xf32>) outs(%e2 : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.mulf %in, %in : f32
    linalg.yield %n : f32
  } -> tensor<4xf32>
  %e3 = tensor.empty() : tensor<4xf32>
  %d = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%c : tensor<4xf32>) outs(%e3 : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.mulf %in, %in : f32
    linalg.yield %n : f32
  } -> tensor<4xf32>
  return %d : tensor<4xf32>
}

// A producer over [8] broadcast along the rows of an [4, 8] consumer: one
// with an add (2 body ops) is recomputed per element, fused; one with an
// exp and an add (2 ops and the yield) stays apart, so it runs 8 times, not
// 32 (a Resize's taps per output column, a squeeze-excitation gate).
#row = affine_map<(d0, d1) -> (d1)>
#mat = affine_map<(d0, d1) -> (d0, d1)>
// BOUND-LABEL: func.func @broadcast_producers
// ALL-LABEL: func.func @broadcast_producers
// ALL:       linalg.generic {{.*}} iterator_types = ["parallel"]
// ALL:       math.exp
// ALL:       linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]
// ALL-NOT:   math.exp
// ALL:       arith.addf
// ALL:       arith.mulf
// ALL:       arith.mulf
// ALL-NOT:   linalg.generic
func.func @broadcast_producers(%v: tensor<8xf32>, %m: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e0 = tensor.empty() : tensor<8xf32>
  %cheap = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%v : tensor<8xf32>) outs(%e0 : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.addf %in, %in : f32
    linalg.yield %n : f32
  } -> tensor<8xf32>
  %e1 = tensor.empty() : tensor<8xf32>
  %dear = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%v : tensor<8xf32>) outs(%e1 : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %x = math.exp %in : f32
    %n = arith.addf %x, %in : f32
    linalg.yield %n : f32
  } -> tensor<8xf32>
  %e2 = tensor.empty() : tensor<4x8xf32>
  %r = linalg.generic {indexing_maps = [#mat, #row, #row, #mat], iterator_types = ["parallel", "parallel"]}
      ins(%m, %cheap, %dear : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) outs(%e2 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %out: f32):
    %p = arith.mulf %a, %b : f32
    %q = arith.mulf %p, %c : f32
    linalg.yield %q : f32
  } -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}
