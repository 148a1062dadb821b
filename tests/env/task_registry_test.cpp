// The task registry and the generic task interface: a second task, unrelated to search (a
// calculator with one tool), registered by name and run end to end through Episode — its prompt,
// tool call, observation (loss-masked, truncated to the budget), final answer and reward.
#include <gtest/gtest.h>

#include <charconv>
#include <optional>

#include "core/error.h"
#include "env/answer_match.h"
#include "env/episode.h"
#include "env/task_registry.h"
#include "env/tasks/builtin_tasks.h"
#include "support/error_of.h"

namespace stoa::env {
namespace {

// "<calc> a op b </calc>" evaluates one integer operation (+ - *) and shows
// "<result>value</result>"; "<answer> x </answer>" ends the episode; reward = exact match of the
// last answer. Options: none but "prefix", the text before the question in the prompt.
class CalculatorTask final : public Task {
 public:
  explicit CalculatorTask(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string name() const override { return "calculator"; }
  std::string user_prompt(const QaItem& problem) const override {
    return prefix_ + problem.question + "\n";
  }
  const std::vector<std::string>& stop_strings() const override {
    static const std::vector<std::string> stops = {"</calc>", "</answer>"};
    return stops;
  }
  TurnResult on_turn(const QaItem&, std::string_view turn_text, bool tools_allowed) const override {
    TurnResult r;
    if (auto answer = between(turn_text, "<answer>", "</answer>")) {
      r.action = ActionKind::kAnswer;
      r.content = *answer;
      r.done = true;
    } else if (auto expr = between(turn_text, "<calc>", "</calc>")) {
      r.action = ActionKind::kToolCall;
      r.tool = "calc";
      r.content = *expr;
      if (tools_allowed) r.observation = {"<result>", evaluate(*expr), "</result>\n"};
    } else if (tools_allowed) {
      r.observation = {"", "Use <calc> or <answer>.\n", ""};
    }
    return r;
  }
  double reward(std::string_view response_text,
                const std::vector<std::string>& golden_answers) const override {
    size_t at = response_text.rfind("<answer>");
    if (at == std::string_view::npos) return 0.0;
    auto answer = between(response_text.substr(at), "<answer>", "</answer>");
    return answer && exact_match(*answer, golden_answers) ? 1.0 : 0.0;
  }

 private:
  static std::optional<std::string> between(std::string_view text, std::string_view open,
                                            std::string_view close) {
    size_t a = text.find(open);
    if (a == std::string_view::npos) return std::nullopt;
    size_t b = text.find(close, a + open.size());
    if (b == std::string_view::npos) return std::nullopt;
    std::string_view inner = text.substr(a + open.size(), b - a - open.size());
    while (!inner.empty() && inner.front() == ' ') inner.remove_prefix(1);
    while (!inner.empty() && inner.back() == ' ') inner.remove_suffix(1);
    return std::string(inner);
  }
  static std::string evaluate(std::string_view expr) {
    long long a = 0, b = 0;
    const char* p = expr.data();
    const char* end = expr.data() + expr.size();
    auto [after_a, ea] = std::from_chars(p, end, a);
    if (ea != std::errc() || after_a + 3 > end || after_a[0] != ' ' || after_a[2] != ' ')
      return "error";
    char op = after_a[1];
    auto [after_b, eb] = std::from_chars(after_a + 3, end, b);
    if (eb != std::errc() || after_b != end) return "error";
    if (op == '+') return std::to_string(a + b);
    if (op == '-') return std::to_string(a - b);
    if (op == '*') return std::to_string(a * b);
    return "error";
  }
  std::string prefix_;
};

TaskRegistry calculator_registry() {
  TaskRegistry r;
  r.add("calculator", [](const TaskOptions& options) {
    options.expect_only("calculator", {"prefix"});
    return std::make_unique<CalculatorTask>(options.get("prefix", "Compute: "));
  });
  return r;
}

QaItem problem() {
  QaItem q;
  q.id = "c1";
  q.question = "What is 6 * 7?";
  q.golden_answers = {"42"};
  return q;
}

TEST(TaskRegistry, SecondTaskRunsThroughTheGenericEpisode) {
  const TaskRegistry registry = calculator_registry();
  std::unique_ptr<Task> task = registry.make("calculator", {});
  ASSERT_NE(task, nullptr);
  EXPECT_EQ(task->name(), "calculator");
  ByteCodec codec;
  const QaItem q = problem();
  Episode ep(*task, q, codec, {2, 500});
  EXPECT_EQ(ep.prompt_text(), "Compute: What is 6 * 7?\n");

  // The engine stops at the tool's closing tag; bytes past it stay in the transcript.
  EXPECT_EQ(ep.stop_position("think <calc> 6 * 7 </calc> more"), 26u);
  const std::string turn1 = "think <calc> 6 * 7 </calc>";
  Decision d = ep.step(codec.encode(turn1));
  EXPECT_EQ(d.action, ActionKind::kToolCall);
  EXPECT_EQ(d.tool, "calc");
  EXPECT_EQ(d.content, "6 * 7");
  EXPECT_FALSE(d.done);
  EXPECT_EQ(codec.decode(d.appended), "<result>42</result>\n");
  const size_t n_observation = d.appended.size();

  const std::string turn2 = "<answer> 42 </answer>";
  d = ep.step(codec.encode(turn2));
  EXPECT_EQ(d.action, ActionKind::kAnswer);
  EXPECT_TRUE(d.tool.empty());
  EXPECT_EQ(d.content, "42");
  EXPECT_TRUE(d.done);
  EXPECT_TRUE(ep.done());
  EXPECT_EQ(ep.response_text(), turn1 + "<result>42</result>\n" + turn2);
  EXPECT_EQ(ep.reward(), 1.0);

  // Loss mask: prompt 0, model turns 1, the tool's observation 0.
  EXPECT_TRUE(d.appended.empty());  // the final decision appends nothing
  const size_t p = ep.prompt_length(), n1 = turn1.size();
  ASSERT_EQ(ep.loss_mask().size(), p + n1 + n_observation + turn2.size());
  for (size_t i = 0; i < ep.loss_mask().size(); ++i) {
    const bool model = (i >= p && i < p + n1) || i >= p + n1 + n_observation;
    EXPECT_EQ(ep.loss_mask()[i], model ? 1 : 0) << i;
  }
}

TEST(TaskRegistry, SecondTaskObservationTruncatedAndFinalTurnToolless) {
  const TaskRegistry registry = calculator_registry();
  std::unique_ptr<Task> task = registry.make("calculator", {{"prefix", "Q: "}});
  ByteCodec codec;
  const QaItem q = problem();
  // A 12-token budget keeps "<result>" and "</result>\n" (18 bytes) only as a plain prefix cut.
  Episode ep(*task, q, codec, {1, 12});
  EXPECT_EQ(ep.prompt_text(), "Q: What is 6 * 7?\n");
  Decision d = ep.step(codec.encode("<calc> 123456 * 1000000 </calc>"));
  EXPECT_TRUE(d.observation_truncated);
  EXPECT_EQ(codec.decode(d.appended), "<result>1234");
  EXPECT_TRUE(d.next_turn_final);
  // In the final turn a tool call runs nothing and ends the episode unanswered.
  d = ep.step(codec.encode("<calc> 1 + 1 </calc>"));
  EXPECT_EQ(d.action, ActionKind::kToolCall);
  EXPECT_TRUE(d.done);
  EXPECT_TRUE(d.appended.empty());
  EXPECT_EQ(ep.reward(), 0.0);
}

TEST(TaskRegistry, UnknownNameListsTheKnownOnes) {
  TaskRegistry registry = calculator_registry();
  registry.add("echo", [](const TaskOptions&) { return std::make_unique<CalculatorTask>(""); });
  EXPECT_EQ(registry.names(), (std::vector<std::string>{"calculator", "echo"}));
  EXPECT_TRUE(registry.contains("calculator"));
  EXPECT_FALSE(registry.contains("search"));
  const Error unknown =
      stoa::test::error_of([&] { registry.make("search", {}); }, "an unknown task was built");
  EXPECT_EQ(unknown.kind(), ErrorKind::kNotFound);
  EXPECT_STREQ(unknown.what(), "unknown task 'search' (known tasks: calculator, echo)");
  // "echo" builds a task that calls itself "calculator": the hub would send workers a name that
  // stands for another task.
  const Error misnamed =
      stoa::test::error_of([&] { registry.make("echo", {}); }, "a misnamed task was built");
  EXPECT_EQ(misnamed.kind(), ErrorKind::kInternal);
  EXPECT_STREQ(misnamed.what(), "task registered as 'echo' calls itself 'calculator'");
}

TEST(TaskRegistry, RegistrationAndOptionErrors) {
  TaskRegistry registry = calculator_registry();
  EXPECT_THROW(registry.add("calculator", [](const TaskOptions&) { return nullptr; }), Error);
  EXPECT_THROW(registry.add("", [](const TaskOptions&) { return nullptr; }), Error);
  EXPECT_THROW(registry.add("empty", TaskFactory{}), Error);
  EXPECT_EQ(registry.names(), std::vector<std::string>{"calculator"});
  const Error misspelt = stoa::test::error_of(
      [&] {
        registry.make("calculator", {{"prefx", "typo"}});
      },
      "a misspelt option was accepted");
  EXPECT_EQ(misspelt.kind(), ErrorKind::kInvalidArgument);
  EXPECT_STREQ(misspelt.what(), "task 'calculator': unknown option 'prefx' (accepted: prefix)");
  const TaskOptions numbers{{"n", "12"}, {"bad", "12x"}, {"empty", ""}};
  EXPECT_EQ(numbers.get_int("t", "n", 3), 12);
  EXPECT_EQ(numbers.get_int("t", "absent", 3), 3);
  EXPECT_THROW(numbers.get_int("t", "bad", 3), Error);
  EXPECT_THROW(numbers.get_int("t", "empty", 3), Error);
  EXPECT_EQ(numbers.get("absent", "x"), "x");
  EXPECT_TRUE(numbers.has("n"));
}

// A task's keys: the run's are shared by every machine (the hub sends them), the local ones are
// each machine's own, and a machine may not override the run's.
TEST(TaskRegistry, RunOptionsAndEachMachinesOwn) {
  TaskRegistry registry;
  registry.add(
      "calculator",
      [](const TaskOptions& o) { return std::make_unique<CalculatorTask>(o.get("prefix")); },
      TaskKeys{.accepted = {"prefix", "server"}, .local = {"server"}, .paths = {}});
  const TaskOptions hubs{{"prefix", "Q: "}, {"server", "http://hub-only:1"}};
  const TaskOptions run = registry.run_options("calculator", hubs);
  EXPECT_EQ(run, (TaskOptions{{"prefix", "Q: "}})) << "the hub's own server is not sent";
  const TaskOptions mine =
      registry.with_local("calculator", run, TaskOptions{{"server", "http://mine:2"}});
  EXPECT_EQ(mine, (TaskOptions{{"prefix", "Q: "}, {"server", "http://mine:2"}}));
  const Error overridden = stoa::test::error_of(
      [&] {
        registry.with_local("calculator", run, TaskOptions{{"prefix", "A: "}});
      },
      "a worker overrode the run's option");
  EXPECT_EQ(overridden.kind(), ErrorKind::kInvalidArgument);
  EXPECT_NE(std::string(overridden.what()).find("'prefix' is the run's"), std::string::npos)
      << overridden.what();
  EXPECT_NE(std::string(overridden.what()).find("may set only: server"), std::string::npos)
      << overridden.what();
  // Checked without building; the registry checks the keys before the factory runs.
  EXPECT_NO_THROW(registry.check_options("calculator", hubs));
  EXPECT_THROW(registry.check_options("calculator", TaskOptions{{"sever", "x"}}), Error);
  EXPECT_THROW(registry.make("calculator", TaskOptions{{"sever", "x"}}), Error);
  EXPECT_THROW(registry.check_options("chess", {}), Error);
  // A local or path key must be an accepted one.
  EXPECT_THROW(registry.add(
                   "bad", [](const TaskOptions&) { return std::make_unique<CalculatorTask>(""); },
                   TaskKeys{.accepted = {"a"}, .local = {"b"}, .paths = {}}),
               Error);
  // The built-in tasks declare theirs: search's index and server are each machine's own, its
  // topk the run's; every option of "http" (where its environment is) is the hub's own.
  const TaskRegistry& builtin = builtin_tasks();
  EXPECT_EQ(builtin.names(), (std::vector<std::string>{"http", "search"}));
  EXPECT_EQ(builtin.run_options("search", {{"index", "/i"}, {"topk", "5"}}),
            (TaskOptions{{"topk", "5"}}));
  EXPECT_EQ(builtin.keys("search").paths, std::vector<std::string>{"index"});
}

}  // namespace
}  // namespace stoa::env
