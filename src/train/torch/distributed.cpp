#include "train/torch/distributed.h"

// Debian's libtorch is built with c10d's Gloo backend; its header declares it only under this macro, and includes
// the Gloo headers of libgloo-dev.
#define USE_C10D_GLOO 1
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <cstring>

#include "util/error.h"

namespace eaglet {

namespace {

// A rank may wait this long for another (rank 0 evaluates and checkpoints while the others wait at the next sum).
constexpr std::chrono::hours kWaitLimit{24};
constexpr std::chrono::minutes kJoinLimit{10};

}  // namespace

struct DataParallel::Group {
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo;
};

DataParallel::DataParallel(int world, int rank) : world_(world), rank_(rank) {}

std::pair<std::string, uint16_t> parse_dist_url(const std::string& url) {
  const std::string scheme = "tcp://";
  const size_t colon = url.rfind(':');
  if (url.rfind(scheme, 0) != 0 || colon == std::string::npos || colon <= scheme.size())
    fail("--dist-url '", url, "': expected tcp://HOST:PORT (PyTorch's init method; rank 0 listens on it)");
  const std::string host = url.substr(scheme.size(), colon - scheme.size()), port = url.substr(colon + 1);
  long value = 0;
  for (char c : port) {
    if (c < '0' || c > '9' || value > 65535) fail("--dist-url '", url, "': the port must be a number in [1, 65535]");
    value = value * 10 + (c - '0');
  }
  if (port.empty() || value < 1 || value > 65535) fail("--dist-url '", url, "': the port must be in [1, 65535]");
  return {host, static_cast<uint16_t>(value)};
}

std::unique_ptr<DataParallel> DataParallel::join(const DistOptions& o) {
  if (o.world < 1 || o.rank < 0 || o.rank >= o.world)
    fail("--rank ", o.rank, " and --world-size ", o.world, ": expected 0 <= rank < world size");
  std::unique_ptr<DataParallel> dp(new DataParallel(o.world, o.rank));
  if (o.world == 1) return dp;
  const auto [host, port] = parse_dist_url(o.url);
  try {
    c10d::TCPStoreOptions store;
    store.port = port;
    store.isServer = o.rank == 0;
    store.numWorkers = o.world;
    store.timeout = kJoinLimit;
    auto options = c10d::ProcessGroupGloo::Options::create(kWaitLimit);
    options->devices.push_back(o.rank == 0 && (host == "0.0.0.0" || host.empty())
                                   ? c10d::ProcessGroupGloo::createDefaultDevice()
                                   : c10d::ProcessGroupGloo::createDeviceForHostname(host));
    dp->group_ = std::make_unique<Group>(Group{c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::TCPStore>(host, store), o.rank, o.world, options)});
  } catch (const std::exception& e) {
    fail("train-draft: rank ", o.rank, " of ", o.world, " could not join the others at ", o.url, ": ", e.what(),
         " (is rank 0 running and the port free and reachable?)");
  }
  return dp;
}

DataParallel::~DataParallel() = default;

void DataParallel::allreduce_gradients(const std::vector<torch::Tensor>& params) {
  if (world_ == 1) return;
  std::vector<torch::Tensor> bucket;
  size_t bytes = 0;
  const auto flush = [&] {
    if (bucket.empty()) return;
    std::vector<torch::Tensor> flat;
    for (const torch::Tensor& g : bucket) flat.push_back(g.reshape({-1}));
    std::vector<torch::Tensor> joined = {torch::cat(flat)};
    group_->gloo->allreduce(joined)->wait();
    int64_t at = 0;
    for (torch::Tensor& g : bucket) {
      g.copy_(joined[0].narrow(0, at, g.numel()).view_as(g));
      at += g.numel();
    }
    bucket.clear();
    bytes = 0;
  };
  for (const torch::Tensor& p : params) {
    torch::Tensor g = p.mutable_grad();
    if (!g.defined()) {  // a rank whose batch did not reach a parameter still takes part in its sum
      p.mutable_grad() = torch::zeros_like(p);
      g = p.mutable_grad();
    }
    bucket.push_back(g);
    bytes += static_cast<size_t>(g.numel()) * g.element_size();
    if (bytes >= kBucketBytes) flush();
  }
  flush();
}

void DataParallel::allreduce_sum(std::vector<double>& values) {
  if (world_ == 1 || values.empty()) return;
  std::vector<torch::Tensor> t = {torch::tensor(values, torch::kFloat64)};
  group_->gloo->allreduce(t)->wait();
  for (size_t i = 0; i < values.size(); ++i) values[i] = t[0][static_cast<int64_t>(i)].item<double>();
}

void DataParallel::broadcast(std::string& bytes) {
  if (world_ == 1) return;
  std::vector<torch::Tensor> size = {torch::tensor({static_cast<int64_t>(bytes.size())}, torch::kInt64)};
  group_->gloo->broadcast(size)->wait();
  const int64_t n = size[0].item<int64_t>();
  std::vector<torch::Tensor> data = {torch::zeros({std::max<int64_t>(n, 1)}, torch::kUInt8)};
  if (rank_ == 0 && n > 0) std::memcpy(data[0].data_ptr<uint8_t>(), bytes.data(), static_cast<size_t>(n));
  group_->gloo->broadcast(data)->wait();
  if (rank_ != 0) bytes.assign(reinterpret_cast<const char*>(data[0].data_ptr<uint8_t>()), static_cast<size_t>(n));
}

void DataParallel::broadcast(const std::vector<torch::Tensor>& tensors) {
  if (world_ == 1) return;
  torch::NoGradGuard no_grad;
  for (const torch::Tensor& t : tensors) {
    std::vector<torch::Tensor> one = {t.detach()};
    group_->gloo->broadcast(one)->wait();
  }
}

void DataParallel::on_lead(const std::function<void()>& work) {
  std::string error;
  if (rank_ == 0) {
    try {
      work();
    } catch (const Error& e) {
      error = e.what();
    }
  }
  broadcast(error);
  if (!error.empty()) throw Error(rank_ == 0 ? error : "rank 0 stopped: " + error);
}

}  // namespace eaglet
