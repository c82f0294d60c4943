// Test helpers: build a one-node graph in code and run it on the CPU executor; random tensors; comparisons.
#pragma once
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "executor/device.h"
#include "graph/graph.h"
#include "graph/tensor.h"

namespace ot::test {

// Runs one node `op_type` (opset `opset` of domain "", or version 1 of a non-empty `domain`) on `inputs` (on `device`,
// null = the CPU) (an empty Tensor = omitted optional input) with `attrs`; returns its `num_outputs` outputs. Each
// input is a graph input unless listed in `constant_inputs`, which become initializers (values known at plan time).
std::vector<Tensor> RunOp(const std::string& op_type, const std::vector<Tensor>& inputs,
                          const std::map<std::string, Attribute>& attrs = {}, int num_outputs = 1, int opset = 17,
                          const std::vector<int>& constant_inputs = {}, std::shared_ptr<DeviceBackend> device = nullptr,
                          const std::string& domain = "");

// Fresh random tensors (seeded from the test name and a counter, so reruns repeat but inputs differ).
Tensor RandomTensor(DataType t, const std::vector<int64_t>& dims, double lo = -1.0, double hi = 1.0);
// Largest |a-b| / (atol + rtol*|b|) over elements; shapes and dtypes must match (asserted).
void ExpectClose(const Tensor& actual, const Tensor& expected, double rtol = 1e-5, double atol = 1e-6);
// Parameters after Adam steps on two backends: Adam divides each gradient element by its own running RMS, so an
// element whose gradient sat at the level of rounding noise in some step moves by up to lr in a direction that
// noise decides. Holds every element within `noise_bound` (about lr x steps), at most one element in 1,000 (and at
// least one) outside (rtol, atol), and the whole tensor within rtol in norm: ||actual - expected|| / ||expected||.
void ExpectCloseAfterAdam(const Tensor& actual, const Tensor& expected, double rtol, double atol, double noise_bound);
std::mt19937_64& Rng();

}  // namespace ot::test
