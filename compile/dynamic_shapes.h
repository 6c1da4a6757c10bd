#pragma once
// A program for inputs whose sizes vary along some dims (torch.export's
// dynamic_shapes): the forward is recorded at several sizes of those dims,
// the recordings must be the same program but for integers (a view's
// sizes, an allocation's strides, a loop's row count), and each integer that
// changes is fitted as a polynomial in the dims' values, checked exactly at
// further recordings. A call binds the dims from its inputs' shapes and runs
// the recorded program with every such integer evaluated (cached per size).
//
// A program whose ops change with a size (Python branching on it), or that
// reads a size as a float or divides one, is refused by generalize(), naming
// the node: it has no one program for all sizes.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compile/captured_graph.h"

namespace trainrun::compile {

// A size that varies: its name (torch.export.Dim's) and the values it may take.
struct DynamicDim {
  std::string name;
  int64_t min = 2, max = INT64_MAX;
};

// Where one input dim's size comes from: fixed (`dim` -1: the recorded size), or mul * dims[dim] + add.
struct InputDim {
  int dim = -1;
  int64_t mul = 1, add = 0;
};

// An integer polynomial in the dims' values: sum of coeff * prod (value_i - origin_i)^exponent_i.
struct SizePolynomial {
  struct Term {
    std::vector<int> exponents;
    int64_t coeff = 0;
  };
  std::vector<int64_t> origin;
  std::vector<Term> terms;
  int64_t operator()(const std::vector<int64_t>& values) const;
};

class DynamicProgram {
 public:
  // `graphs[i]` was recorded with the dims at `points[i]` (one value per dim). The first
  // C(k + degree, degree) points (k dims) are where the polynomials are fitted: the simplex lattice
  // points[0] + e, |e| <= degree; the rest check them. graphs[base] is the program that runs.
  // `input_dims`: per graph input, per dim. ValueError naming the node and the sizes where the
  // recordings differ otherwise than in integers, or where an integer is no polynomial of the dims.
  static std::shared_ptr<DynamicProgram> generalize(std::vector<DynamicDim> dims,
                                                    std::vector<std::vector<InputDim>> input_dims,
                                                    const std::vector<std::shared_ptr<const CapturedGraph>>& graphs,
                                                    const std::vector<std::vector<int64_t>>& points, int degree,
                                                    size_t base);

  // The dims' values for these inputs. ValueError naming the input and dim: a fixed size that differs, a
  // dynamic one out of its range or disagreeing with another input's (`names`: one per input).
  std::vector<int64_t> bind(const std::vector<Tensor>& inputs, const std::vector<std::string>& names) const;
  // The program with every size-dependent integer evaluated at `values` (made once per values, kept).
  std::shared_ptr<const CapturedGraph> at(const std::vector<int64_t>& values) const;

  const std::shared_ptr<const CapturedGraph>& base() const { return base_; }
  const std::vector<DynamicDim>& dims() const { return dims_; }
  const std::vector<std::vector<InputDim>>& input_dims() const { return input_dims_; }
  size_t num_size_dependent() const { return sites_.size(); }

  // The dims, input dims and polynomials (the graph itself is program_io's).
  nlohmann::json to_json() const;
  static std::shared_ptr<DynamicProgram> from_json(const nlohmann::json& j, std::shared_ptr<const CapturedGraph> base);

 private:
  std::shared_ptr<const CapturedGraph> base_;
  std::vector<DynamicDim> dims_;
  std::vector<std::vector<InputDim>> input_dims_;
  std::map<size_t, SizePolynomial> sites_;  // by the integer's place in the walk over the nodes (dynamic_shapes.cc)
  mutable std::mutex mutex_;
  mutable std::map<std::vector<int64_t>, std::shared_ptr<const CapturedGraph>> made_;
};

}  // namespace trainrun::compile
