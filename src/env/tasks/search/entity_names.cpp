#include "env/tasks/search/entity_names.h"

#include <cctype>
#include <cstring>
#include <functional>

#include "core/enum_names.h"
#include "core/error.h"

namespace stoa::env {
namespace {

const std::vector<std::string> kOnsets = {"b",  "d",  "f",  "g",  "k",  "l",  "m",  "n",
                                          "p",  "r",  "s",  "t",  "v",  "z",  "br", "dr",
                                          "kr", "tr", "st", "pl", "gl", "th", "sh", "gr"};
const std::vector<std::string> kVowels = {"a", "e", "i", "o", "u", "a", "o", "ai", "ea", "io"};
const std::vector<std::string> kCodas = {"", "", "", "n", "r", "l", "s", "x", "m", "k"};

std::string capitalize(std::string s) {
  if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  return s;
}
std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}
std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
// First letters of each syllable-ish chunk: consonant clusters give pronounceable acronyms.
std::string consonants(const std::string& stem, size_t n) {
  std::string out;
  for (char c : stem) {
    if (out.size() == n) break;
    if (!std::strchr("aeiou", c)) out.push_back(c);
  }
  return upper(out);
}

}  // namespace

constexpr EnumName<EntityType> kEntityTypeNames[] = {
    {EntityType::kGene, "gene"},          {EntityType::kProtein, "protein"},
    {EntityType::kDisease, "disease"},    {EntityType::kDrug, "drug"},
    {EntityType::kCellType, "cell type"}, {EntityType::kOrganism, "organism"},
    {EntityType::kMethod, "method"}};

const char* entity_type_name(EntityType type) {
  return enum_name(kEntityTypeNames, type);
}

std::string NameForge::stem(int min_syllables, int max_syllables) {
  int n = prng_.range(min_syllables, max_syllables);
  std::string out;
  for (int i = 0; i < n; ++i) {
    out += prng_.pick(kOnsets);
    out += prng_.pick(kVowels);
    if (i + 1 == n || prng_.chance(0.3)) out += prng_.pick(kCodas);
  }
  return out;
}

bool NameForge::claim(const std::string& name) {
  return taken_.insert(lower(name)).second;
}

std::string NameForge::unique(const std::function<std::string()>& make_one) {
  for (int attempt = 0; attempt < 1000; ++attempt) {
    std::string name = make_one();
    // Aliases derived from a fixed stem repeat themselves; a numeric suffix breaks the tie.
    if (attempt >= 3) name += std::to_string(prng_.range(2, 99));
    if (claim(name)) return name;
  }
  fail(ErrorKind::kInternal, "name forge: no unique name after 1000 attempts");
}

Entity NameForge::make(EntityType type) {
  Entity e{type, {}, {}};
  switch (type) {
    case EntityType::kGene: {
      // Symbols like "VORK3" with a long-name alias "vorkalin 3".
      std::string s;
      e.name = unique([&] {
        s = stem(2, 2);
        return upper(s.substr(0, std::min<size_t>(s.size(), 5))) +
               std::to_string(prng_.range(1, 9));
      });
      e.aliases.push_back(
          unique([&] { return capitalize(s) + "lin " + e.name.substr(e.name.size() - 1); }));
      break;
    }
    case EntityType::kProtein: {
      static const std::vector<std::string> suffixes = {"in",    "ase",  "ulin",
                                                        "ectin", "orin", "ein"};
      std::string s;
      e.name = unique([&] {
        s = stem(2, 2);
        return capitalize(s + prng_.pick(suffixes));
      });
      e.aliases.push_back(
          unique([&] { return consonants(s, 3) + "P" + std::to_string(prng_.range(1, 9)); }));
      break;
    }
    case EntityType::kDisease: {
      static const std::vector<std::string> kinds = {"syndrome", "disease", "dystrophy",
                                                     "fever",    "anemia",  "ataxia"};
      std::string s, kind;
      e.name = unique([&] {
        s = stem(2, 2);
        kind = prng_.pick(kinds);
        return capitalize(s) + " " + kind;
      });
      e.aliases.push_back(unique([&] {
        return consonants(s, 2) + upper(kind.substr(0, 1)) + std::to_string(prng_.range(1, 9));
      }));
      break;
    }
    case EntityType::kDrug: {
      static const std::vector<std::string> suffixes = {"mab",  "nib",    "stat", "vir",
                                                        "zole", "cillin", "pril", "tide"};
      e.name = unique([&] { return stem(2, 2) + prng_.pick(suffixes); });
      static const std::vector<std::string> brands = {"ex", "ax", "ol", "ia", "on", "yx"};
      e.aliases.push_back(unique([&] { return capitalize(stem(1, 2) + prng_.pick(brands)); }));
      break;
    }
    case EntityType::kCellType: {
      std::string s;
      e.name = unique([&] {
        s = stem(2, 2);
        return capitalize(s) + " cells";
      });
      e.aliases.push_back(unique([&] { return s + "ocytes"; }));
      break;
    }
    case EntityType::kOrganism: {
      static const std::vector<std::string> genus = {"ia", "us", "a", "ella"};
      static const std::vector<std::string> species = {"ensis", "ii", "ata", "ica"};
      static const std::vector<std::string> common = {"worm", "vole", "finch",
                                                      "frog", "mite", "fly"};
      e.name = unique([&] {
        return capitalize(stem(1, 2) + prng_.pick(genus)) + " " + stem(1, 2) + prng_.pick(species);
      });
      e.aliases.push_back(unique([&] { return stem(1, 2) + " " + prng_.pick(common); }));
      break;
    }
    case EntityType::kMethod: {
      static const std::vector<std::string> kinds = {"assay",   "blotting",  "sequencing",
                                                     "imaging", "cytometry", "chromatography"};
      std::string s, kind;
      e.name = unique([&] {
        s = stem(1, 2);
        kind = prng_.pick(kinds);
        return capitalize(s) + " " + kind;
      });
      e.aliases.push_back(
          unique([&] { return consonants(s, 2) + upper(kind.substr(0, 1)) + "M"; }));
      break;
    }
  }
  return e;
}

}  // namespace stoa::env
