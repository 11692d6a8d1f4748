#include "bench/onednn_reference.h"

#ifdef EAGLET_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace eaglet::bench {

#ifdef EAGLET_HAVE_DNNL
namespace {

class Onednn final : public OnednnReference {
 public:
  Onednn(const std::vector<WeightMatrix>& weights, int64_t M) : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    for (const WeightMatrix& w : weights) {
      const dnnl::memory::desc src({M, w.cols}, dt::bf16, tag::ab), dst({M, w.rows}, dt::f32, tag::ab);
      // W is [rows, cols] row-major: the [cols, rows] weights oneDNN multiplies by, in layout "ba".
      const dnnl::memory::desc user_w({w.cols, w.rows}, dt::bf16, tag::ba), any_w({w.cols, w.rows}, dt::bf16, tag::any);
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, any_w, dst), engine_);
      Op op{dnnl::matmul(pd), dnnl::memory(pd.weights_desc(), engine_), dnnl::memory(dst, engine_), src};
      dnnl::memory user(user_w, engine_, const_cast<void*>(w.data));
      dnnl::reorder(user, op.weights).execute(stream_, user, op.weights);
      implementation_ = pd.impl_info_str();
      ops_.push_back(std::move(op));
    }
    stream_.wait();
  }

  void run(const uint16_t* x) override {
    for (Op& op : ops_) {
      dnnl::memory src(op.src_desc, engine_, const_cast<uint16_t*>(x));
      op.prim.execute(stream_, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, op.weights}, {DNNL_ARG_DST, op.dst}});
    }
    stream_.wait();
  }

  std::string implementation() const override { return implementation_; }

 private:
  struct Op {
    dnnl::matmul prim;
    dnnl::memory weights, dst;
    dnnl::memory::desc src_desc;
  };
  dnnl::engine engine_;
  dnnl::stream stream_;
  std::vector<Op> ops_;
  std::string implementation_;
};

}  // namespace

std::unique_ptr<OnednnReference> OnednnReference::create(const std::vector<WeightMatrix>& weights, int64_t M,
                                                         std::string* why_not) {
  return std::make_unique<Onednn>(weights, M);
}
#else
std::unique_ptr<OnednnReference> OnednnReference::create(const std::vector<WeightMatrix>&, int64_t,
                                                         std::string* why_not) {
  *why_not = "not built in (install Debian's libdnnl-dev and re-run cmake)";
  return nullptr;
}
#endif

}  // namespace eaglet::bench
