#include "tensor/elementwise_configs.h"

namespace trainrun {

const char* op_name(BinaryOp op) {
  static const char* names[] = {"mul",        "div",         "div",         "div",        "remainder",
                                "pow",        "maximum",     "minimum",     "eq",         "ne",
                                "lt",         "le",          "gt",          "ge",         "logical_and",
                                "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor"};
  return names[static_cast<int>(op)];
}

const char* op_name(UnaryOp op) {
  static const char* names[] = {"exp",  "log",     "log1p", "sqrt",  "rsqrt", "sin",         "cos",
                                "tanh", "sigmoid", "erf",   "silu",  "gelu",  "gelu",        "neg",
                                "abs",  "relu",    "sign",  "floor", "round", "logical_not", "bitwise_not"};
  return names[static_cast<int>(op)];
}

IteratorConfig binary_config(BinaryOp op) {
  IteratorConfig config;
  config.op = op_name(op);
  config.promote_integer_to_float = op == BinaryOp::Div;
  if (binary_bool_result(op)) config.output_dtype = DType::Bool;
  return config;
}

IteratorConfig unary_config(UnaryOp op) {
  IteratorConfig config;
  config.op = op_name(op);
  config.promote_integer_to_float = unary_float_result(op);
  if (op == UnaryOp::LogicalNot) config.output_dtype = DType::Bool;
  return config;
}

IteratorConfig plain_config(const char* op) {
  IteratorConfig config;
  config.op = op;
  return config;
}

IteratorConfig where_config() {
  IteratorConfig config;
  config.op = "where";
  config.inputs_keeping_dtype = 1;
  return config;
}

IteratorConfig addc_config(bool divide) {
  IteratorConfig config;
  config.op = divide ? "addcdiv" : "addcmul";
  config.promote_integer_to_float = divide;
  return config;
}

}  // namespace trainrun
