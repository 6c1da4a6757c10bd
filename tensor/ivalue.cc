#include "tensor/ivalue.h"

namespace trainrun {

const char* IValue::type_name() const {
  static const char* const names[] = {"None", "Tensor", "Tensor[]", "int", "float", "bool",
                                      "int[]", "str", "dtype", "Device", "Scalar"};
  static_assert(sizeof(names) / sizeof(names[0]) == std::variant_size_v<Value>, "a name per alternative");
  return names[value_.index()];
}

}  // namespace trainrun
