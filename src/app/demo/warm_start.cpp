#include "app/demo/warm_start.h"

#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/error.h"

namespace stoa::app {
namespace fs = std::filesystem;
namespace {

constexpr const char* kModelFiles[] = {"config.json", "model.safetensors", "tokenizer.json",
                                       "tokenizer_config.json", "provenance.json"};
// The stages whose output the warm start's weights are tied to: the corpus and questions (data),
// the search index it learned to read, and the token ids it learned in.
constexpr const char* kTiedStages[] = {"data", "index", "tokenizer"};

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  STOA_CHECK(in.good(), ErrorKind::kIo, "warm start: cannot read ", path.string());
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

WarmStart read_warm_start(const std::string& dir) {
  for (const char* f : kModelFiles)
    STOA_CHECK(fs::is_regular_file(fs::path(dir) / f), ErrorKind::kNotFound, "warm start ", dir,
               " has no ", f);
  WarmStart w;
  w.dir = dir;
  w.provenance = nlohmann::json::parse(read_bytes(fs::path(dir) / "provenance.json"), nullptr,
                                       /*allow_exceptions=*/false);
  STOA_CHECK(w.provenance.is_object() && w.provenance.contains("stages") &&
                 w.provenance["stages"].is_object(),
             ErrorKind::kBadFormat, "warm start ", dir,
             "/provenance.json is not a JSON object with a \"stages\" object");
  return w;
}

std::string warm_start_mismatch(const WarmStart& warm, const nlohmann::json& stage_chain,
                                const std::string& tokenizer_json) {
  const nlohmann::json& theirs = warm.provenance["stages"];
  for (const char* stage : kTiedStages) {
    const nlohmann::json mine = stage_chain.value(stage, nlohmann::json());
    const nlohmann::json its = theirs.value(stage, nlohmann::json());
    if (mine != its)
      return std::string("its ") + stage + " stage ran with " + its.dump() + ", this demo's with " +
             mine.dump();
  }
  if (read_bytes(tokenizer_json) != read_bytes(fs::path(warm.dir) / "tokenizer.json"))
    return "its tokenizer.json differs from the one this demo trained (" + tokenizer_json +
           "): the data generator or the tokenizer trainer changed since it was made";
  return "";
}

void write_provenance(const std::string& model_dir, const nlohmann::json& stage_chain,
                      const nlohmann::json& sft_probe) {
  const fs::path out = fs::path(model_dir) / "provenance.json";
  std::ofstream f(out);
  f << nlohmann::json{{"stages", stage_chain}, {"sft_probe", sft_probe}}.dump(2) << '\n';
  STOA_CHECK(f.good(), ErrorKind::kIo, "cannot write ", out.string());
}

void install_warm_start(const WarmStart& warm, const std::string& model_dir) {
  fs::create_directories(model_dir);
  for (const char* f : kModelFiles)
    fs::copy_file(fs::path(warm.dir) / f, fs::path(model_dir) / f,
                  fs::copy_options::overwrite_existing);
}

}  // namespace stoa::app
