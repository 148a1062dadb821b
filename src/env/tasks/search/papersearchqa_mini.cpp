#include "env/tasks/search/papersearchqa_mini.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <unordered_set>

#include "core/error.h"
#include "core/rng.h"
#include "env/tasks/search/entity_names.h"

namespace stoa::env {
namespace {

enum class ObjectKind { kEntity, kHours, kKilodaltons };

// One relation: how papers state it and how questions ask about it. Placeholders: {S} subject,
// {O} object, {M} a method, {G} an organism, {X} another entity of the subject's type, {N} a
// number. Plain questions reuse the papers' key words; paraphrased ones avoid them on purpose.
struct RelationSpec {
  const char* category;
  EntityType subject;
  EntityType object;  // ignored for quantities
  ObjectKind kind;
  const char* keyword;  // what a good query adds to the subject's name
  std::vector<std::string> titles;
  std::vector<std::string> statements;
  std::vector<std::string> plain_questions;
  std::vector<std::string> paraphrased_questions;
};

const std::vector<RelationSpec>& relations() {
  static const std::vector<RelationSpec> specs = {
      {"disease-treatment",
       EntityType::kDisease,
       EntityType::kDrug,
       ObjectKind::kEntity,
       "treatment drug",
       {"{O} for the treatment of {S}", "Efficacy of {O} in patients with {S}",
        "A randomized trial of {O} in {S}"},
       {"{O} is an effective treatment for {S}.",
        "Treatment with {O} improved outcomes in patients with {S}.",
        "Patients with {S} responded well to {O} therapy.",
        "{O} was the most effective drug for the treatment of {S}."},
       {"Which drug is used to treat {S}?", "What drug is an effective treatment for {S}?"},
       {"Name the compound that alleviated clinical symptoms in a cohort of individuals "
        "diagnosed with {S}",
        "Which pharmacological agent showed benefit against {S} in clinical studies?"}},
      {"disease-gene",
       EntityType::kDisease,
       EntityType::kGene,
       ObjectKind::kEntity,
       "gene mutations",
       {"{O} mutations cause {S}", "Loss of {O} function underlies {S}",
        "Genetic basis of {S}: the role of {O}"},
       {"Mutations in the {O} gene cause {S}.",
        "{S} is caused by loss-of-function mutations in {O}.",
        "Sequencing identified {O} mutations in every family with {S}."},
       {"Mutations in which gene cause {S}?", "Which gene is mutated in {S}?"},
       {"Genetic analysis of affected families implicated which locus as responsible for {S}?",
        "Defects in what hereditary factor give rise to {S}?"}},
      {"disease-model",
       EntityType::kDisease,
       EntityType::kOrganism,
       ObjectKind::kEntity,
       "model organism",
       {"A {O} model of {S}", "Modeling {S} in {O}"},
       {"{O} is an established animal model of {S}.", "We established a model of {S} in {O}.",
        "The {O} model reproduces key features of {S}."},
       {"Which organism is used as a model of {S}?", "What animal model is used to study {S}?"},
       {"Researchers studying the pathology of {S} in vivo commonly rely on which species?",
        "In what creature can investigators recapitulate {S} experimentally?"}},
      {"disease-diagnosis",
       EntityType::kDisease,
       EntityType::kMethod,
       ObjectKind::kEntity,
       "diagnosis method",
       {"{O} for the diagnosis of {S}", "Diagnosing {S} with {O}"},
       {"{S} can be diagnosed by {O}.", "{O} diagnosed {S} with high accuracy.",
        "Diagnosis of {S} relies on {O}."},
       {"Which method is used to diagnose {S}?", "How is {S} diagnosed?"},
       {"What laboratory technique lets clinicians confirm a suspected case of {S}?",
        "Which technique identifies individuals affected by {S}?"}},
      {"drug-target",
       EntityType::kDrug,
       EntityType::kProtein,
       ObjectKind::kEntity,
       "inhibits target protein",
       {"{S} inhibits {O}", "Mechanism of action of {S}: targeting {O}",
        "{S} is a selective {O} inhibitor"},
       {"{S} acts by inhibiting {O}.", "{S} binds and inhibits {O} with high affinity.",
        "The primary target of {S} is {O}."},
       {"Which protein does {S} inhibit?", "What is the molecular target of {S}?"},
       {"The therapeutic effect of {S} is mediated through blockade of which molecule?",
        "What molecule does {S} bind to exert its pharmacological action?"}},
      {"drug-half-life",
       EntityType::kDrug,
       EntityType::kDrug,
       ObjectKind::kHours,
       "half-life",
       {"Pharmacokinetics of {S}", "The half-life of {S} in healthy volunteers"},
       {"The plasma half-life of {S} was {O}.", "{S} showed a half-life of {O}.",
        "{S} is eliminated with a half-life of {O}."},
       {"What is the half-life of {S}?", "What is the plasma half-life of {S}?"},
       {"How long does it take for circulating concentrations of {S} to fall by 50%?",
        "After dosing, how quickly is {S} cleared from the blood, as a halving time?"}},
      {"protein-expression",
       EntityType::kProtein,
       EntityType::kCellType,
       ObjectKind::kEntity,
       "expressed cells",
       {"{S} is expressed in {O}", "Expression of {S} in {O}"},
       {"{S} is highly expressed in {O}.", "Immunostaining localized {S} to {O}.",
        "Expression of {S} was restricted to {O}."},
       {"In which cell type is {S} expressed?", "Which cells express {S}?"},
       {"Which cells show the strongest abundance of {S} in tissue staining?",
        "Where in the tissue does {S} accumulate, by cell population?"}},
      {"protein-mass",
       EntityType::kProtein,
       EntityType::kProtein,
       ObjectKind::kKilodaltons,
       "molecular weight",
       {"Structural characterization of {S}", "Purification and properties of {S}"},
       {"{S} is a {O} protein.", "The molecular weight of {S} is {O}.",
        "Purified {S} migrated with a molecular weight of {O}."},
       {"What is the molecular weight of {S}?", "What is the molecular mass of {S}?"},
       {"How heavy is the {S} polypeptide according to gel migration?",
        "What size, in kilodaltons, was measured for {S}?"}},
      {"gene-product",
       EntityType::kGene,
       EntityType::kProtein,
       ObjectKind::kEntity,
       "encodes protein",
       {"{S} encodes {O}", "Cloning of {S} reveals that it encodes {O}"},
       {"The {S} gene encodes {O}.", "{O} is the protein product of the {S} gene.",
        "{S} encodes the protein {O}."},
       {"Which protein is encoded by {S}?", "What protein does the {S} gene encode?"},
       {"What gene product is translated from the {S} locus?",
        "Transcripts of {S} give rise to which polypeptide?"}},
  };
  return specs;
}

const std::vector<std::string> kIntro = {
    "{S} ({A}) remains poorly understood.", "{S}, also known as {A}, has been studied for decades.",
    "Little is known about {S} ({A}).", "{S} ({A}) has attracted growing clinical interest."};
const std::vector<std::string> kIntroNoAlias = {"{S} remains poorly understood.",
                                                "{S} has been studied for decades.",
                                                "Little is known about {S}."};
const std::vector<std::string> kMethods = {
    "We analysed {N} samples using {M} in {G}.",
    "Data from {N} subjects were collected and examined by {M}.",
    "Experiments combined {M} with follow-up studies in {G}.",
    "A cohort of {N} participants was assessed with {M}."};
const std::vector<std::string> kSupport = {
    "These results were confirmed in an independent cohort.",
    "The effect was consistent across all subgroups.", "Findings were replicated in {G}.",
    "Statistical analysis supported this conclusion (p < 0.01)."};
const std::vector<std::string> kContrast = {"No comparable finding was observed for {X}.",
                                            "In contrast, {X} showed no such association.",
                                            "Unlike {X}, this relationship was robust."};
const std::vector<std::string> kConclusion = {"These findings clarify the biology of {S}.",
                                              "Our data provide new insight into {S}.",
                                              "Further studies of {S} are warranted."};

// Background sentences built from the wording of the paraphrased questions: each takes a few
// content words of one paraphrase template. Papers that share no entity with a question thus still
// match much of its wording, which is what makes copying a paraphrased question into the search
// box worse than searching for its subject (measured in docs/tasks.md).
const std::vector<std::vector<std::string>>& paraphrase_words() {
  static const std::vector<std::vector<std::string>> words = [] {
    static const std::unordered_set<std::string> skip = {
        "the", "of",   "in",  "a",   "to",   "by",    "as",  "what", "which",
        "how", "does", "is",  "for", "with", "after", "its", "it",   "an",
        "on",  "from", "can", "do",  "who",  "give",  "50",  "s"};
    std::vector<std::vector<std::string>> out;
    for (const auto& spec : relations()) {
      for (const auto& t : spec.paraphrased_questions) {
        std::vector<std::string> list;
        std::string word;
        for (char c : t + " ") {
          if (std::isalpha(static_cast<unsigned char>(c))) {
            word.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
            continue;
          }
          if (!word.empty() && word != "s" && !skip.count(word)) list.push_back(word);
          word.clear();
        }
        out.push_back(std::move(list));
      }
    }
    return out;
  }();
  return words;
}
const std::vector<std::string> kFillerFrames = {
    "Prior work on {1} {2} and {3} {4} remains limited.",
    "Earlier reports linked {1} {2} to {3} {4}.", "The role of {1} {2} in {3} {4} is debated.",
    "We also considered {1} {2}, {3} and {4}."};

std::string filler_sentence(Rng& prng) {
  std::vector<std::string> pool = prng.pick(paraphrase_words());
  prng.shuffle(pool);
  std::string out = prng.pick(kFillerFrames);
  static constexpr std::string_view kKeys[] = {"{1}", "{2}", "{3}", "{4}"};
  for (size_t i = 0; i < 4; ++i)
    out.replace(out.find(kKeys[i]), kKeys[i].size(), pool[i % pool.size()]);
  return out;
}

struct Fact {
  int relation;
  int subject;  // entity index
  int object;   // entity index, or -1 for quantities
  std::string object_text;
  std::vector<std::string> answers;
  int split;  // 0 train, 1 validation, 2 test
};

std::string fill(std::string text, const std::vector<std::pair<std::string, std::string>>& vars) {
  for (const auto& [key, value] : vars) {
    for (size_t at = text.find(key); at != std::string::npos;
         at = text.find(key, at + value.size()))
      text.replace(at, key.size(), value);
  }
  return text;
}

std::string capitalize_first(std::string s) {
  if (!s.empty() && s[0] >= 'a' && s[0] <= 'z') s[0] = static_cast<char>(s[0] - 'a' + 'A');
  return s;
}

}  // namespace

MiniDataset generate_papersearchqa_mini(const MiniConfig& config) {
  STOA_CHECK(config.papers >= 10, ErrorKind::kInvalidArgument,
             "papersearchqa-mini: --papers must be >= 10, got ", config.papers);
  STOA_CHECK(config.questions >= 0, ErrorKind::kInvalidArgument,
             "papersearchqa-mini: --questions must be >= 0");
  STOA_CHECK(config.validation_fraction >= 0 && config.test_fraction >= 0 &&
                 config.validation_fraction + config.test_fraction < 1,
             ErrorKind::kInvalidArgument, "papersearchqa-mini: bad split fractions");
  Rng root(config.seed, 0);
  NameForge forge(root.fork(1));
  Rng world = root.fork(2);
  Rng text = root.fork(3);
  Rng ask = root.fork(4);

  std::vector<Entity> entities;
  std::vector<std::vector<int>> by_type(7);
  auto new_entity = [&](EntityType type) {
    entities.push_back(forge.make(type));
    by_type[static_cast<int>(type)].push_back(static_cast<int>(entities.size()) - 1);
    return static_cast<int>(entities.size()) - 1;
  };
  // Object pools, sized with the corpus: small pools (organisms, methods, cell types) make
  // answers shared by many papers, like real biomedicine.
  int n = config.papers;
  for (int i = 0; i < std::max(8, n / 250); ++i) new_entity(EntityType::kOrganism);
  for (int i = 0; i < std::max(8, n / 200); ++i) new_entity(EntityType::kMethod);
  for (int i = 0; i < std::max(8, n / 120); ++i) new_entity(EntityType::kCellType);

  const auto& specs = relations();
  std::vector<std::vector<int>> subject_relations(7);
  for (size_t r = 0; r < specs.size(); ++r)
    subject_relations[static_cast<int>(specs[r].subject)].push_back(static_cast<int>(r));

  // Subjects are created round-robin over the subject types; each gets a fact for most of its
  // relations (so its other papers are natural distractors) until there is one fact per paper.
  static const EntityType kSubjectCycle[] = {EntityType::kDisease, EntityType::kDrug,
                                             EntityType::kProtein, EntityType::kGene,
                                             EntityType::kDisease, EntityType::kDrug};
  std::vector<Fact> facts;
  auto object_for = [&](EntityType type) {
    auto& pool = by_type[static_cast<int>(type)];
    // Drugs, genes, proteins as objects: half the time reuse one (shared entities), else new.
    if (type == EntityType::kOrganism || type == EntityType::kMethod ||
        type == EntityType::kCellType || (!pool.empty() && world.chance(0.5)))
      return pool[world.below(pool.size())];
    return new_entity(type);
  };
  double val_cut = config.validation_fraction;
  double test_cut = config.validation_fraction + config.test_fraction;
  for (int cycle = 0; static_cast<int>(facts.size()) < config.papers; ++cycle) {
    EntityType type = kSubjectCycle[cycle % 6];
    int subject = new_entity(type);
    double u = world.uniform();
    int split = u < val_cut ? 1 : u < test_cut ? 2 : 0;
    for (int r : subject_relations[static_cast<int>(type)]) {
      if (static_cast<int>(facts.size()) >= config.papers) break;
      if (world.chance(0.15)) continue;
      const RelationSpec& spec = specs[r];
      Fact fact{r, subject, -1, "", {}, split};
      if (spec.kind == ObjectKind::kEntity) {
        fact.object = object_for(spec.object);
        const Entity& o = entities[fact.object];
        fact.object_text = o.name;
        fact.answers.push_back(o.name);
        fact.answers.insert(fact.answers.end(), o.aliases.begin(), o.aliases.end());
      } else if (spec.kind == ObjectKind::kHours) {
        int hours = world.range(2, 96);
        fact.object_text = std::to_string(hours) + " hours";
        fact.answers = {fact.object_text, std::to_string(hours) + " h",
                        std::to_string(hours) + " hrs"};
      } else {
        int kda = world.range(12, 240);
        fact.object_text = std::to_string(kda) + " kDa";
        fact.answers = {fact.object_text, std::to_string(kda) + " kilodaltons"};
      }
      facts.push_back(std::move(fact));
    }
  }

  // One paper per fact, in shuffled order so ids say nothing about subjects or splits.
  std::vector<int> order(facts.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  world.shuffle(order);
  MiniDataset data;
  std::vector<int> paper_of_fact(facts.size());
  std::vector<bool> paper_has_alias(facts.size());
  std::vector<std::string> titles(facts.size());
  auto pick_other = [&](EntityType type, int not_this) {
    const auto& pool = by_type[static_cast<int>(type)];
    for (int attempt = 0; attempt < 8; ++attempt) {
      int e = pool[text.below(pool.size())];
      if (e != not_this) return e;
    }
    return not_this;
  };
  for (size_t p = 0; p < order.size(); ++p) {
    int f = order[p];
    const Fact& fact = facts[f];
    const RelationSpec& spec = specs[fact.relation];
    const Entity& s = entities[fact.subject];
    int x = pick_other(s.type, fact.subject);
    std::vector<std::pair<std::string, std::string>> vars = {
        {"{S}", s.name},
        {"{A}", s.aliases.at(0)},
        {"{O}", fact.object_text},
        {"{M}", entities[pick_other(EntityType::kMethod, -1)].name},
        {"{G}", entities[pick_other(EntityType::kOrganism, -1)].name},
        {"{X}", entities[x].name},
        {"{N}", std::to_string(text.range(12, 900))}};
    std::string title = capitalize_first(fill(text.pick(spec.titles), vars));
    bool alias = text.chance(0.75);
    std::vector<std::string> sentences;
    sentences.push_back(fill(text.pick(alias ? kIntro : kIntroNoAlias), vars));
    sentences.push_back(fill(text.pick(kMethods), vars));
    sentences.push_back(fill(text.pick(spec.statements), vars));
    sentences.push_back(fill(text.pick(kSupport), vars));
    sentences.push_back(filler_sentence(text));
    if (text.chance(0.5)) sentences.push_back(filler_sentence(text));
    if (x != fact.subject && text.chance(0.4))
      sentences.push_back(fill(text.pick(kContrast), vars));
    sentences.push_back(fill(text.pick(kConclusion), vars));
    std::string body;
    for (auto& sentence : sentences) {
      if (!body.empty()) body += ' ';
      body += capitalize_first(sentence);
    }
    data.corpus.push_back({std::to_string(30000000 + p), title + "\n" + body});
    data.paper_facts.push_back({f});
    paper_of_fact[f] = static_cast<int>(p);
    paper_has_alias[f] = alias;
    titles[f] = title;
  }

  // Questions: per split, a random subset of that split's facts (one question per fact).
  std::vector<std::vector<int>> split_facts(3);
  for (size_t f = 0; f < facts.size(); ++f)
    split_facts[facts[f].split].push_back(static_cast<int>(f));
  double fractions[3] = {1 - test_cut, config.validation_fraction, config.test_fraction};
  static const char* kSplitNames[3] = {"train", "validation", "test"};
  std::vector<QaItem>* outs[3] = {&data.train, &data.validation, &data.test};
  std::vector<MiniQuestionInfo>* infos[3] = {&data.train_info, &data.validation_info,
                                             &data.test_info};
  for (int split = 0; split < 3; ++split) {
    auto& pool = split_facts[split];
    ask.shuffle(pool);
    size_t want = static_cast<size_t>(config.questions * fractions[split] + 0.5);
    pool.resize(std::min(pool.size(), want));
    std::sort(pool.begin(), pool.end());  // stable file order: by fact
    for (int f : pool) {
      const Fact& fact = facts[f];
      const RelationSpec& spec = specs[fact.relation];
      const Entity& s = entities[fact.subject];
      MiniQuestionInfo info;
      info.fact = f;
      info.paraphrased = ask.chance(config.paraphrase_fraction);
      // A paraphrase names the subject by its alias when the gold paper spells the alias out.
      info.subject_mention = info.paraphrased && paper_has_alias[f] ? s.aliases.at(0) : s.name;
      info.relation_keyword = spec.keyword;
      info.oracle_query = s.name + " " + spec.keyword;
      std::string question =
          fill(ask.pick(info.paraphrased ? spec.paraphrased_questions : spec.plain_questions),
               {{"{S}", info.subject_mention}});
      if (question.back() != '?') question += '?';
      QaItem item;
      item.id = std::string(kSplitNames[split]) + "-" + std::to_string(outs[split]->size());
      item.question = capitalize_first(question);
      item.golden_answers = fact.answers;
      item.answer = fact.answers.front();
      item.category = spec.category;
      item.pmid = data.corpus[paper_of_fact[f]].id;
      item.paper_title = titles[f];
      item.split = kSplitNames[split];
      item.subject_mention = info.subject_mention;
      item.relation_keyword = info.relation_keyword;
      outs[split]->push_back(std::move(item));
      infos[split]->push_back(std::move(info));
    }
  }
  return data;
}

void write_papersearchqa_mini(const MiniDataset& data, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  STOA_CHECK(!ec, ErrorKind::kIo, "cannot create ", dir, ": ", ec.message());
  std::vector<nlohmann::json> records;
  records.reserve(data.corpus.size());
  for (const auto& doc : data.corpus) records.push_back(to_json(doc));
  write_jsonl(dir + "/corpus.jsonl", records);
  auto write_split = [&](const std::vector<QaItem>& items, const std::string& name) {
    std::vector<nlohmann::json> out;
    for (const auto& item : items) out.push_back(to_json(item));
    write_jsonl(dir + "/" + name + ".jsonl", out);
  };
  write_split(data.train, "train");
  write_split(data.validation, "validation");
  write_split(data.test, "test");
}

}  // namespace stoa::env
