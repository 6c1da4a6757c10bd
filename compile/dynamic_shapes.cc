#include "compile/dynamic_shapes.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstring>
#include <functional>

#include "base/error.h"
#include "compile/external_call.h"
#include "compile/fused_kernel.h"

namespace trainrun::compile {
namespace {

using Node = CapturedGraph::Node;
using Slot = CapturedGraph::Slot;
using IntVisitor = std::function<void(int64_t&, size_t node, const char* what)>;

void walk_constant(IValue& c, size_t n, const IntVisitor& f) {
  const std::string type = c.type_name();
  if (type == "int") {
    f(c.get<int64_t>(), n, "an integer argument");
  } else if (type == "int[]") {
    for (int64_t& v : c.get<IntList>()) f(v, n, "a size argument");
  } else if (type == "Scalar" && c.get<Scalar>().is_integral()) {
    int64_t v = c.get<Scalar>().to_int();
    f(v, n, "an integer scalar argument");
    c = IValue(Scalar(v));
  }
}

// Every integer of the nodes a size can set, in one fixed order (a place in it names the integer in
// DynamicProgram's polynomials, and in its JSON): allocations' sizes and strides, random draws' element
// counts, loops' rows, cols and output sizes, and integer constants among the arguments.
void walk_integers(std::vector<Node>& nodes, const IntVisitor& f) {
  for (size_t n = 0; n < nodes.size(); ++n) {
    Node& node = nodes[n];
    for (int64_t& v : node.alloc_sizes) f(v, n, "an allocation's size");
    for (int64_t& v : node.alloc_strides) f(v, n, "an allocation's stride");
    if (node.random_elements >= 0) f(node.random_elements, n, "a random draw's element count");
    if (node.fused != nullptr) {
      auto loop = std::make_shared<FusedKernel>(*node.fused);  // (the same function and library)
      f(loop->rows, n, "a loop's row count");
      f(loop->cols, n, "a loop's column count");
      for (IntList& sizes : loop->output_sizes)
        for (int64_t& v : sizes) f(v, n, "a loop output's size");
      node.fused = std::move(loop);
    }
    for (Slot& s : node.args)
      if (s.kind == Slot::Constant) walk_constant(s.constant, n, f);
    for (Slot& s : node.results)
      if (s.kind == Slot::Constant) walk_constant(s.constant, n, f);
  }
}

std::vector<int64_t> integers_of(const CapturedGraph& g, std::vector<std::pair<size_t, const char*>>* where) {
  std::vector<Node> nodes = g.nodes();
  std::vector<int64_t> out;
  walk_integers(nodes, [&](int64_t& v, size_t n, const char* what) {
    out.push_back(v);
    if (where != nullptr) where->emplace_back(n, what);
  });
  return out;
}

std::string constant_shape(const IValue& value) {
  IValue& c = const_cast<IValue&>(value);  // (get is not const; nothing is changed)
  const std::string type = c.type_name();
  if (type == "int") return "int";
  if (type == "int[]") return fmt::format("int[{}]", c.get<IntList>().size());
  if (type == "float") return fmt::format("float {:.17g}", c.get<double>());
  if (type == "bool") return fmt::format("bool {}", c.get<bool>());
  if (type == "str") return "str " + c.get<std::string>();
  if (type == "dtype") return std::string("dtype ") + dtype_name(c.get<DType>());
  if (type == "Device") return "Device " + c.get<Device>().str();
  if (type == "Scalar") {
    const Scalar& s = c.get<Scalar>();
    if (s.is_integral()) return "Scalar int";
    return s.is_bool() ? fmt::format("Scalar {}", s.to_bool()) : fmt::format("Scalar {:.17g}", s.to_double());
  }
  return type;
}

std::string slot_shape(const Slot& s) {
  switch (s.kind) {
    case Slot::Value: return fmt::format("%{}", s.value);
    case Slot::ValueList: return fmt::format("[%{}]", fmt::join(s.values, ", %"));
    case Slot::Constant: return constant_shape(s.constant);
  }
  return "?";
}

// A node with its integers left out: two recordings of one program differ in nothing else.
std::string skeleton(const Node& n) {
  std::string out = n.name();
  if (n.fused != nullptr) out += fmt::format("[{}]", fmt::join(n.fused->ops, ", "));
  if (n.external != nullptr) out = n.external->key();
  if (n.is_alloc()) out += fmt::format("({}-d {} {})", n.alloc_sizes.size(), dtype_name(n.alloc_dtype),
                                       n.alloc_device.str());
  if (n.random_elements >= 0) out += " (random)";
  std::vector<std::string> args, results;
  for (const Slot& s : n.args) args.push_back(slot_shape(s));
  for (const Slot& s : n.results) results.push_back(slot_shape(s));
  return fmt::format("{} = {}({}){}", fmt::join(results, ", "), out, fmt::join(args, ", "),
                     n.grad_enabled ? " [grad]" : "");
}

std::string at_points(const std::vector<DynamicDim>& dims, const std::vector<int64_t>& point) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < dims.size(); ++i) parts.push_back(fmt::format("{}={}", dims[i].name, point[i]));
  return fmt::format("{}", fmt::join(parts, ", "));
}

// The exponents of every monomial of total degree <= degree in k variables, in one fixed order.
std::vector<std::vector<int>> monomials(size_t k, int degree) {
  std::vector<std::vector<int>> out;
  std::vector<int> e(k, 0);
  std::function<void(size_t, int)> fill = [&](size_t i, int left) {
    if (i == k) {
      out.push_back(e);
      return;
    }
    for (int d = 0; d <= left; ++d) {
      e[i] = d;
      fill(i + 1, left - d);
    }
    e[i] = 0;
  };
  fill(0, degree);
  return out;
}

// Whether two recordings' constant tensors are one (the same tensor, or the same sizes, dtype and bytes).
bool same_constant(const Tensor& a, const Tensor& b) {
  if (a.impl() == b.impl()) return true;
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype() || a.device() != b.device()) return false;
  if (!a.device().is_cpu()) return true;  // (sizes only: the bytes would need a copy from the device)
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), static_cast<size_t>(ca.nbytes())) == 0;
}

int64_t power(int64_t base, int e) {
  int64_t r = 1;
  while (e-- > 0) r *= base;
  return r;
}

}  // namespace

int64_t SizePolynomial::operator()(const std::vector<int64_t>& values) const {
  int64_t sum = 0;
  for (const Term& t : terms) {
    int64_t p = t.coeff;
    for (size_t i = 0; i < t.exponents.size(); ++i) p *= power(values[i] - origin[i], t.exponents[i]);
    sum += p;
  }
  return sum;
}

std::shared_ptr<DynamicProgram> DynamicProgram::generalize(
    std::vector<DynamicDim> dims, std::vector<std::vector<InputDim>> input_dims,
    const std::vector<std::shared_ptr<const CapturedGraph>>& graphs, const std::vector<std::vector<int64_t>>& points,
    int degree, size_t base) {
  const size_t k = dims.size();
  TR_CHECK(k > 0 && degree >= 1, ValueError, "DynamicProgram: {} dims, degree {}", k, degree);
  const std::vector<std::vector<int>> exps = monomials(k, degree);
  const size_t m = exps.size();
  TR_CHECK(graphs.size() == points.size() && points.size() > m && base < graphs.size(), ValueError,
           "DynamicProgram: {} recordings at {} points; degree {} in {} dims needs more than {}", graphs.size(),
           points.size(), degree, k, m);
  for (const auto& p : points)
    TR_CHECK(p.size() == k, ValueError, "DynamicProgram: a point of {} values for {} dims", p.size(), k);
  const std::vector<int64_t>& origin = points[0];
  for (size_t r = 0; r < m; ++r) {  // the fitting points are the simplex lattice around points[0]
    for (size_t i = 0; i < k; ++i)
      TR_CHECK(points[r][i] - origin[i] == exps[r][i], ValueError,
               "DynamicProgram: point {} is not the lattice point it must be", r);
  }

  // The recordings must be one program but for their integers.
  const CapturedGraph& g0 = *graphs[0];
  for (size_t j = 1; j < graphs.size(); ++j) {
    const CapturedGraph& g = *graphs[j];
    const std::string where = fmt::format("at {} and at {}", at_points(dims, points[0]), at_points(dims, points[j]));
    TR_CHECK(g.num_values() == g0.num_values() && g.inputs() == g0.inputs() && g.outputs() == g0.outputs() &&
                 g.constants().size() == g0.constants().size() && g.nodes().size() == g0.nodes().size(),
             ValueError,
             "export with dynamic shapes: the program recorded {} differs ({} vs {} ops, {} vs {} values): its ops "
             "depend on the dynamic dims' values (Python branching on a size?); make those dims static",
             where, g0.nodes().size(), g.nodes().size(), g0.num_values(), g.num_values());
    for (size_t c = 0; c < g.constants().size(); ++c) {
      const Tensor& a = g0.constants()[c].second;
      const Tensor& b = g.constants()[c].second;
      TR_CHECK(g.constants()[c].first == g0.constants()[c].first && same_constant(a, b), ValueError,
               "export with dynamic shapes: the program recorded {} reads a different tensor constant %{} (shape [{}] "
               "vs [{}]): a tensor made outside the recorded ops (from numpy or Python data) that follows the "
               "dynamic dims; make it with trainrun ops, or make those dims static",
               where, g0.constants()[c].first, fmt::join(a.sizes(), ", "), fmt::join(b.sizes(), ", "));
    }
    for (size_t n = 0; n < g.nodes().size(); ++n) {
      const std::string a = skeleton(g0.nodes()[n]), b = skeleton(g.nodes()[n]);
      TR_CHECK(a == b, ValueError,
               "export with dynamic shapes: the program recorded {} differs at op {}: `{}` vs `{}`; its ops must not "
               "depend on the dynamic dims' values (Python branching on a size, a size read as a float?); make "
               "those dims static",
               where, n, a, b);
    }
  }
  std::vector<std::pair<size_t, const char*>> where;
  std::vector<std::vector<int64_t>> values;
  for (size_t j = 0; j < graphs.size(); ++j) values.push_back(integers_of(*graphs[j], j == 0 ? &where : nullptr));

  // Fit: A c = v on the lattice, A[r][t] = prod_i e_r[i]^t[i] (Gaussian elimination once, long double).
  std::vector<std::vector<long double>> lu(m, std::vector<long double>(m));
  for (size_t r = 0; r < m; ++r)
    for (size_t t = 0; t < m; ++t) {
      long double p = 1;
      for (size_t i = 0; i < k; ++i) p *= static_cast<long double>(power(exps[r][i], exps[t][i]));
      lu[r][t] = p;
    }
  std::vector<size_t> perm(m);
  for (size_t r = 0; r < m; ++r) perm[r] = r;
  for (size_t c = 0; c < m; ++c) {
    size_t pivot = c;
    for (size_t r = c + 1; r < m; ++r)
      if (std::fabs(lu[r][c]) > std::fabs(lu[pivot][c])) pivot = r;
    TR_CHECK(std::fabs(lu[pivot][c]) > 1e-9L, ValueError, "DynamicProgram: the lattice's system is singular");
    std::swap(lu[c], lu[pivot]);
    std::swap(perm[c], perm[pivot]);
    for (size_t r = c + 1; r < m; ++r) {
      lu[r][c] /= lu[c][c];
      for (size_t t = c + 1; t < m; ++t) lu[r][t] -= lu[r][c] * lu[c][t];
    }
  }
  auto solve = [&](const std::vector<long double>& v) {
    std::vector<long double> x(m);
    for (size_t r = 0; r < m; ++r) {
      x[r] = v[perm[r]];
      for (size_t t = 0; t < r; ++t) x[r] -= lu[r][t] * x[t];
    }
    for (size_t r = m; r-- > 0;) {
      for (size_t t = r + 1; t < m; ++t) x[r] -= lu[r][t] * x[t];
      x[r] /= lu[r][r];
    }
    return x;
  };

  auto program = std::make_shared<DynamicProgram>();
  const size_t count = values[0].size();
  for (size_t s = 0; s < count; ++s) {
    bool varies = false;
    for (size_t j = 1; j < graphs.size(); ++j) varies |= values[j][s] != values[0][s];
    if (!varies) continue;
    std::vector<long double> v(m);
    for (size_t r = 0; r < m; ++r) v[r] = static_cast<long double>(values[r][s]);
    const std::vector<long double> c = solve(v);
    SizePolynomial poly;
    poly.origin = origin;
    bool integral = true;
    for (size_t t = 0; t < m; ++t) {
      const long double rounded = std::round(c[t]);
      integral &= std::fabs(c[t] - rounded) < 1e-4L;
      if (rounded != 0) poly.terms.push_back({exps[t], static_cast<int64_t>(rounded)});
    }
    bool fits = integral;
    for (size_t j = 0; fits && j < graphs.size(); ++j) fits = poly(points[j]) == values[j][s];
    if (!fits) {
      std::vector<std::string> seen;
      for (size_t j = 0; j < graphs.size() && j < 6; ++j)
        seen.push_back(fmt::format("{} at {}", values[j][s], at_points(dims, points[j])));
      const auto& [n, what] = where[s];
      TR_CHECK(false, ValueError,
               "export with dynamic shapes: {} of op {} ({}) is {}: no polynomial of the dynamic dims (does the "
               "program divide a size, or take it apart?); make those dims static",
               what, n, g0.nodes()[n].name(), fmt::join(seen, ", "));
    }
    program->sites_.emplace(s, std::move(poly));
  }
  program->base_ = graphs[base];
  program->dims_ = std::move(dims);
  program->input_dims_ = std::move(input_dims);
  TR_CHECK(program->input_dims_.size() == program->base_->inputs().size(), ValueError,
           "DynamicProgram: {} input dim lists for {} inputs", program->input_dims_.size(),
           program->base_->inputs().size());
  return program;
}

std::vector<int64_t> DynamicProgram::bind(const std::vector<Tensor>& inputs,
                                          const std::vector<std::string>& names) const {
  TR_CHECK(inputs.size() == input_dims_.size(), ValueError, "{} inputs given, the program takes {}", inputs.size(),
           input_dims_.size());
  std::vector<int64_t> values(dims_.size(), -1);
  std::vector<std::string> bound_by(dims_.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    const std::string& name = i < names.size() ? names[i] : fmt::format("input {}", i);
    const CapturedGraph::ValueMeta& meta = base_->meta(base_->inputs()[i]);
    TR_CHECK(t.defined(), ValueError, "input '{}' is undefined", name);
    TR_CHECK(t.dim() == static_cast<int64_t>(input_dims_[i].size()), ValueError,
             "input '{}' has {} dims; the program was exported for {}", name, t.dim(), input_dims_[i].size());
    for (size_t d = 0; d < input_dims_[i].size(); ++d) {
      const InputDim& in = input_dims_[i][d];
      const int64_t size = t.sizes()[d];
      if (in.dim < 0) {
        TR_CHECK(size == meta.sizes[d], ValueError,
                 "input '{}' has size {} at dim {}; the program was exported for {} there (a static dim)", name, size,
                 d, meta.sizes[d]);
        continue;
      }
      const DynamicDim& dim = dims_[in.dim];
      std::string expr = in.mul == 1 ? dim.name : fmt::format("{}*{}", in.mul, dim.name);
      if (in.add != 0) expr += in.add > 0 ? fmt::format(" + {}", in.add) : fmt::format(" - {}", -in.add);
      TR_CHECK((size - in.add) % in.mul == 0, ValueError, "input '{}' has size {} at dim {}, which is not {} for any {}",
               name, size, d, expr, dim.name);
      const int64_t value = (size - in.add) / in.mul;
      TR_CHECK(value >= dim.min && value <= dim.max, ValueError,
               "input '{}' has size {} at dim {} ({}): {} = {} is outside its range [{}, {}]", name, size, d, expr,
               dim.name, value, dim.min, dim.max == INT64_MAX ? std::string("inf") : std::to_string(dim.max));
      if (values[in.dim] < 0) {
        values[in.dim] = value;
        bound_by[in.dim] = fmt::format("input '{}' dim {}", name, d);
      } else {
        TR_CHECK(values[in.dim] == value, ValueError,
                 "input '{}' has size {} at dim {}, so {} = {}; but {} = {} from {}", name, size, d, dim.name, value,
                 dim.name, values[in.dim], bound_by[in.dim]);
      }
    }
  }
  for (size_t i = 0; i < dims_.size(); ++i)
    TR_CHECK(values[i] >= 0, ValueError, "no input sets the dynamic dim {}", dims_[i].name);
  return values;
}

std::shared_ptr<const CapturedGraph> DynamicProgram::at(const std::vector<int64_t>& values) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = made_.find(values); it != made_.end()) return it->second;
  std::vector<Node> nodes = base_->nodes();
  size_t place = 0;
  walk_integers(nodes, [&](int64_t& v, size_t, const char*) {
    if (auto it = sites_.find(place++); it != sites_.end()) v = it->second(values);
  });
  std::shared_ptr<CapturedGraph> g = base_->with_nodes(std::move(nodes));
  for (size_t i = 0; i < input_dims_.size(); ++i) {  // (contiguous, as the inputs are run)
    CapturedGraph::ValueMeta meta = base_->meta(base_->inputs()[i]);
    for (size_t d = 0; d < input_dims_[i].size(); ++d)
      if (input_dims_[i][d].dim >= 0)
        meta.sizes[d] = input_dims_[i][d].mul * values[input_dims_[i][d].dim] + input_dims_[i][d].add;
    int64_t stride = 1;
    for (size_t d = meta.sizes.size(); d-- > 0;) {
      meta.strides[d] = stride;
      stride *= meta.sizes[d];
    }
    g->set_meta(g->inputs()[i], meta);
  }
  if (made_.size() >= 64) made_.clear();  // (a bound on what sizes a long-running server has seen)
  made_.emplace(values, g);
  return g;
}

nlohmann::json DynamicProgram::to_json() const {
  nlohmann::json j;
  j["dims"] = nlohmann::json::array();
  for (const DynamicDim& d : dims_) j["dims"].push_back({{"name", d.name}, {"min", d.min}, {"max", d.max}});
  j["input_dims"] = nlohmann::json::array();
  for (const auto& dims : input_dims_) {
    nlohmann::json list = nlohmann::json::array();
    for (const InputDim& d : dims)
      list.push_back(d.dim < 0 ? nlohmann::json(nullptr)
                               : nlohmann::json{{"dim", d.dim}, {"mul", d.mul}, {"add", d.add}});
    j["input_dims"].push_back(std::move(list));
  }
  j["sizes"] = nlohmann::json::array();
  for (const auto& [place, poly] : sites_) {
    nlohmann::json terms = nlohmann::json::array();
    for (const auto& t : poly.terms) terms.push_back({{"coeff", t.coeff}, {"exponents", t.exponents}});
    j["sizes"].push_back({{"place", place}, {"origin", poly.origin}, {"terms", terms}});
  }
  return j;
}

std::shared_ptr<DynamicProgram> DynamicProgram::from_json(const nlohmann::json& j,
                                                          std::shared_ptr<const CapturedGraph> base) {
  auto program = std::make_shared<DynamicProgram>();
  for (const auto& d : j.at("dims"))
    program->dims_.push_back({d.at("name").get<std::string>(), d.at("min").get<int64_t>(), d.at("max").get<int64_t>()});
  for (const auto& list : j.at("input_dims")) {
    std::vector<InputDim> dims;
    for (const auto& d : list) {
      InputDim in;
      if (!d.is_null()) {
        in.dim = d.at("dim").get<int>();
        in.mul = d.at("mul").get<int64_t>();
        in.add = d.at("add").get<int64_t>();
        TR_CHECK(in.dim >= 0 && in.dim < static_cast<int>(program->dims_.size()) && in.mul > 0, ValueError,
                 "program: an input dim names dynamic dim {} (of {}) times {}", in.dim, program->dims_.size(), in.mul);
      }
      dims.push_back(in);
    }
    program->input_dims_.push_back(std::move(dims));
  }
  TR_CHECK(program->input_dims_.size() == base->inputs().size(), ValueError,
           "program: {} input dim lists for {} inputs", program->input_dims_.size(), base->inputs().size());
  std::vector<Node> nodes = base->nodes();
  size_t count = 0;
  walk_integers(nodes, [&](int64_t&, size_t, const char*) { ++count; });
  for (const auto& s : j.at("sizes")) {
    SizePolynomial poly;
    poly.origin = s.at("origin").get<std::vector<int64_t>>();
    TR_CHECK(poly.origin.size() == program->dims_.size(), ValueError, "program: a size polynomial of {} dims, not {}",
             poly.origin.size(), program->dims_.size());
    for (const auto& t : s.at("terms")) {
      SizePolynomial::Term term{t.at("exponents").get<std::vector<int>>(), t.at("coeff").get<int64_t>()};
      TR_CHECK(term.exponents.size() == poly.origin.size(), ValueError, "program: a size term of {} exponents",
               term.exponents.size());
      poly.terms.push_back(std::move(term));
    }
    const size_t place = s.at("place").get<size_t>();
    TR_CHECK(place < count, ValueError, "program: a size polynomial for integer {} of {}", place, count);
    program->sites_.emplace(place, std::move(poly));
  }
  program->base_ = std::move(base);
  return program;
}

}  // namespace trainrun::compile
