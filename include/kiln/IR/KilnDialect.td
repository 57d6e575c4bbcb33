#ifndef KILN_DIALECT_TD
#define KILN_DIALECT_TD

include "mlir/IR/OpBase.td"

def Kiln_Dialect : Dialect {
  let name = "kiln";
  let summary = "Kiln's tensor dialect: ONNX semantics on ranked tensors";
  let description = [{
    Value-semantic tensor operations imported from ONNX. Results are ranked
    tensors whose unknown dimensions are `?`; every op infers its result type
    from its operands (and from constant operands where the result shape
    depends on data, as for `kiln.reshape`). Composite ONNX operators
    (Gemm, Softmax, BatchNormalization, ...) are decomposed by the importer
    into these ops, so that the code generator only has to know this set.
  }];
  let cppNamespace = "::kiln";
  let hasConstantMaterializer = 1;
  let usePropertiesForAttributes = 1;
}

#endif
