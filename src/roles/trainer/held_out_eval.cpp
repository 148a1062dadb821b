#include "roles/trainer/held_out_eval.h"

#include <cstdio>

#include "core/error.h"

namespace stoa::trainer {

std::map<std::string, double> held_out_report(const HeldOutResult& r, int64_t step,
                                              uint64_t version) {
  std::map<std::string, double> out = {{"eval_step", static_cast<double>(step)},
                                       {"eval_version", static_cast<double>(version)},
                                       {"eval_questions", static_cast<double>(r.questions)},
                                       {"eval_mean_reward", r.mean_reward}};
  for (const auto& [k, v] : r.pass_at) out["eval_pass_at_" + std::to_string(k)] = v;
  return out;
}

std::string held_out_line(const HeldOutResult& r, int64_t step, uint64_t version) {
  auto number = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", v);
    return std::string(buf);
  };
  std::string line = cat("held-out eval at step ", step, " (version ", version, "): mean reward ",
                         number(r.mean_reward));
  for (const auto& [k, v] : r.pass_at) line += cat(", pass@", k, " ", number(v));
  line += cat(" over ", r.questions, " questions of ", r.split, " (", r.samples_per_question,
              r.samples_per_question == 1 ? " sample" : " samples", " each, ", number(r.seconds),
              " s)");
  return line;
}

}  // namespace stoa::trainer
