// ProcessGroupGloo's point-to-point half: sends and receives are posted on
// Gloo's unbound buffers at once (so pairs issued in any order cannot
// deadlock) and completed in posting order, receives and sends each on a
// thread of their own.
#include <gloo/common/error.h>
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include "c10d/gloo/process_group_gloo.h"
#include "c10d/gloo/tensor_buffers.h"
#include "tensor/dispatcher.h"

namespace trainrun {
namespace c10d {
namespace {

// Slot prefix of point-to-point messages (Gloo's collectives use 0x01-0x08).
constexpr uint8_t kP2PSlotPrefix = 0x40;

}  // namespace

struct ProcessGroupGloo::PendingP2P {
  std::shared_ptr<Work> work;
  Tensor tensor, buffer;
  std::unique_ptr<gloo::transport::UnboundBuffer> gloo_buffer;
  bool is_send;
};

void ProcessGroupGloo::abort_pending_p2p() {
  {
    std::lock_guard<std::mutex> lock(p2p_mu_);
    for (auto& queue : p2p_queue_)
      for (auto& p : queue) {
        if (p->is_send)
          p->gloo_buffer->abortWaitSend();
        else
          p->gloo_buffer->abortWaitRecv();
      }
  }
  for (auto& cv : p2p_cv_) cv.notify_all();
}

std::shared_ptr<Work> ProcessGroupGloo::post_p2p(const char* op, Tensor tensor, std::vector<int> peers, int tag,
                                                 bool is_send) {
  TR_CHECK(tag >= 0, ValueError, "{} on group '{}': tag must be >= 0, got {}", op, name_, tag);
  auto p = std::make_shared<PendingP2P>();
  p->is_send = is_send;
  p->tensor = tensor;
  // Sends copy non-contiguous tensors now; receives land in a buffer copied back on completion.
  p->buffer = contiguous_buffer(tensor);
  p->gloo_buffer = context_->createUnboundBuffer(bytes_of(p->buffer), static_cast<size_t>(p->buffer.nbytes()));
  const uint64_t slot = gloo::Slot::build(kP2PSlotPrefix, static_cast<uint32_t>(tag));
  std::string peer_text = peers.size() == 1 ? std::to_string(peers[0]) : "any rank";
  p->work = std::make_shared<Work>(fmt::format("{} {} rank {} (tag {}) on group '{}' (rank {} of {})", op,
                                               is_send ? "to" : "from", peer_text, tag, name_, rank_, size_));
  if (is_send)
    p->gloo_buffer->send(peers[0], slot);
  else if (peers.size() == 1)
    p->gloo_buffer->recv(peers[0], slot);
  else
    p->gloo_buffer->recv(peers, slot);
  p->work->mark_started();  // posted: the transfer proceeds as soon as the peer posts its side
  {
    std::lock_guard<std::mutex> lock(p2p_mu_);
    p2p_queue_[is_send].push_back(p);
  }
  p2p_cv_[is_send].notify_one();
  return p->work;
}

void ProcessGroupGloo::p2p_loop(bool sends) {
  ExcludeDispatchKeyGuard no_autograd(DispatchKey::Autograd);
  auto& queue = p2p_queue_[sends];
  for (;;) {
    std::shared_ptr<PendingP2P> p;
    {
      std::unique_lock<std::mutex> lock(p2p_mu_);
      p2p_cv_[sends].wait(lock, [&] { return stopping_ || !queue.empty(); });
      if (queue.empty()) return;
      p = queue.front();
    }
    try {
      int peer = -1;
      const bool ok =
          p->is_send ? p->gloo_buffer->waitSend(&peer, timeout_) : p->gloo_buffer->waitRecv(&peer, timeout_);
      if (!ok) throw DistBackendError(fmt::format("{}: aborted (the group was destroyed)", p->work->description()));
      if (!p->is_send) {
        copy_back(p->tensor, p->buffer);
        p->work->set_source_rank(peer);
      }
      p->work->finish();
    } catch (const trainrun::Error& e) {
      p->work->finish(std::current_exception());
    } catch (const std::exception& e) {
      p->work->finish(std::make_exception_ptr(
          DistBackendError(fmt::format("{}: {} (the peer exited, or sent nothing within the group timeout of {} ms)",
                                       p->work->description(), e.what(), timeout_.count()))));
    }
    std::lock_guard<std::mutex> lock(p2p_mu_);
    queue.pop_front();
  }
}

std::shared_ptr<Work> ProcessGroupGloo::send(const Tensor& tensor, int dst, int tag) {
  check_cpu(tensor, "send", name_, "tensor");
  check_rank(dst, "send", "destination");
  TR_CHECK(dst != rank_, ValueError, "send on group '{}': rank {} cannot send to itself", name_, rank_);
  return post_p2p("send", tensor, {dst}, tag, true);
}

std::shared_ptr<Work> ProcessGroupGloo::recv(Tensor& tensor, int src, int tag) {
  check_cpu(tensor, "recv", name_, "tensor");
  check_rank(src, "recv", "source");
  TR_CHECK(src != rank_, ValueError, "recv on group '{}': rank {} cannot receive from itself", name_, rank_);
  return post_p2p("recv", tensor, {src}, tag, false);
}

std::shared_ptr<Work> ProcessGroupGloo::recv_anysource(Tensor& tensor, int tag) {
  check_cpu(tensor, "recv", name_, "tensor");
  std::vector<int> peers;
  for (int r = 0; r < size_; ++r)
    if (r != rank_) peers.push_back(r);
  return post_p2p("recv", tensor, peers, tag, false);
}

}  // namespace c10d
}  // namespace trainrun
