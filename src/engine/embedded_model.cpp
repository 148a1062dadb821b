#include "engine/embedded_model.h"

#include "core/error.h"
#include "model/bpe_trainer.h"
#include "model/presets.h"

namespace stoa::engine {
namespace {

constexpr uint64_t kWeightSeed = 20261130;
constexpr int64_t kVocabSize = 512;  // tiny-lfm2's; fewer if the corpus runs out of pairs

}  // namespace

const std::string& embedded_corpus() {
  static const std::string text =
      "Tumour suppressor proteins restrain cell division when the genome is damaged. In "
      "epithelial cells, the kinase ATM phosphorylates p53 within minutes of a double-strand "
      "break, and the stabilised protein binds the promoters of genes that arrest the cell "
      "cycle, repair DNA or trigger apoptosis. Mutations in the DNA-binding domain of TP53 are "
      "found in roughly half of human cancers, and cells that lose this checkpoint accumulate "
      "further mutations with every division.\n\n"
      "Antibiotic resistance spreads through plasmids that carry genes for beta-lactamases and "
      "efflux pumps. A cohort study of 412 patients with bloodstream infections found that "
      "carbapenem-resistant Klebsiella pneumoniae was associated with longer hospital stays and "
      "higher thirty-day mortality. The authors recommend rapid genomic surveillance, "
      "antimicrobial stewardship and infection control in intensive care units.\n\n"
      "Insulin signalling controls glucose uptake in muscle and adipose tissue. When insulin "
      "binds its receptor, a cascade through IRS-1, PI3K and AKT moves GLUT4 transporters to the "
      "cell membrane. In type 2 diabetes this pathway is blunted, and chronic inflammation, "
      "lipid accumulation and mitochondrial stress each contribute to insulin resistance.\n";
  return text;
}

EmbeddedModel load_embedded_model() {
  BpeTrainerOptions options;
  options.vocab_size = kVocabSize;
  BpeTrainer trainer(options);
  trainer.add_text(embedded_corpus());
  TrainedBpe bpe = trainer.train();
  Tokenizer tokenizer = Tokenizer::from_json(bpe.tokenizer_json(), "embedded tokenizer");
  ModelConfig config = preset_config("tiny-lfm2");
  config.vocab_size = tokenizer.vocab_size();
  config.eos_token_id = tokenizer.token_id("<|endoftext|>").value_or(-1);
  EmbeddedModel m{random_weights(config, kWeightSeed, 0.08f), std::move(tokenizer),
                  cat("the embedded tiny model (LFM2, ", config.num_layers, " layers, hidden ",
                      config.hidden_size, ", BPE vocabulary of ", config.vocab_size,
                      " trained at start-up, seeded random weights: expect word salad)")};
  return m;
}

}  // namespace stoa::engine
