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
