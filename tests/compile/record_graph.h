#pragma once
// Records fn(inputs) without grad into a graph (what the fusion suites fuse); the test fails if the recording
// broke.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "autograd/grad_mode.h"
#include "compile/captured_graph.h"
#include "compile/graph_capture.h"

namespace trainrun::compile {

template <typename F>
std::shared_ptr<CapturedGraph> record(const std::vector<Tensor>& inputs, F fn) {
  NoGradGuard no_grad;
  auto graph = std::make_shared<CapturedGraph>();
  GraphCapture capture(*graph, inputs);
  std::vector<Tensor> out = fn(inputs);
  capture.finish(out);
  EXPECT_FALSE(capture.broken()) << capture.break_reason();
  return graph;
}

}  // namespace trainrun::compile
