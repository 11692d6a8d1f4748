#include "train/online_data.h"

#include <algorithm>
#include <cstdio>

#include "kernels/dtype.h"
#include "model/transformer.h"
#include "train/dataset.h"
#include "train/draft_vocab.h"
#include "train/extract.h"
#include "util/error.h"
#include "util/int_list.h"
#include "util/log.h"

namespace eaglet {

namespace {

class OnlineData : public TrainingData {
 public:
  OnlineData(const OnlineOptions& o, Transformer& target) : o_(o), target_(target) {
    const ModelConfig& c = target.config();
    dir_ = o.data_file;
    hidden_ = c.hidden_size;
    vocab_ = c.vocab_size;
    const Tokenizer tokenizer = Tokenizer::load(c.dir);
    check_tokenizer_fits(tokenizer, c.vocab_size, c.file);
    rows_ = read_training_rows(o.data_file, tokenizer, c.dir, DatasetOptions{o.max_length, {}});
    aux_layers_ =
        !o.aux_layers.empty() ? o.aux_layers : usable_default_aux_layers(c.num_layers, [](const std::vector<int>& ids) {
          return "pass --layers " + format_int_list(ids) + " with --online";
        });
    std::sort(aux_layers_.begin(), aux_layers_.end());
    if (aux_layers_.back() >= c.num_layers)
      fail("--layers must name hidden states below ", c.num_layers, " (the final state is always captured), found ",
           aux_layers_.back());
    capture_ = aux_layers_;
    capture_.push_back(static_cast<int>(c.num_layers));
    const int64_t n = o.draft_vocab > 0 ? o.draft_vocab : std::min<int64_t>(32000, c.vocab_size);
    if (n > c.vocab_size) fail("--draft-vocab ", n, " is larger than the target vocabulary ", c.vocab_size);
    const DraftVocab v = draft_vocab_of_rows(rows_, c.vocab_size, n);
    d2t_ = v.d2t;
    t2d_ = v.t2d;
    for (const TrainingRow& r : rows_) tokens_ += static_cast<int64_t>(r.ids.size());
    log_info(
        strprintf("train-draft: online from %s: %zu rows, %lld tokens, the target's forward per batch; draft "
                  "vocabulary %lld (coverage %.1f%%)",
                  o.data_file.c_str(), rows_.size(), static_cast<long long>(tokens_), static_cast<long long>(n),
                  100.0 * v.coverage));
  }

  std::vector<SequenceRef> sequences(int64_t max_length) const override {
    std::vector<SequenceRef> out;
    for (size_t r = 0; r < rows_.size(); ++r)
      cut_rows(static_cast<int32_t>(r), {0, static_cast<int64_t>(rows_[r].ids.size())}, max_length, out);
    return out;
  }

  void read(const SequenceRef& s, int64_t from, int64_t n, int64_t* ids, float* mask, float* aux,
            float* final_hidden) const override {
    const TrainingRow& row = rows_.at(static_cast<size_t>(s.shard));
    const int64_t t0 = s.begin + from;
    for (int64_t i = 0; i < n; ++i) {
      if (ids) ids[i] = row.ids[static_cast<size_t>(t0 + i)];
      if (mask) mask[i] = row.loss_mask[static_cast<size_t>(t0 + i)] != 0 ? 1.0f : 0.0f;
    }
    if (aux == nullptr && final_hidden == nullptr) return;
    if (cached_ != s.shard) {
      aux_.clear();
      final_.clear();
      target_.set_aux_layers(capture_);
      capture_row(target_, row.ids, static_cast<int64_t>(aux_layers_.size()), o_.prefill_batch, aux_, final_);
      cached_ = s.shard;
    }
    const int64_t H = hidden_, W = static_cast<int64_t>(aux_layers_.size()) * H;
    if (aux)
      for (int64_t i = 0; i < n * W; ++i) aux[i] = bf16_to_f32(aux_[static_cast<size_t>(t0 * W + i)]);
    if (final_hidden)
      for (int64_t i = 0; i < n * H; ++i) final_hidden[i] = bf16_to_f32(final_[static_cast<size_t>(t0 * H + i)]);
  }

 private:
  OnlineOptions o_;
  Transformer& target_;
  std::vector<TrainingRow> rows_;
  std::vector<int> capture_;
  mutable int32_t cached_ = -1;
  mutable std::vector<uint16_t> aux_, final_;
};

}  // namespace

std::unique_ptr<TrainingData> open_online_data(const OnlineOptions& o, Transformer& target) {
  return std::make_unique<OnlineData>(o, target);
}

}  // namespace eaglet
