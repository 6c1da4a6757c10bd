// View ops: new geometry over the same storage. The primitive ones go
// through the dispatcher (device-generic kernels) so autograd can record
// them; the rest are composed from those.
#include "tensor/views.h"

#include <algorithm>

#include "tensor/dispatcher.h"
#include "tensor/factories.h"
#include "tensor/op_schemas.h"

namespace trainrun {
namespace {

Tensor make_view(const Tensor& x, IntList sizes, IntList strides, int64_t offset) {
  auto impl = intrusive_ptr<TensorImpl>::make(x.impl()->storage(), x.dtype(), std::move(sizes), std::move(strides), offset);
  impl->share_version_with(*x.impl());
  return Tensor(impl);
}

// The strides a view of `x` with `sizes` must have, or nullopt when the data
// is not laid out to allow it (PyTorch's computeStride).
std::optional<IntList> view_strides(const IntList& old_sizes, const IntList& old_strides, const IntList& sizes) {
  IntList strides(sizes.size());
  int64_t numel = 1;
  for (int64_t s : old_sizes) numel *= s;
  if (numel == 0) {
    if (old_sizes == sizes) return old_strides;
    return contiguous_strides(sizes);
  }
  if (old_sizes.empty()) return IntList(sizes.size(), 1);  // one element: any strides do
  int64_t view_d = static_cast<int64_t>(sizes.size()) - 1;
  int64_t chunk_base_stride = old_strides.empty() ? 1 : old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old_sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= old_sizes[d];
    if (d == 0 || (old_sizes[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || sizes[view_d] == 1)) {
        strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= sizes[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = old_strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return strides;
}

IntList infer_size(const IntList& sizes, int64_t numel, const char* op, const Tensor& x) {
  IntList out = sizes;
  int64_t known = 1, infer = -1;
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == -1) {
      TR_CHECK(infer < 0, ValueError, "{}: only one dimension can be -1, got shape {}", op, fmt::format("{}", sizes));
      infer = static_cast<int64_t>(d);
    } else {
      TR_CHECK(out[d] >= 0, ValueError, "{}: invalid size {} in shape {}", op, out[d], fmt::format("{}", sizes));
      known *= out[d];
    }
  }
  if (infer >= 0) {
    TR_CHECK(known != 0 && numel % known == 0, ValueError, "{}: shape {} is invalid for input of size {} (shape {})", op,
             fmt::format("{}", sizes), numel, x.shape_str());
    out[infer] = numel / known;
  } else {
    TR_CHECK(known == numel, ValueError, "{}: shape {} is invalid for input of size {} (shape {})", op,
             fmt::format("{}", sizes), numel, x.shape_str());
  }
  return out;
}

// ---- device-generic kernels of the primitive views ----

Tensor view_kernel(const Tensor& x, const IntList& sizes) {
  IntList shape = infer_size(sizes, x.numel(), "view", x);
  auto strides = view_strides(x.sizes(), x.strides(), shape);
  TR_CHECK(strides.has_value(), ValueError,
           "view: shape {} is not compatible with input shape {} and strides [{}]: at least one dimension spans "
           "across two contiguous subspaces; use reshape instead",
           fmt::format("{}", shape), x.shape_str(), fmt::join(x.strides(), ", "));
  return make_view(x, shape, *strides, x.storage_offset());
}

Tensor as_strided_kernel(const Tensor& x, const IntList& sizes, const IntList& strides, std::optional<int64_t> offset) {
  TR_CHECK(sizes.size() == strides.size(), ValueError, "as_strided: {} sizes but {} strides", sizes.size(), strides.size());
  int64_t off = offset.value_or(x.storage_offset());
  TR_CHECK(off >= 0, ValueError, "as_strided: negative storage offset {}", off);
  int64_t max_index = off;
  bool empty_view = false;
  for (size_t d = 0; d < sizes.size(); ++d) {
    TR_CHECK(sizes[d] >= 0, ValueError, "as_strided: negative size {} at dim {}", sizes[d], d);
    TR_CHECK(strides[d] >= 0, ValueError, "as_strided: negative stride {} at dim {}", strides[d], d);
    if (sizes[d] == 0) empty_view = true;
    max_index += (sizes[d] - 1) * strides[d];
  }
  int64_t capacity = static_cast<int64_t>(x.impl()->storage()->nbytes()) / x.element_size();
  TR_CHECK(empty_view || max_index < capacity, ValueError,
           "as_strided: sizes {} strides {} offset {} reach element {} but the storage holds {} elements",
           fmt::format("{}", sizes), fmt::format("{}", strides), off, max_index, capacity);
  return make_view(x, sizes, strides, off);
}

Tensor permute_kernel(const Tensor& x, const IntList& dims) {
  const int64_t n = x.dim();
  TR_CHECK(static_cast<int64_t>(dims.size()) == n, ValueError,
           "permute: number of dims in {} does not match the tensor's {} dims (shape {})", fmt::format("{}", dims), n,
           x.shape_str());
  IntList sizes(n), strides(n);
  std::vector<bool> seen(n, false);
  for (int64_t i = 0; i < n; ++i) {
    int64_t d = wrap_dim(dims[i], n, "permute");
    TR_CHECK(!seen[d], ValueError, "permute: dim {} repeated in {}", d, fmt::format("{}", dims));
    seen[d] = true;
    sizes[i] = x.sizes()[d];
    strides[i] = x.strides()[d];
  }
  return make_view(x, sizes, strides, x.storage_offset());
}

Tensor expand_kernel(const Tensor& x, const IntList& sizes) {
  const int64_t n = static_cast<int64_t>(sizes.size());
  TR_CHECK(n >= x.dim(), ValueError, "expand: the number of sizes ({}) must be at least the tensor's dims ({}), shape {}",
           n, x.dim(), x.shape_str());
  IntList out_sizes(n), out_strides(n);
  for (int64_t i = n - 1; i >= 0; --i) {
    int64_t xd = i - (n - x.dim());
    int64_t want = sizes[i];
    if (xd >= 0) {
      int64_t have = x.sizes()[xd];
      if (want == -1) want = have;
      TR_CHECK(have == want || have == 1, ValueError,
               "expand: the expanded size ({}) must match the existing size ({}) at non-singleton dim {}; target "
               "sizes {}, tensor shape {}", want, have, i, fmt::format("{}", sizes), x.shape_str());
      out_sizes[i] = want;
      out_strides[i] = have == want ? x.strides()[xd] : 0;
    } else {
      TR_CHECK(want >= 0, ValueError, "expand: -1 is not allowed in a new leading dim ({})", fmt::format("{}", sizes));
      out_sizes[i] = want;
      out_strides[i] = 0;
    }
  }
  return make_view(x, out_sizes, out_strides, x.storage_offset());
}

Tensor select_kernel(const Tensor& x, int64_t dim, int64_t index) {
  TR_CHECK(x.dim() > 0, IndexError, "select: cannot select from a 0-dim tensor");
  dim = wrap_dim(dim, x.dim(), "select");
  int64_t size = x.sizes()[dim];
  TR_CHECK(index >= -size && index < size, IndexError, "select: index {} is out of bounds for dim {} with size {}", index,
           dim, size);
  if (index < 0) index += size;
  IntList sizes = x.sizes(), strides = x.strides();
  int64_t offset = x.storage_offset() + index * strides[dim];
  sizes.erase(sizes.begin() + dim);
  strides.erase(strides.begin() + dim);
  return make_view(x, sizes, strides, offset);
}

Tensor slice_kernel(const Tensor& x, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step) {
  TR_CHECK(x.dim() > 0, IndexError, "slice: cannot slice a 0-dim tensor");
  TR_CHECK(step > 0, ValueError, "slice: step must be positive, got {}", step);
  dim = wrap_dim(dim, x.dim(), "slice");
  int64_t size = x.sizes()[dim];
  int64_t s = start.value_or(0), e = end.value_or(size);
  if (s < 0) s += size;
  if (e < 0) e += size;
  s = std::clamp<int64_t>(s, 0, size);
  e = std::clamp<int64_t>(e, s, size);
  IntList sizes = x.sizes(), strides = x.strides();
  int64_t offset = x.storage_offset() + s * strides[dim];
  sizes[dim] = (e - s + step - 1) / step;
  strides[dim] *= step;
  return make_view(x, sizes, strides, offset);
}

Tensor diagonal_kernel(const Tensor& x, int64_t offset, int64_t d1, int64_t d2) {
  d1 = wrap_dim(d1, x.dim(), "diagonal");
  d2 = wrap_dim(d2, x.dim(), "diagonal");
  TR_CHECK(d1 != d2, ValueError, "diagonal: dim1 and dim2 cannot be the same ({}), shape {}", d1, x.shape_str());
  int64_t storage_offset = x.storage_offset();
  int64_t len;
  if (offset >= 0) {
    len = std::max<int64_t>(std::min(x.sizes()[d1], x.sizes()[d2] - offset), 0);
    if (len > 0) storage_offset += offset * x.strides()[d2];
  } else {
    len = std::max<int64_t>(std::min(x.sizes()[d1] + offset, x.sizes()[d2]), 0);
    if (len > 0) storage_offset -= offset * x.strides()[d1];
  }
  IntList sizes, strides;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d == d1 || d == d2) continue;
    sizes.push_back(x.sizes()[d]);
    strides.push_back(x.strides()[d]);
  }
  sizes.push_back(len);
  strides.push_back(x.strides()[d1] + x.strides()[d2]);
  return make_view(x, sizes, strides, storage_offset);
}

Tensor squeeze_dim_kernel(const Tensor& x, int64_t dim) {
  dim = wrap_dim(dim, x.dim(), "squeeze");
  if (x.dim() == 0 || x.sizes()[dim] != 1) return make_view(x, x.sizes(), x.strides(), x.storage_offset());
  IntList sizes = x.sizes(), strides = x.strides();
  sizes.erase(sizes.begin() + dim);
  strides.erase(strides.begin() + dim);
  return make_view(x, sizes, strides, x.storage_offset());
}

Tensor unsqueeze_kernel(const Tensor& x, int64_t dim) {
  dim = wrap_dim(dim, x.dim() + 1, "unsqueeze");
  IntList sizes = x.sizes(), strides = x.strides();
  int64_t stride = dim < x.dim() ? x.sizes()[dim] * x.strides()[dim] : 1;
  sizes.insert(sizes.begin() + dim, 1);
  strides.insert(strides.begin() + dim, stride);
  return make_view(x, sizes, strides, x.storage_offset());
}

Tensor alias_kernel(const Tensor& x) { return make_view(x, x.sizes(), x.strides(), x.storage_offset()); }

OpKernel<ops::view> reg_view(&view_kernel);
OpKernel<ops::permute> reg_permute(&permute_kernel);
OpKernel<ops::expand> reg_expand(&expand_kernel);
OpKernel<ops::as_strided> reg_as_strided(&as_strided_kernel);
OpKernel<ops::select> reg_select(&select_kernel);
OpKernel<ops::slice> reg_slice(&slice_kernel);
OpKernel<ops::diagonal> reg_diagonal(&diagonal_kernel);
OpKernel<ops::squeeze_dim> reg_squeeze(&squeeze_dim_kernel);
OpKernel<ops::unsqueeze> reg_unsqueeze(&unsqueeze_kernel);
OpKernel<ops::alias> reg_alias(&alias_kernel);

}  // namespace

Tensor view(const Tensor& x, const IntList& sizes) { return ops::view::call(keys_of(x), x, sizes); }
Tensor permute(const Tensor& x, const IntList& dims) { return ops::permute::call(keys_of(x), x, dims); }
Tensor expand(const Tensor& x, const IntList& sizes) { return ops::expand::call(keys_of(x), x, sizes); }
Tensor as_strided(const Tensor& x, const IntList& sizes, const IntList& strides, std::optional<int64_t> offset) {
  return ops::as_strided::call(keys_of(x), x, sizes, strides, offset);
}
Tensor select(const Tensor& x, int64_t dim, int64_t index) { return ops::select::call(keys_of(x), x, dim, index); }
Tensor slice(const Tensor& x, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step) {
  return ops::slice::call(keys_of(x), x, dim, start, end, step);
}
Tensor diagonal(const Tensor& x, int64_t offset, int64_t d1, int64_t d2) {
  return ops::diagonal::call(keys_of(x), x, offset, d1, d2);
}
Tensor squeeze(const Tensor& x, int64_t dim) { return ops::squeeze_dim::call(keys_of(x), x, dim); }
Tensor unsqueeze(const Tensor& x, int64_t dim) { return ops::unsqueeze::call(keys_of(x), x, dim); }
Tensor alias(const Tensor& x) { return ops::alias::call(keys_of(x), x); }

// ---- composite views ----

Tensor reshape(const Tensor& x, const IntList& sizes) {
  IntList shape = infer_size(sizes, x.numel(), "reshape", x);
  if (view_strides(x.sizes(), x.strides(), shape)) return view(x, shape);
  return view(clone(x), shape);
}

Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) {
  if (x.dim() == 0) return alias(x);
  IntList dims(x.dim());
  for (int64_t i = 0; i < x.dim(); ++i) dims[i] = i;
  std::swap(dims[wrap_dim(d0, x.dim(), "transpose")], dims[wrap_dim(d1, x.dim(), "transpose")]);
  return permute(x, dims);
}

Tensor t(const Tensor& x) {
  TR_CHECK(x.dim() <= 2, ValueError, "t: expects a tensor with <= 2 dims, got shape {} (use transpose)", x.shape_str());
  return x.dim() < 2 ? alias(x) : transpose(x, 0, 1);
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  TR_CHECK(x.dim() > 0, IndexError, "narrow: cannot narrow a 0-dim tensor");
  int64_t size = x.size(dim);
  if (start < 0) start += size;
  TR_CHECK(start >= 0 && length >= 0 && start + length <= size, IndexError,
           "narrow: start ({}) + length ({}) exceeds dimension size ({}) of dim {}, shape {}", start, length, size, dim,
           x.shape_str());
  return slice(x, dim, start, start + length, 1);
}

Tensor expand_as(const Tensor& x, const Tensor& other) { return expand(x, other.sizes()); }

Tensor squeeze(const Tensor& x) {
  IntList sizes, strides;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (x.sizes()[d] == 1) continue;
    sizes.push_back(x.sizes()[d]);
    strides.push_back(x.strides()[d]);
  }
  return as_strided(x, sizes, strides, x.storage_offset());
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  if (x.dim() == 0) return reshape(x, {1});
  start_dim = wrap_dim(start_dim, x.dim(), "flatten");
  end_dim = wrap_dim(end_dim, x.dim(), "flatten");
  TR_CHECK(start_dim <= end_dim, ValueError, "flatten: start_dim ({}) cannot come after end_dim ({})", start_dim, end_dim);
  IntList shape(x.sizes().begin(), x.sizes().begin() + start_dim);
  int64_t flat = 1;
  for (int64_t d = start_dim; d <= end_dim; ++d) flat *= x.sizes()[d];
  shape.push_back(flat);
  shape.insert(shape.end(), x.sizes().begin() + end_dim + 1, x.sizes().end());
  return reshape(x, shape);
}

Tensor unflatten(const Tensor& x, int64_t dim, const IntList& sizes) {
  dim = wrap_dim(dim, x.dim(), "unflatten");
  TR_CHECK(!sizes.empty(), ValueError, "unflatten: sizes must be non-empty");
  IntList inner = infer_size(sizes, x.sizes()[dim], "unflatten", x);
  IntList shape(x.sizes().begin(), x.sizes().begin() + dim);
  shape.insert(shape.end(), inner.begin(), inner.end());
  shape.insert(shape.end(), x.sizes().begin() + dim + 1, x.sizes().end());
  return view(x, shape);
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  TR_CHECK(x.dim() > 0, ValueError, "split: expects at least a 1-dim tensor");
  TR_CHECK(split_size > 0 || (split_size == 0 && x.size(dim) == 0), ValueError,
           "split: split_size must be positive, got {}", split_size);
  int64_t size = x.size(dim);
  std::vector<Tensor> out;
  if (size == 0) return {alias(x)};
  for (int64_t s = 0; s < size; s += split_size) out.push_back(narrow(x, dim, s, std::min(split_size, size - s)));
  return out;
}

std::vector<Tensor> split_with_sizes(const Tensor& x, const IntList& sizes, int64_t dim) {
  int64_t total = 0;
  for (int64_t s : sizes) {
    TR_CHECK(s >= 0, ValueError, "split_with_sizes: negative size {} in {}", s, fmt::format("{}", sizes));
    total += s;
  }
  TR_CHECK(total == x.size(dim), ValueError, "split_with_sizes: sizes {} sum to {} but dim {} has size {}",
           fmt::format("{}", sizes), total, dim, x.size(dim));
  std::vector<Tensor> out;
  int64_t start = 0;
  for (int64_t s : sizes) { out.push_back(narrow(x, dim, start, s)); start += s; }
  return out;
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  TR_CHECK(chunks > 0, ValueError, "chunk: expects a positive number of chunks, got {}", chunks);
  int64_t size = x.size(dim);
  return split(x, std::max<int64_t>((size + chunks - 1) / chunks, size == 0 ? 0 : 1), dim);
}

std::vector<Tensor> unbind(const Tensor& x, int64_t dim) {
  std::vector<Tensor> out;
  for (int64_t i = 0; i < x.size(dim); ++i) out.push_back(select(x, dim, i));
  return out;
}

IntList broadcast_shapes(const IntList& a, const IntList& b, const char* op) {
  if (a == b) return a;
  size_t n = std::max(a.size(), b.size());
  IntList out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    TR_CHECK(da == db || da == 1 || db == 1, ValueError,
             "{}: shapes [{}] and [{}] cannot be broadcast: size {} vs {} at dim {}", op, fmt::join(a, ", "),
             fmt::join(b, ", "), da, db, i);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace trainrun
