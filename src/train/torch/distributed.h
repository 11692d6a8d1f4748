#pragma once
// Data-parallel training on torch.distributed's c10d with the Gloo backend (Debian's libtorch ships both): the
// processes of one run meet at a TCPStore (PyTorch's `tcp://HOST:PORT` init method, rank 0 serving it), then sum
// gradients, figures and bytes over a ProcessGroupGloo. One process (world size 1) needs no group: every call is
// then a no-op, so the trainer has one code path.
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace eaglet {

struct DistOptions {
  std::string url;  // tcp://HOST:PORT, where rank 0 listens and the others connect
  int world = 1, rank = 0;
};

class DataParallel {
 public:
  static std::unique_ptr<DataParallel> join(const DistOptions& options);
  ~DataParallel();

  int rank() const { return rank_; }
  int world() const { return world_; }
  bool lead() const { return rank_ == 0; }

  // Sums every rank's gradients of `params` in place, in flat buckets of at most kBucketBytes (as DDP buckets).
  void allreduce_gradients(const std::vector<torch::Tensor>& params);
  void allreduce_sum(std::vector<double>& values);
  void broadcast(std::string& bytes);                         // rank 0's bytes to every rank
  void broadcast(const std::vector<torch::Tensor>& tensors);  // rank 0's values, in place
  // Runs `work` on rank 0 only; an Error it throws is raised on every rank with the same message, so that no rank
  // waits for one that has stopped.
  void on_lead(const std::function<void()>& work);

  static constexpr size_t kBucketBytes = 25u << 20;

 private:
  struct Group;  // c10d's ProcessGroupGloo, kept out of this header
  DataParallel(int world, int rank);
  int world_, rank_;
  std::unique_ptr<Group> group_;
};

// "tcp://HOST:PORT" -> {HOST, PORT}; anything else is an Error naming the expected form.
std::pair<std::string, uint16_t> parse_dist_url(const std::string& url);

}  // namespace eaglet
