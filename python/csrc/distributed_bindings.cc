// torch.distributed's API: the default group, collectives (blocking, or
// async_op=True returning a Work), ReduceOp, and DistributedDataParallel.
// Every blocking call releases the GIL.
#include <pybind11/stl.h>

#include "c10d/ddp/distributed_data_parallel.h"
#include "c10d/distributed.h"
#include "c10d/flight_recorder.h"
#include "launcher/error_file.h"
#include "python/csrc/bindings.h"
#include "tensor/views.h"
#include "store/file_store.h"
#include "store/hash_store.h"
#include "store/prefix_store.h"
#include "store/tcp_store.h"

namespace trainrun {
namespace python {
namespace {

using c10d::ProcessGroup;
using c10d::ReduceOp;
using c10d::Work;
using WorkPtr = std::shared_ptr<Work>;
using GroupPtr = std::shared_ptr<ProcessGroup>;

GroupPtr group_or_default(GroupPtr g) { return g ? g : c10d::default_group(); }

// async_op: the Work; else wait (GIL released) and return None.
py::object finish(WorkPtr w, bool async_op) {
  if (async_op) return py::cast(w);
  {
    py::gil_scoped_release nogil;
    w->wait();
  }
  return py::none();
}

// A DDP bucket's reduction by a Python communication hook: the Future the hook returned. wait() waits for it
// (with the GIL) and leaves its value, the reduced bucket, in the bucket.
class PythonHookWork final : public Work {
 public:
  PythonHookWork(std::shared_ptr<py::object> future, Tensor bucket)
      : Work("DDP communication hook (Python)"), future_(std::move(future)), bucket_(std::move(bucket)) {}

  void wait(std::optional<std::chrono::milliseconds> timeout) override {
    if (!is_completed()) {
      std::exception_ptr error;
      try {
        py::gil_scoped_acquire gil;
        py::object value = future_->attr("wait")();
        if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) value = value[py::int_(0)];
        TR_CHECK(py::isinstance<Tensor>(value), TypeError,
                 "DDP communication hook: the future's value must be the reduced bucket tensor (or a list "
                 "holding it), got {}", py::str(py::type::of(value).attr("__name__")).cast<std::string>());
        Tensor reduced = value.cast<Tensor>();
        TR_CHECK(reduced.numel() == bucket_.numel(), ValueError,
                 "DDP communication hook: the future's tensor has {} elements, the bucket {}", reduced.numel(),
                 bucket_.numel());
        if (!reduced.is_same(bucket_)) copy_(bucket_, reduced.reshape(bucket_.sizes()));
      } catch (py::error_already_set& e) {
        error = std::make_exception_ptr(Error(std::string("DDP communication hook: ") + e.what()));
      } catch (...) {
        error = std::current_exception();
      }
      finish(error);
    }
    Work::wait(timeout);
  }

 private:
  std::shared_ptr<py::object> future_;
  Tensor bucket_;
};

}  // namespace

void bind_distributed(py::module_& m) {
  py::module_ d = m.def_submodule("distributed", "process groups and collectives");
  py::enum_<ReduceOp::Kind>(d, "ReduceOp")
      .value("SUM", ReduceOp::SUM)
      .value("AVG", ReduceOp::AVG)
      .value("PRODUCT", ReduceOp::PRODUCT)
      .value("MIN", ReduceOp::MIN)
      .value("MAX", ReduceOp::MAX)
      .value("BAND", ReduceOp::BAND)
      .value("BOR", ReduceOp::BOR)
      .value("BXOR", ReduceOp::BXOR);
  py::class_<Work, WorkPtr>(d, "Work", py::dynamic_attr())  // (Python keeps what the work writes: get_future)
      .def(
          "wait",
          [](Work& w, py::object timeout) {  // (a timedelta, as PyTorch's, or seconds)
            std::optional<std::chrono::milliseconds> limit;
            if (!timeout.is_none()) {
              const double s = py::hasattr(timeout, "total_seconds") ? timeout.attr("total_seconds")().cast<double>()
                                                                     : timeout.cast<double>();
              limit = std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
            }
            py::gil_scoped_release nogil;
            if (limit)
              w.wait(*limit);
            else
              w.wait();
            return true;
          },
          py::arg("timeout") = py::none())
      .def("is_completed", &Work::is_completed)
      .def("is_success", &Work::is_success)
      .def("source_rank", &Work::source_rank);
  // Stores: values are bytes (str is encoded as UTF-8), waits release the GIL. A timeout is a
  // datetime.timedelta, as PyTorch's, or a number of seconds.
  auto seconds = [](py::handle t) {
    const double s = py::hasattr(t, "total_seconds") ? t.attr("total_seconds")().cast<double>() : t.cast<double>();
    TR_CHECK(s >= 0, ValueError, "store timeout must not be negative, got {} s", s);
    return std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
  };
  auto as_bytes = [](py::handle v) {
    std::string s = py::isinstance<py::str>(v) ? v.cast<std::string>() : std::string(v.cast<py::bytes>());
    return Bytes(s.begin(), s.end());
  };
  auto to_py = [](const Bytes& b) { return py::bytes(reinterpret_cast<const char*>(b.data()), b.size()); };
  py::class_<Store, std::shared_ptr<Store>>(d, "Store")
      .def("set",
           [as_bytes](Store& st, const std::string& k, py::object v) {
             Bytes b = as_bytes(v);
             py::gil_scoped_release nogil;
             st.set(k, b);
           })
      .def("get",
           [](Store& st, const std::string& k) {
             Bytes b;
             {
               py::gil_scoped_release nogil;
               b = st.get(k);
             }
             return py::bytes(reinterpret_cast<const char*>(b.data()), b.size());
           })
      .def("add",
           [](Store& st, const std::string& k, int64_t v) {
             py::gil_scoped_release nogil;
             return st.add(k, v);
           })
      .def("check",
           [](Store& st, const std::vector<std::string>& keys) {
             py::gil_scoped_release nogil;
             return st.check(keys);
           })
      .def(
          "wait",
          [seconds](Store& st, const std::vector<std::string>& keys, py::object timeout) {
            std::optional<std::chrono::milliseconds> limit;
            if (!timeout.is_none()) limit = seconds(timeout);
            py::gil_scoped_release nogil;
            if (limit)
              st.wait(keys, *limit);
            else
              st.wait(keys);
          },
          py::arg("keys"), py::arg("timeout") = py::none())
      .def(
          "compare_set",
          [as_bytes, to_py](Store& st, const std::string& k, py::object expected, py::object desired) {
            Bytes e = as_bytes(expected), v = as_bytes(desired), out;
            {
              py::gil_scoped_release nogil;
              out = st.compare_set(k, e, v);
            }
            return to_py(out);
          },
          py::arg("key"), py::arg("expected_value"), py::arg("desired_value"))
      .def(
          "append",
          [as_bytes](Store& st, const std::string& k, py::object v) {
            Bytes b = as_bytes(v);
            py::gil_scoped_release nogil;
            st.append(k, b);
          },
          py::arg("key"), py::arg("value"))
      .def(
          "multi_get",
          [to_py](Store& st, const std::vector<std::string>& keys) {
            std::vector<Bytes> values;
            {
              py::gil_scoped_release nogil;
              values = st.multi_get(keys);
            }
            py::list out;
            for (const Bytes& b : values) out.append(to_py(b));
            return out;
          },
          py::arg("keys"))
      .def(
          "multi_set",
          [as_bytes](Store& st, const std::vector<std::string>& keys, py::list values) {
            TR_CHECK(keys.size() == values.size(), ValueError, "multi_set: {} keys but {} values", keys.size(),
                     values.size());
            std::vector<Bytes> bytes;
            for (py::handle v : values) bytes.push_back(as_bytes(v));
            py::gil_scoped_release nogil;
            st.multi_set(keys, bytes);
          },
          py::arg("keys"), py::arg("values"))
      .def("set_timeout", [seconds](Store& st, py::object timeout) { st.set_timeout(seconds(timeout)); },
           py::arg("timeout"))
      .def_property_readonly("timeout",
                             [](const Store& st) {
                               return py::module_::import("datetime").attr("timedelta")(
                                   py::arg("milliseconds") = st.timeout().count());
                             })
      .def("delete_key", &Store::delete_key, py::call_guard<py::gil_scoped_release>())
      .def("num_keys", &Store::num_keys, py::call_guard<py::gil_scoped_release>());
  py::class_<HashStore, Store, std::shared_ptr<HashStore>>(d, "HashStore").def(py::init<>());
  py::class_<FileStore, Store, std::shared_ptr<FileStore>>(d, "FileStore")
      .def(py::init([seconds](const std::string& path, py::object world_size, py::object timeout) {
             // (world_size: PyTorch's FileStore counts its users to delete the file; here the file stays)
             return std::make_shared<FileStore>(path, seconds(timeout));
           }),
           py::arg("file_name"), py::arg("world_size") = -1, py::arg("timeout") = 300.0);
  py::class_<PrefixStore, Store, std::shared_ptr<PrefixStore>>(d, "PrefixStore")
      .def(py::init<std::string, std::shared_ptr<Store>>(), py::arg("prefix"), py::arg("store"));
  py::class_<TCPStore, Store, std::shared_ptr<TCPStore>>(d, "TCPStore")
      .def(py::init([seconds](const std::string& host, int port, std::optional<int> world_size, bool is_master,
                              py::object timeout, bool wait_for_workers, bool multi_tenant,
                              std::optional<int> master_listen_fd, bool use_libuv) {
             TCPStoreOptions o;
             o.master_listen_fd = master_listen_fd;
             o.use_libuv = use_libuv;
             o.is_master = is_master;
             if (world_size) o.num_workers = *world_size;
             o.timeout = seconds(timeout);
             o.wait_for_workers = wait_for_workers;
             (void)multi_tenant;  // (each TCPStore here has its own server or connection: nothing to share)
             py::gil_scoped_release nogil;
             return std::make_shared<TCPStore>(host, static_cast<uint16_t>(port), o);
           }),
           py::arg("host_name"), py::arg("port"), py::arg("world_size") = py::none(), py::arg("is_master") = false,
           py::arg("timeout") = 300.0, py::arg("wait_for_workers") = true, py::arg("multi_tenant") = false,
           py::arg("master_listen_fd") = py::none(), py::arg("use_libuv") = true)
      .def_property_readonly("libuvBackend", &TCPStore::use_libuv)
      .def_property_readonly("port", &TCPStore::port)
      .def_property_readonly("host", &TCPStore::host);

  py::class_<ProcessGroup, GroupPtr>(d, "ProcessGroup")
      .def("rank", &ProcessGroup::rank)
      .def("size", &ProcessGroup::size)
      .def("global_ranks", &ProcessGroup::global_ranks)
      .def("timeout_seconds", [](const ProcessGroup& g) { return g.timeout().count() / 1000.0; })
      .def_property_readonly("name", &ProcessGroup::name);

  d.def(
      "init_process_group",
      [](const std::string& backend, const std::string& init_method, int rank, int world, double timeout,
         std::shared_ptr<Store> store) {
        c10d::InitOptions o;
        o.store = std::move(store);
        o.backend = backend;
        o.init_method = init_method;
        o.rank = rank;
        o.world_size = world;
        o.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout * 1000));
        py::gil_scoped_release nogil;
        c10d::init_process_group(o);
      },
      py::arg("backend") = "gloo", py::arg("init_method") = "env://", py::arg("rank") = -1, py::arg("world_size") = -1,
      py::arg("timeout") = 1800.0, py::arg("store") = nullptr);
  d.def("is_initialized", &c10d::is_initialized);
  // The default group itself (None before init_process_group): dist.group.WORLD.
  d.def("_default_group", []() -> GroupPtr { return c10d::is_initialized() ? c10d::default_group() : nullptr; });
  // The store the default group rendezvoused through (None before init_process_group): distributed_c10d's
  // _get_default_store(), which scripts use as a key-value store shared by the ranks.
  d.def("_default_store",
        []() -> std::shared_ptr<Store> { return c10d::is_initialized() ? c10d::default_store() : nullptr; });
  d.def("available_backends", &c10d::available_backends);
  d.def("get_rank", &c10d::get_rank);
  d.def("get_world_size", &c10d::get_world_size);
  // The flight recorder's record of this process (c10d/flight_recorder.h), as JSON text.
  d.def(
      "_flight_record_json", [](const std::string& reason) { return c10d::FlightRecorder::global().dump_json(reason); },
      py::arg("reason") = "asked for", py::call_guard<py::gil_scoped_release>());
  d.def(
      "destroy_process_group",
      [](GroupPtr g) {
        py::gil_scoped_release nogil;
        c10d::destroy_process_group(g);
      },
      py::arg("group") = nullptr);
  d.def(
      "new_group",
      [](std::vector<int> ranks, std::optional<double> timeout) {
        std::optional<Milliseconds> t;
        if (timeout) t = Milliseconds(static_cast<int64_t>(*timeout * 1000));
        py::gil_scoped_release nogil;
        return c10d::new_group(ranks, t);
      },
      py::arg("ranks") = std::vector<int>{}, py::arg("timeout") = py::none());
  d.def(
      "all_reduce",
      [](Tensor& t, ReduceOp::Kind op, GroupPtr g, bool async_op) {
        return finish(group_or_default(g)->allreduce(t, ReduceOp(op)), async_op);
      },
      py::arg("tensor"), py::arg("op") = ReduceOp::SUM, py::arg("group") = nullptr, py::arg("async_op") = false);
  d.def(
      "broadcast",
      [](Tensor& t, int src, GroupPtr g, bool async_op) {
        return finish(group_or_default(g)->broadcast(t, src), async_op);
      },
      py::arg("tensor"), py::arg("src"), py::arg("group") = nullptr, py::arg("async_op") = false);
  d.def(
      "all_gather_into_tensor",
      [](Tensor& out, const Tensor& in, GroupPtr g, bool async_op) {
        return finish(group_or_default(g)->all_gather_into_tensor(out, in), async_op);
      },
      py::arg("output_tensor"), py::arg("input_tensor"), py::arg("group") = nullptr, py::arg("async_op") = false);
  d.def(
      "all_gather_into_tensor_coalesced",
      [](std::vector<Tensor> outs, std::vector<Tensor> ins, GroupPtr g, bool async_op) {
        return finish(group_or_default(g)->allgather_into_tensor_coalesced(outs, ins), async_op);
      },
      py::arg("output_tensors"), py::arg("input_tensors"), py::arg("group") = nullptr, py::arg("async_op") = false,
      "Several all_gather_into_tensor as one collective (outputs[i] gathers inputs[i]).");
  d.def(
      "reduce_scatter_tensor_coalesced",
      [](std::vector<Tensor> outs, std::vector<Tensor> ins, ReduceOp::Kind op, GroupPtr g, bool async_op) {
        return finish(group_or_default(g)->reduce_scatter_tensor_coalesced(outs, ins, ReduceOp(op)), async_op);
      },
      py::arg("output_tensors"), py::arg("input_tensors"), py::arg("op") = ReduceOp::SUM, py::arg("group") = nullptr,
      py::arg("async_op") = false, "Several reduce_scatter_tensor as one collective.");
  d.def(
      "reduce_scatter_tensor",
      [](Tensor& out, const Tensor& in, ReduceOp::Kind op, GroupPtr g, bool async_op) {
        return finish(group_or_default(g)->reduce_scatter_tensor(out, in, ReduceOp(op)), async_op);
      },
      py::arg("output"), py::arg("input"), py::arg("op") = ReduceOp::SUM, py::arg("group") = nullptr,
      py::arg("async_op") = false);
  d.def(
      "barrier", [](GroupPtr g, bool async_op) { return finish(group_or_default(g)->barrier(), async_op); },
      py::arg("group") = nullptr, py::arg("async_op") = false);
  d.def(
      "send",
      [](const Tensor& t, int dst, GroupPtr g, int tag) { finish(group_or_default(g)->send(t, dst, tag), false); },
      py::arg("tensor"), py::arg("dst"), py::arg("group") = nullptr, py::arg("tag") = 0);
  // recv(tensor) without src takes the first message any rank sends; both forms return the sender's rank in the
  // group (PyTorch's: the global rank; the Python wrapper maps it).
  d.def(
      "recv",
      [](Tensor& t, std::optional<int> src, GroupPtr g, int tag) {
        GroupPtr group = group_or_default(g);
        if (!src) {
          auto work = group->recv_anysource(t, tag);
          finish(work, false);
          return work->source_rank();
        }
        finish(group->recv(t, *src, tag), false);
        return *src;
      },
      py::arg("tensor"), py::arg("src") = py::none(), py::arg("group") = nullptr, py::arg("tag") = 0);
  d.def(
      "reduce",
      [](Tensor& t, int dst, ReduceOp::Kind op, GroupPtr g, bool async_op) {
        return finish(group_or_default(g)->reduce(t, dst, ReduceOp(op)), async_op);
      },
      py::arg("tensor"), py::arg("dst"), py::arg("op") = ReduceOp::SUM, py::arg("group") = nullptr,
      py::arg("async_op") = false);
  // The list arguments hold tensor handles: results land in the caller's tensors.
  d.def(
      "all_gather",
      [](std::vector<Tensor> outputs, const Tensor& input, GroupPtr g, bool async_op) {
        return finish(group_or_default(g)->allgather(outputs, input), async_op);
      },
      py::arg("tensor_list"), py::arg("tensor"), py::arg("group") = nullptr, py::arg("async_op") = false);
  d.def(
      "reduce_scatter",
      [](Tensor& output, std::vector<Tensor> inputs, ReduceOp::Kind op, GroupPtr g, bool async_op) {
        return finish(group_or_default(g)->reduce_scatter(output, inputs, ReduceOp(op)), async_op);
      },
      py::arg("output"), py::arg("input_list"), py::arg("op") = ReduceOp::SUM, py::arg("group") = nullptr,
      py::arg("async_op") = false);
  d.def(
      "all_to_all_single",
      [](Tensor& output, const Tensor& input, std::optional<IntList> output_split_sizes,
         std::optional<IntList> input_split_sizes, GroupPtr g, bool async_op) {
        return finish(group_or_default(g)->alltoall_base(output, input, output_split_sizes.value_or(IntList{}),
                                                         input_split_sizes.value_or(IntList{})),
                      async_op);
      },
      py::arg("output"), py::arg("input"), py::arg("output_split_sizes") = py::none(),
      py::arg("input_split_sizes") = py::none(), py::arg("group") = nullptr, py::arg("async_op") = false);
  d.def(
      "all_to_all",
      [](std::vector<Tensor> outputs, std::vector<Tensor> inputs, GroupPtr g, bool async_op) {
        return finish(group_or_default(g)->alltoall(outputs, inputs), async_op);
      },
      py::arg("output_tensor_list"), py::arg("input_tensor_list"), py::arg("group") = nullptr,
      py::arg("async_op") = false);
  d.def(
      "gather",
      [](const Tensor& t, std::optional<std::vector<Tensor>> gather_list, int dst, GroupPtr g, bool async_op) {
        std::vector<Tensor> outputs = gather_list.value_or(std::vector<Tensor>{});
        return finish(group_or_default(g)->gather(outputs, t, dst), async_op);
      },
      py::arg("tensor"), py::arg("gather_list") = py::none(), py::arg("dst") = 0, py::arg("group") = nullptr,
      py::arg("async_op") = false);
  d.def(
      "scatter",
      [](Tensor& t, std::optional<std::vector<Tensor>> scatter_list, int src, GroupPtr g, bool async_op) {
        std::vector<Tensor> inputs = scatter_list.value_or(std::vector<Tensor>{});
        return finish(group_or_default(g)->scatter(t, inputs, src), async_op);
      },
      py::arg("tensor"), py::arg("scatter_list") = py::none(), py::arg("src") = 0, py::arg("group") = nullptr,
      py::arg("async_op") = false);
  d.def(
      "isend", [](const Tensor& t, int dst, GroupPtr g, int tag) { return group_or_default(g)->send(t, dst, tag); },
      py::arg("tensor"), py::arg("dst"), py::arg("group") = nullptr, py::arg("tag") = 0);
  d.def(
      "irecv",
      [](Tensor& t, std::optional<int> src, GroupPtr g, int tag) {
        GroupPtr group = group_or_default(g);
        return src ? group->recv(t, *src, tag) : group->recv_anysource(t, tag);
      },
      py::arg("tensor"), py::arg("src"), py::arg("group") = nullptr, py::arg("tag") = 0);
  // batch_isend_irecv's C++ half: (is_send, tensor, peer, tag) per op, all posted before any waits.
  d.def(
      "_batch_isend_irecv",
      [](const std::vector<std::tuple<bool, Tensor, int, int>>& ops, GroupPtr g) {
        std::vector<c10d::P2POp> posted;
        for (const auto& [is_send, tensor, peer, tag] : ops)
          posted.push_back({is_send ? c10d::P2POp::SEND : c10d::P2POp::RECV, tensor, peer, tag});
        return group_or_default(g)->batch_isend_irecv(posted);
      },
      py::arg("ops"), py::arg("group") = nullptr);
  d.def(
      "record_error",
      [](const std::string& message, const std::string& traceback) { record_worker_error(message, traceback); },
      "Writes the error file the launcher reads (TRAINRUN_ERROR_FILE).");

  py::class_<c10d::DistributedDataParallel, nn::Module, std::shared_ptr<c10d::DistributedDataParallel>>(
      d, "DistributedDataParallel")
      .def(py::init([](std::shared_ptr<nn::Module> module, GroupPtr g, double bucket_cap_mb,
                       bool find_unused_parameters, bool gradient_as_bucket_view, bool broadcast_buffers) {
             c10d::DDPOptions o;
             o.bucket_cap_mb = bucket_cap_mb;
             o.find_unused_parameters = find_unused_parameters;
             o.gradient_as_bucket_view = gradient_as_bucket_view;
             o.broadcast_buffers = broadcast_buffers;
             py::gil_scoped_release nogil;
             return std::make_shared<c10d::DistributedDataParallel>(std::move(module), std::move(g), o);
           }),
           py::arg("module"), py::arg("process_group") = nullptr, py::arg("bucket_cap_mb") = 25.0,
           py::arg("find_unused_parameters") = false, py::arg("gradient_as_bucket_view") = false,
           py::arg("broadcast_buffers") = true)
      .def("_set_sync", [](c10d::DistributedDataParallel& ddp, bool on) { ddp.reducer().set_sync(on); })
      // Per bucket, in launch order: the indices of its parameters among those that require grad.
      .def("_bucket_indices", [](c10d::DistributedDataParallel& ddp) { return ddp.reducer().bucket_indices(); })
      .def("_sync", [](c10d::DistributedDataParallel& ddp) { return ddp.reducer().sync(); })
      // hook(bucket_tensor) -> a Future of the reduced bucket (trainrun.nn.parallel wraps the user's hook).
      .def("_register_python_comm_hook",
           [](c10d::DistributedDataParallel& ddp, py::function hook_fn) {
             auto hook = hold_python_callable(std::move(hook_fn));
             ddp.register_comm_hook([hook](ProcessGroup&, Tensor& bucket) -> std::shared_ptr<Work> {
               py::gil_scoped_acquire gil;
               auto future = std::shared_ptr<py::object>(new py::object((*hook)(bucket)), [](py::object* p) {
                 py::gil_scoped_acquire held;
                 delete p;
               });
               return std::make_shared<PythonHookWork>(std::move(future), bucket);
             });
           })
      .def("register_comm_hook", [](c10d::DistributedDataParallel& ddp, const std::string& name) {
        if (name == "fp16_compress")
          ddp.register_comm_hook(c10d::fp16_compress_hook());
        else if (name == "bf16_compress")
          ddp.register_comm_hook(c10d::bf16_compress_hook());
        else
          throw ValueError("register_comm_hook: built-in hooks are 'fp16_compress' and 'bf16_compress'");
      });
}

}  // namespace python
}  // namespace trainrun
