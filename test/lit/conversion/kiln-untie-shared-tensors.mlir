// RUN: kiln-opt %s --kiln-untie-shared-tensors | FileCheck %s

#id = affine_map<(d0) -> (d0)>

// Two generics writing into one (CSE-merged) empty tensor get one each; a
// single-use empty is left alone.
// CHECK-LABEL: func.func @shared
// CHECK:      %[[E0:.*]] = tensor.empty() : tensor<4xf32>
// CHECK:      %[[A:.*]] = linalg.generic {{.*}} outs(%[[E0]] : tensor<4xf32>)
// CHECK:      %[[E1:.*]] = tensor.empty() : tensor<4xf32>
// CHECK:      %[[B:.*]] = linalg.generic {{.*}} ins(%[[A]] : tensor<4xf32>) outs(%[[E1]] : tensor<4xf32>)
// CHECK:      %[[E2:.*]] = tensor.empty() : tensor<8xf32>
// CHECK-NOT:  tensor.empty
// CHECK:      return %[[B]], %[[E2]]
func.func @shared(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<8xf32>) {
  %e = tensor.empty() : tensor<4xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  } -> tensor<4xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%a : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  } -> tensor<4xf32>
  %f = tensor.empty() : tensor<8xf32>
  return %b, %f : tensor<4xf32>, tensor<8xf32>
}

// A dynamic size: the clone reuses the original's operand.
// CHECK-LABEL: func.func @dynamic
// CHECK-SAME:  (%[[N:.*]]: index)
// CHECK:       tensor.empty(%[[N]])
// CHECK:       tensor.empty(%[[N]])
func.func @dynamic(%n: index) -> (tensor<?xf32>, tensor<?xf32>) {
  %e = tensor.empty(%n) : tensor<?xf32>
  return %e, %e : tensor<?xf32>, tensor<?xf32>
}

// A tensor constant read by two ops gets one per reader (the same uniqued
// attribute); a scalar constant is left shared.
// CHECK-LABEL: func.func @constant
// CHECK:      %[[S:.*]] = arith.constant 2.0{{.*}} : f32
// CHECK:      %[[C0:.*]] = arith.constant dense<[1.0{{.*}}, 2.0{{.*}}]> : tensor<2xf32>
// CHECK:      %[[A:.*]] = linalg.generic {{.*}} ins(%[[C0]] : tensor<2xf32>)
// CHECK:      arith.mulf {{.*}}, %[[S]]
// CHECK:      %[[C1:.*]] = arith.constant dense<[1.0{{.*}}, 2.0{{.*}}]> : tensor<2xf32>
// CHECK:      linalg.generic {{.*}} ins(%[[A]], %[[C1]] : tensor<2xf32>, tensor<2xf32>)
// CHECK:      arith.mulf {{.*}}, %[[S]]
func.func @constant(%out: tensor<2xf32>) -> tensor<2xf32> {
  %s = arith.constant 2.0 : f32
  %c = arith.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%c : tensor<2xf32>) outs(%out : tensor<2xf32>) {
  ^bb0(%in: f32, %o: f32):
    %m = arith.mulf %in, %s : f32
    linalg.yield %m : f32
  } -> tensor<2xf32>
  %b = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%a, %c : tensor<2xf32>, tensor<2xf32>) outs(%out : tensor<2xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.addf %x, %y : f32
    %m = arith.mulf %p, %s : f32
    linalg.yield %m : f32
  } -> tensor<2xf32>
  return %b : tensor<2xf32>
}
