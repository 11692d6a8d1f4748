// Training rows (train/dataset): JSON lines of {"text"} or {"messages"} tokenized with the fixed byte-level tokenizer
// and its ChatML template (fuzz/data/tokenizer_bytelevel), as read and as regenerated (every assistant turn replaced).
#include "fuzz_support.h"
#include "train/dataset.h"

using namespace eaglet;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string model_dir = fuzz::data_path("tokenizer_bytelevel");
  static const Tokenizer tokenizer = Tokenizer::load(model_dir);
  const std::string text(fuzz::as_text(data, size));
  DatasetOptions plain{.max_length = 64};
  DatasetOptions regenerated{.max_length = 64, .regenerate = [](const ChatJson& context) {
                               return "reply after " + std::to_string(context.size()) + " turns";
                             }};
  for (const DatasetOptions& options : {plain, regenerated})
    fuzz::expect_clean([&] {
      for (const TrainingRow& row : parse_training_rows(text, "fuzz.jsonl", tokenizer, model_dir, options))
        if (row.ids.size() != row.loss_mask.size() || row.ids.size() > 64 || row.ids.size() < 2) __builtin_trap();
    });
  return 0;
}
