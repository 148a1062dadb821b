// Unit tests of the Jinja subset (src/model/jinja/): each construct the Qwen3 and LFM2 chat
// templates use, Python's semantics where they matter, every error path (with its kind and the
// line it names), and the bounds that keep a hostile template from hanging or crashing a worker.
#include <gtest/gtest.h>

#include "core/error.h"
#include "model/jinja/template.h"
#include "support/error_of.h"

namespace stoa::jinja {
namespace {

std::string render(const std::string& text, Dict vars = {}) {
  return Template::parse(text, "test.jinja").render(vars);
}

using test::error_of;

Error parse_error(const std::string& text) {
  return error_of([&] { Template::parse(text, "bad.jinja"); });
}

Error render_error(const std::string& text, Dict vars = {}) {
  return error_of([&] { render(text, std::move(vars)); });
}

Value message(const std::string& role, const std::string& content) {
  return Value(Dict{{"role", Value(role)}, {"content", Value(content)}});
}

TEST(Jinja, TextAndOutput) {
  EXPECT_EQ(render("plain text"), "plain text");
  EXPECT_EQ(render("a{{ 'b' }}c{{ 1 + 2 }}{{ x }}", {{"x", Value("X")}}), "abc3X");
  EXPECT_EQ(render("{{ undefined_name }}|"), "|");
  EXPECT_EQ(render("{# a comment #}x"), "x");
  EXPECT_EQ(render("line\n"), "line");  // one trailing newline dropped, as Jinja does
  EXPECT_EQ(render("line\n\n"), "line\n");
}

TEST(Jinja, Literals) {
  EXPECT_EQ(render("{{ 'a\\n\\t\\'b' }}"), "a\n\t'b");
  EXPECT_EQ(render("{{ \"x\" 'y' }}"), "xy");  // adjacent strings concatenate
  EXPECT_EQ(render("{{ '\\u00e9\\x41' }}"),
            "\xC3\xA9"
            "A");
  EXPECT_EQ(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 7 / 2 }}"),
            "3 -4 2 1024 3.5");
  EXPECT_EQ(render("{{ true }} {{ False }} {{ none }} {{ 1.0 }} {{ 0.1 + 0.2 }}"),
            "True False None 1.0 0.30000000000000004");
  EXPECT_EQ(render("{{ [1, 'a', [true]] }} {{ {'k': 'v', 'n': none} }}"),
            "[1, 'a', [True]] {'k': 'v', 'n': None}");
}

TEST(Jinja, WhitespaceControl) {
  EXPECT_EQ(render("a  {{- 'b' -}}  \n c"), "abc");
  EXPECT_EQ(render("a \n{%- if true -%}\n  b  \n{%- endif -%}\n c"), "abc");
  // trim_blocks: the newline after a block tag goes; lstrip_blocks: indentation before one.
  EXPECT_EQ(render("{% if true %}\n    x\n    {% endif %}\ny"), "    x\ny");
  EXPECT_EQ(render("  {% if true %}a{% endif %}"), "a");
  // Not at a line's start: the spaces stay.
  EXPECT_EQ(render("x  {% if true %}a{% endif %}"), "x  a");
  // Expressions keep their newline and indentation.
  EXPECT_EQ(render("  {{ 'a' }}\nb"), "  a\nb");
  EXPECT_EQ(render("a {#- c -#} b"), "ab");
}

TEST(Jinja, IfElifElse) {
  const char* t = "{% if x == 1 %}one{% elif x == 2 %}two{% else %}many{% endif %}";
  EXPECT_EQ(render(t, {{"x", Value(1)}}), "one");
  EXPECT_EQ(render(t, {{"x", Value(2)}}), "two");
  EXPECT_EQ(render(t, {{"x", Value(3)}}), "many");
  EXPECT_EQ(render("{% if '' or [] or {} or 0 or none %}t{% else %}f{% endif %}"), "f");
  EXPECT_EQ(render("{{ 'a' if x else 'b' }}{{ 'c' if not x }}", {{"x", Value(false)}}), "bc");
  EXPECT_EQ(render("{{ 0 or 'fallback' }} {{ 'first' and 'second' }}"), "fallback second");
}

TEST(Jinja, ForLoopVariables) {
  Dict vars = {{"xs", Value(List{Value("a"), Value("b"), Value("c")})}};
  EXPECT_EQ(render("{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
                   "{{ loop.revindex0 }}{{ loop.length }}{{ x }}{% if loop.first %}F{% endif %}"
                   "{% if loop.last %}L{% endif %};{% endfor %}",
                   vars),
            "10323aF;21213b;32103cL;");
  EXPECT_EQ(render("{% for x in xs %}{{ loop.previtem }}>{{ loop.nextitem }} {% endfor %}", vars),
            ">b a>c b> ");
  EXPECT_EQ(render("{% for x in xs[::-1] %}{{ x }}{% endfor %}", vars), "cba");
  EXPECT_EQ(render("{% for x in xs | reverse %}{{ x }}{% endfor %}", vars), "cba");
  EXPECT_EQ(render("{% for x in xs[1:] %}{{ x }}{% endfor %}{{ xs[-1] }}{{ xs[:-1] }}", vars),
            "bcc['a', 'b']");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in missing %}x{% endfor %}ok"), "ok");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }} {% endfor %}"),
            "a=1 b=2 ");
  EXPECT_EQ(render("{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}"
                   "{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %}"),
            "02");
  // What the iteration wrote before break/continue stays (Python Jinja2; @huggingface/jinja
  // drops it), and continue goes on with the inner loop.
  EXPECT_EQ(render("{% for i in range(3) %}{% for j in range(i, 4) %}{{ i }}{{ j }} "
                   "{% if j == 1 %}{% continue %}{% endif %}{% if j == 2 %}{% break %}{% endif %}"
                   "{% endfor %}{% endfor %}"),
            "00 01 02 11 12 22 ");
  EXPECT_EQ(render("{% for c in 'h\xC3\xA9' %}[{{ c }}]{% endfor %}"), "[h][\xC3\xA9]");
}

TEST(Jinja, SetScopesAndNamespace) {
  // A plain set inside a loop does not leak out; a namespace attribute does.
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1, 2] %}{% set x = i %}{% endfor %}{{ x }}"), "1");
  // ...but later iterations of the same loop see it.
  EXPECT_EQ(render("{% for i in [1, 2, 3] %}{% if loop.first %}{% set y = 'Y' %}{% endif %}"
                   "{{ y }}{% endfor %}"),
            "YYY");
  EXPECT_EQ(render("{% set ns = namespace(x=1, y='k') %}{% for i in [5, 6] %}"
                   "{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}{{ ns.y }}"),
            "12k");
  EXPECT_EQ(render("{% set a, b = [1, 2] %}{{ b }}{{ a }}"), "21");
  EXPECT_EQ(render("{% set block %}in{{ 1 }}side{% endset %}[{{ block }}]"), "[in1side]");
  Dict vars = {{"messages", Value(List{message("system", "S"), message("user", "U")})}};
  EXPECT_EQ(render("{% set messages = messages[1:] %}{{ messages | length }}"
                   "{{ messages[0].role }}",
                   vars),
            "1user");
}

TEST(Jinja, OperatorsAndTests) {
  Dict vars = {{"m", message("user", "<tool_response>x</tool_response>")}};
  EXPECT_EQ(render("{{ m.content.startswith('<tool_response>') and "
                   "m.content.endswith('</tool_response>') }}",
                   vars),
            "True");
  EXPECT_EQ(render("{{ 'x' in m.content }}{{ 'q' not in m.content }}{{ 'role' in m }}"
                   "{{ 2 in [1, 2] }}",
                   vars),
            "TrueTrueTrueTrue");
  EXPECT_EQ(render("{{ 'a' ~ 1 ~ none }}{{ [1] + [2] }}{{ 'ab' * 2 }}{{ 3 > 2 }}{{ 'a' < 'b' }}"),
            "a1None[1, 2]ababTrueTrue");
  EXPECT_EQ(render("{{ m.reasoning is defined }}{{ m.role is defined }}{{ none is none }}"
                   "{{ m.role is string }}{{ 1 is number }}{{ m is mapping }}{{ false is false }}"
                   "{{ 0 is false }}{{ m.role is not string }}",
                   vars),
            "FalseTrueTrueTrueTrueTrueTrueFalseFalse");
  EXPECT_EQ(render("{{ not (1 == 1 and 2 == 3) }}{{ -(-3) }}{{ 1 != 1.0 }}"), "True3False");
  EXPECT_EQ(render("{{ m['role'] }}{{ m.missing }}{{ m.get('missing', 'd') }}", vars), "userd");
}

TEST(Jinja, FiltersAndMethods) {
  EXPECT_EQ(render("[{{ '  a b \n' | trim }}]{{ [1, 2] | length }}{{ 'h\xC3\xA9' | length }}"),
            "[a b]22");
  EXPECT_EQ(render("{{ {'a': [1, 'x\"\\n'], 'b': none, 'c': true} | tojson }}"),
            "{\"a\": [1, \"x\\\"\\n\"], \"b\": null, \"c\": true}");
  EXPECT_EQ(render("{{ {'a': [1]} | tojson(indent=2) }}"), "{\n  \"a\": [\n    1\n  ]\n}");
  EXPECT_EQ(render("{{ missing | default('d') }}{{ '' | default('e', true) }}{{ 5 | string }}"),
            "de5");
  EXPECT_EQ(render("{{ ['a', 'b'] | join(', ') }}{{ 'Ab' | upper }}{{ 'Ab' | lower }}"
                   "{{ [3, 4] | first }}{{ [3, 4] | last }}{{ '7' | int + 1 }}"),
            "a, bABab348");
  EXPECT_EQ(render("{{ 'a</think>b</think>\n\nc'.split('</think>')[-1].lstrip('\\n') }}"), "c");
  EXPECT_EQ(
      render("[{{ '\\n\\nx\\n'.strip('\\n') }}][{{ '  x  '.rstrip() }}][{{ 'a b  c'.split() }}]"),
      "[x][  x][['a', 'b', 'c']]");
  EXPECT_EQ(render("{{ 'aXbXc'.replace('X', '-') }}{{ 'aXbXc' | replace('X', '', 1) }}"),
            "a-b-cabXc");
  EXPECT_EQ(
      render("{{ 'hello world'.title() }}{{ 'abc'.find('c') }}{{ 'abc'[1] }}{{ 'abc'[-1:] }}"),
      "Hello World2bc");
  EXPECT_EQ(render("{{ {'b': 1, 'a': 2}.keys() | list }}{{ {'b': 1}.values() | list }}"),
            "['b', 'a'][1]");
}

// Python's str methods, where @huggingface/jinja differs (it ignores strip's argument): Qwen3's
// template strips only newlines around reasoning, keeping spaces.
TEST(Jinja, StripTakesCharactersAsPython) {
  EXPECT_EQ(render("[{{ ' \\nx \\n'.lstrip('\\n') }}][{{ '\\n x \\n'.rstrip('\\n') }}]"
                   "[{{ '..x!?'.strip('.?!') }}][{{ '\\u3000x\\u00a0'.strip() }}]"),
            "[ \nx \n][\n x ][x][x]");
}

TEST(Jinja, Macros) {
  EXPECT_EQ(render("{% macro greet(name, punct='!') %}hi {{ name }}{{ punct }}{% endmacro %}"
                   "{{ greet('a') }} {{ greet('b', punct='?') }} {{ greet(name='c') }}"),
            "hi a! hi b? hi c!");
  // A macro does not see its caller's loop variables, only globals and its arguments.
  EXPECT_EQ(render("{% macro m() %}[{{ i }}{{ g }}]{% endmacro %}"
                   "{% for i in [1] %}{{ m() }}{% endfor %}",
                   {{"g", Value("G")}}),
            "[G]");
}

TEST(Jinja, GenerationTagRendersItsBody) {
  EXPECT_EQ(render("a{% generation %}b{{ 1 }}{% endgeneration %}c"), "ab1c");
  EXPECT_EQ(render("a\n  {%- generation -%}\n  b\n  {%- endgeneration -%}\n c"), "abc");
}

TEST(Jinja, RaiseException) {
  Error e = render_error("line one\n{{ raise_exception('only user and assistant roles') }}");
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
  EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("only user and assistant roles"), std::string::npos);
}

TEST(Jinja, SyntaxErrorsNameTheLine) {
  struct Case {
    const char* text;
    const char* says;
  };
  const Case cases[] = {
      {"a\n{% if x %}b", "line 2: the template ends before {% elif or else or endif %}"},
      {"{% for x in y %}\n{% endif %}", "line 2: unexpected {% endif %}"},
      {"{{ 'abc }}", "line 1: string literal is never closed"},
      {"\n{{ x | nosuchfilter }}", "line 2: unknown filter 'nosuchfilter'"},
      {"{{ x is nosuchtest }}", "unknown test 'nosuchtest'"},
      {"{% frobnicate %}", "unknown statement 'frobnicate'"},
      {"{{ x", "{{ is never closed by }}"},
      {"{# unclosed", "comment {# is never closed by #}"},
      {"{{ x $ y }}", "unexpected character '$'"},
      {"{{ (1 + 2 }}", "expected ')'"},
      {"{{ }}", "expected a value"},
      {"{% break %}", "outside a for loop"},
      {"{{ x[] }}", "empty subscript"},
      {"{{ x[1:2:3:4] }}", "at most start:stop:step"},
      {"{% macro m(a=1, b) %}{% endmacro %}", "without a default"},
      {"{% for x in y if x %}{% endfor %}", "loop filters"},
      {"{{ f(a=1, 2) }}", "positional argument follows a keyword argument"},
      {"{{ 99999999999999999999 }}", "out of range"},
      {"\xFF{{ x }}", "not valid UTF-8"},
      {"{{ '\\ud800' }}", "lone surrogate"},
      {"{{ '\\xZZ' }}", "bad \\x escape"},
  };
  for (const Case& c : cases) {
    Error e = parse_error(c.text);
    EXPECT_EQ(e.kind(), ErrorKind::kBadFormat) << c.text;
    EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos)
        << c.text << " -> " << e.what();
    EXPECT_NE(std::string(e.what()).find("bad.jinja"), std::string::npos) << e.what();
  }
}

TEST(Jinja, RuntimeErrorsNameTheLine) {
  struct Case {
    const char* text;
    const char* says;
  };
  const Case cases[] = {
      {"ok\n{{ 'a' + 1 }}", "line 2: "},
      {"{{ 'a' + 1 }}", "cannot apply '+' to a string and an integer"},
      {"{{ x.y }}", "of an undefined value"},
      {"{{ none.y }}", "of none"},
      {"{{ 1 // 0 }}", "division by zero"},
      {"{{ 9223372036854775807 + 1 }}", "integer overflow"},
      {"{{ 2 ** 64 }}", "integer overflow"},
      {"{{ 1 < 'a' }}", "cannot compare"},
      {"{{ 'abc'() }}", "not callable"},
      {"{% set x = 1 %}{% set x.y = 2 %}", "only a namespace() takes attributes"},
      {"{% for a, b in [1] %}{% endfor %}", "cannot unpack"},
      {"{% for x in 5 %}{% endfor %}", "cannot loop over an integer"},
      {"{{ 5 | length }}", "has no length"},
      {"{{ 'abc'.startswith(1) }}", "expects a string"},
      {"{{ 'abc'.strip('a', 'b') }}", "at most 1 positional"},
      {"{{ [1][0:1:0] }}", "slice step cannot be zero"},
      {"{{ range(1, 2, 0) }}", "step cannot be zero"},
      {"{{ {1: 2} }}", "dict keys must be strings"},
      {"{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", "takes 1 arguments"},
      {"{% macro m(a) %}{% endmacro %}{{ m(b=1) }}", "no argument named 'b'"},
      {"{{ 'a' in 1 }}", "'in' needs"},
      {"{{ namespace(1) }}", "only name=value"},
      {"{{ 5 | tojson(indent='x') }}", "expects an integer"},
  };
  for (const Case& c : cases) {
    Error e = render_error(c.text);
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << c.text;
    EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos)
        << c.text << " -> " << e.what();
    EXPECT_NE(std::string(e.what()).find("test.jinja line"), std::string::npos) << e.what();
  }
}

// Templates come from a hub to volunteers: none of these may hang, crash or eat the memory.
TEST(Jinja, HostileTemplatesHitBounds) {
  int check = 0;
  auto says = [&check](const Error& e, const char* what) {
    ++check;
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos)
        << "check " << check << ": " << e.what();
  };
  says(render_error("{% for i in range(1000) %}{% for j in range(1000) %}{% for k in range(10) %}"
                    "{% endfor %}{% endfor %}{% endfor %}"),
       "loop iterations");
  says(render_error("{{ range(100000000) }}"), "exceeds the template limit");
  says(render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"), "nested deeper");
  says(render_error("{{ 'x' * 100000000 }}"), "exceeds the template limit");
  says(render_error("{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(40) %}"
                    "{% set ns.s = ns.s + ns.s %}{% endfor %}"),
       "exceeds the template limit");
  says(render_error("{% set ns = namespace(l=[1]) %}{% for i in range(40) %}"
                    "{% set ns.l = ns.l + ns.l %}{% endfor %}"),
       "exceeds the template limit");
  says(render_error("{% set s = 'x' * 65536 %}{% for i in range(1000) %}{{ s }}{% endfor %}"),
       "exceeds the template limit");
  // Deep nesting is refused by the parser, before anything recurses deeply.
  says(parse_error("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}"),
       "nesting deeper");
  says(parse_error("{{ " + std::string(100000, '-') + "1 }}"), "nesting deeper");
  says(parse_error("{{ not " +
                   [] {
                     std::string s;
                     for (int i = 0; i < 100000; ++i) s += "not ";
                     return s;
                   }() +
                   "x }}"),
       "nesting deeper");
  std::string chain = "{{ 1";
  for (int i = 0; i < 100000; ++i) chain += " + 1";
  says(parse_error(chain + " }}"), "expression nested deeper");
  std::string attrs = "{{ x";
  for (int i = 0; i < 100000; ++i) attrs += ".a";
  says(parse_error(attrs + " }}"), "expression nested deeper");
  std::string ifs;
  for (int i = 0; i < 10000; ++i) ifs += "{% if true %}";
  says(parse_error(ifs), "nesting deeper");
  says(parse_error("{{ " + std::string(100000, '[') + " }}"), "nesting deeper");
}

}  // namespace
}  // namespace stoa::jinja
