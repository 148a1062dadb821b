// Pronounceable synthetic biomedical entity names and their aliases for PaperSearchQA-mini.
// Every name and alias is unique across the whole generated world (case-insensitively), so an
// answer can never be confused with another entity's.
#pragma once
#include <functional>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/rng.h"

namespace stoa::env {

enum class EntityType { kGene, kProtein, kDisease, kDrug, kCellType, kOrganism, kMethod };
const char* entity_type_name(EntityType type);

struct Entity {
  EntityType type;
  std::string name;                  // canonical
  std::vector<std::string> aliases;  // synonyms, abbreviations, brand or common names
};

class NameForge {
 public:
  explicit NameForge(Rng prng) : prng_(prng) {}
  Entity make(EntityType type);

 private:
  std::string stem(int min_syllables, int max_syllables);
  bool claim(const std::string& name);  // false if taken
  std::string unique(const std::function<std::string()>& make_one);

  Rng prng_;
  std::unordered_set<std::string> taken_;  // lower-cased
};

}  // namespace stoa::env
