// The Jinja interpreter on its own: Hugging Face environment settings, jinja2 semantics the real
// templates rely on, provenance tags, sandbox limits and clear errors on malformed input.
#include <gtest/gtest.h>

#include "test_support.h"

#include <nlohmann/json.hpp>

#include "keel/chat/jinja_template.h"
#include "keel/util/error.h"

namespace {

using keel::jinja::Template;
using keel::jinja::Value;

std::string render(const std::string& source, const std::string& context_json = "{}",
                   const keel::jinja::RenderOptions& options = {}) {
  keel::jinja::DictData context;
  auto parsed = nlohmann::ordered_json::parse(context_json);
  for (const auto& [k, v] : parsed.items()) context.set(k, keel::jinja::value_from_json(v));
  return Template(source).render(context, options).text();
}

std::string error_of(const std::string& source, const std::string& context_json = "{}",
                     const keel::jinja::RenderOptions& options = {}) {
  try {
    render(source, context_json, options);
  } catch (const keel::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(JinjaWhitespace, TrimAndLstripBlocks) {
  EXPECT_EQ(render("{% if true %}\n  a\n{% endif %}\nb"), "  a\nb");
  EXPECT_EQ(render("x\n    {% if true %}y{% endif %}"), "x\ny");
  EXPECT_EQ(render("a  {%- if true -%}  b  {%- endif %}"), "ab");
  EXPECT_EQ(render("a\n{{- 'b' -}}\n c"), "abc");
  EXPECT_EQ(render("  {%+ if true %}x{% endif %}"), "  x");
  EXPECT_EQ(render("{# note #}\nz"), "z");
  EXPECT_EQ(render("end\n"), "end");  // no keep_trailing_newline
  EXPECT_EQ(render("{% raw %}{{ x }}{% endraw %}"), "{{ x }}");
}

TEST(JinjaLoops, LoopVariablesAndControls) {
  EXPECT_EQ(render("{% for x in [1,2,3] %}{{ loop.index }}{{ loop.first }}{{ loop.last }}{{ loop.revindex0 }},{% endfor %}"),
            "1TrueFalse2,2FalseFalse1,3FalseTrue0,");
  EXPECT_EQ(render("{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x > 4 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
            "0134");
  EXPECT_EQ(render("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in [1,2,3,4] if x is even %}{{ x }}/{{ loop.length }} {% endfor %}"), "2/2 4/2 ");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}"), "a=1;b=2;");
  EXPECT_EQ(render("{% for x in 'ab' %}{{ loop.cycle('x', 'y') }}{{ loop.previtem is defined }}{% endfor %}"), "xFalseyTrue");
}

TEST(JinjaScopes, SetNamespaceAndLoopScope) {
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for i in [1,2,3] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"), "6");
  EXPECT_EQ(render("{% set a, b = [1, 2] %}{{ b }}{{ a }}"), "21");
  EXPECT_EQ(render("{% set t %}  in {{ 'block' }} {% endset %}[{{ t | trim }}]"), "[in block]");
  EXPECT_EQ(render("{% if true %}{% set y = 5 %}{% endif %}{{ y }}"), "5");
}

TEST(JinjaMacros, DefaultsCallerAndRecursion) {
  EXPECT_EQ(render("{% macro greet(name, punct='!') %}hi {{ name }}{{ punct }}{% endmacro %}{{ greet('bob') }} {{ greet('al', punct='?') }}"),
            "hi bob! hi al?");
  EXPECT_EQ(render("{% macro wrap() %}<{{ caller() }}>{% endmacro %}{% call wrap() %}inner{% endcall %}"), "<inner>");
  EXPECT_EQ(render("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}"), "321");
  EXPECT_EQ(render("{% filter upper %}shout{% endfilter %}"), "SHOUT");
}

TEST(JinjaExpressions, PythonSemantics) {
  EXPECT_EQ(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1 + 1.5 }}"), "3 -4 1 3.5 1024 2.5");
  EXPECT_EQ(render("{{ 'abcdef'[1:4] }} {{ 'abcdef'[::-1] }} {{ [1,2,3][-1] }} {{ 'héllo'[1] }} {{ 'héllo' | length }}"),
            "bcd fedcba 3 é 5");
  EXPECT_EQ(render("{{ 'a' ~ 1 ~ none }} {{ [1, 'x', none, true] }} {{ {'k': 'v'} }}"), "a1None [1, 'x', None, True] {'k': 'v'}");
  EXPECT_EQ(render("{{ 1 if false }}|{{ 'y' if 0 else 'n' }}|{{ not 1 < 2 < 3 }}|{{ 'b' in 'abc' }}|{{ 3 not in [1] }}"), "|n|False|True|True");
  EXPECT_EQ(render("{{ 1.0 }} {{ 1e20 }} {{ 0.0001 }} {{ 0.1 + 0.2 }}"), "1.0 1e+20 0.0001 0.30000000000000004");
  EXPECT_EQ(render("{{ '  x  '.strip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'Hi'.upper() }}|{{ 'ab'.startswith(('x', 'a')) }}"),
            "x|['a', 'b', '', 'c']|['a', 'b']|HI|True");
  EXPECT_EQ(render("{{ d.get('a') }} {{ d.get('z', 0) }} {{ d['items'] }} {{ d.items() | list }}", R"({"d": {"a": 1, "items": 2}})"),
            "1 0 2 [('a', 1), ('items', 2)]");
  EXPECT_EQ(render("{{ x is defined }} {{ x is undefined }} {{ none is none }} {{ {} is mapping }} {{ 'a' is string }} {{ 1 is number }}"),
            "False True True True True True");
}

TEST(JinjaFilters, CommonFilters) {
  EXPECT_EQ(render("{{ [3,1,2] | sort | join(',') }} {{ ['a','B'] | map('upper') | list }} {{ [1,2,3] | select('odd') | list }}"),
            "1,2,3 ['A', 'B'] [1, 3]");
  EXPECT_EQ(render("{{ ms | selectattr('role', 'equalto', 'user') | map(attribute='c') | join }}",
                   R"({"ms": [{"role": "user", "c": "a"}, {"role": "x", "c": "b"}, {"role": "user", "c": "c"}]})"),
            "ac");
  EXPECT_EQ(render("{{ x | default('d') }} {{ '' | default('e', true) }} {{ 'a\nb' | indent(2) }} {{ 'x' | indent(2, true) }}"),
            "d e a\n  b   x");
  EXPECT_EQ(render("{{ {'b': 1, 'A': 2} | dictsort }} {{ 'x' | tojson }} {{ '4' | int + 1 }} {{ 'a<b' | escape }}"),
            "[('A', 2), ('b', 1)] \"x\" 5 a&lt;b");
}

TEST(JinjaToJson, MatchesPythonJsonDumps) {
  std::string ctx = R"({"v": {"s": "é\"\n\u0001", "n": [1, 2.5, true, null], "e": {}, "l": []}})";
  EXPECT_EQ(render("{{ v | tojson }}", ctx), R"({"s": "é\"\n\u0001", "n": [1, 2.5, true, null], "e": {}, "l": []})");
  EXPECT_EQ(render("{{ v.n | tojson(indent=2) }}", ctx), "[\n  1,\n  2.5,\n  true,\n  null\n]");
  EXPECT_EQ(render("{{ {'b': 1, 'a': 2} | tojson(sort_keys=true, separators=(',', ':')) }}"), R"({"a":2,"b":1})");
  EXPECT_EQ(render("{{ 'é' | tojson(ensure_ascii=true) }}"), R"("\u00e9")");
  EXPECT_NE(error_of("{{ [1] | map('string') | tojson }}"), "");  // a generator is not serializable
}

TEST(JinjaGlobals, RaiseExceptionAndInjectableClock) {
  EXPECT_NE(error_of("{{ raise_exception('bad role') }}").find("bad role"), std::string::npos);
  keel::jinja::RenderOptions options;
  options.now = [] { return keel::test::utc_time(2026, 3, 14, 9, 26, 0); };
  EXPECT_EQ(render("{{ strftime_now('%d %b %Y %H:%M %A') }}", "{}", options), "14 Mar 2026 09:26 Saturday");
}

TEST(JinjaSandbox, ImmutableAndBounded) {
  EXPECT_NE(error_of("{% set l = [] %}{{ l.append(1) }}").find("SecurityError"), std::string::npos);
  EXPECT_NE(error_of("{{ d.update({}) }}", R"({"d": {}})").find("SecurityError"), std::string::npos);
  keel::jinja::RenderOptions small;
  small.max_loop_iterations = 1000;
  EXPECT_NE(error_of("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}", "{}", small).find("loop iterations"),
            std::string::npos);
  small.max_output_bytes = 100;
  EXPECT_NE(error_of("{% for i in range(50) %}xxxxx{% endfor %}", "{}", small).find("bytes"), std::string::npos);
  EXPECT_NE(error_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").find("nested"), std::string::npos);
  EXPECT_NE(error_of("{{ 'ab' * 100000000 }}"), "");
  EXPECT_NE(error_of("{% include 'x' %}"), "");
  EXPECT_NE(error_of("{{ x.__class__ }}", R"({"x": 1})"), "x");
}

TEST(JinjaErrors, UndefinedAndTypeErrors) {
  EXPECT_EQ(render("{{ missing }}{{ missing is defined }}"), "False");
  EXPECT_NE(error_of("{{ missing.attr }}").find("'missing' is undefined"), std::string::npos);
  EXPECT_NE(error_of("{{ d.x.y }}", R"({"d": {}})").find("has no attribute 'x'"), std::string::npos);
  EXPECT_NE(error_of("{{ 'a' + {} }}").find("can only concatenate str"), std::string::npos);
  EXPECT_NE(error_of("{{ 1 + 'a' }}").find("TypeError"), std::string::npos);
  EXPECT_NE(error_of("line one\n{% if true %}\n{{ missing.attr }}{% endif %}").find("(template line 3)"), std::string::npos);
}

TEST(JinjaErrors, MalformedTemplatesGiveClearErrors) {
  const char* bad[] = {"{% if x %}", "{% for %}", "{{ 1 + }}", "{% endif %}", "{{ 'unterminated }}", "{% set %}",
                       "{{ a | nosuchfilter }}", "{% if x is nosuchtest %}{% endif %}", "{% bogus %}", "{{ (((( }}",
                       "{# never closed", "{% break %}", "{% for x in y recursive %}{% endfor %}", "{{ x[1:2:3:4] }}", "{% macro m( %}{% endmacro %}"};
  for (const char* src : bad) {
    try {
      Template t(src);
      ADD_FAILURE() << "no error for " << src;
    } catch (const keel::Error& e) {
      EXPECT_NE(std::string(e.what()), "") << src;
    }
  }
  std::string deep(10000, '(');
  EXPECT_THROW(Template("{{ " + deep + " }}"), keel::Error);
  std::string nested;
  for (int i = 0; i < 5000; ++i) nested += "{% if x %}";
  EXPECT_THROW(Template{nested}, keel::Error);
}

TEST(JinjaProvenance, TagsSurviveStringOperations) {
  keel::jinja::DictData context;
  context.set("u", Value::string("  hello world  ", 3));
  context.set("d", keel::jinja::value_from_json(nlohmann::ordered_json::parse(R"({"k": [1, "v"]})"), 2));
  auto out = Template("<{{ u | trim }}|{{ u.split()[1] }}|{{ d | tojson }}|{{ 'x' + u.strip() }}>").render(context);
  EXPECT_EQ(out.text(), R"(<hello world|world|{"k": [1, "v"]}|xhello world>)");
  std::vector<keel::jinja::TagRun> want = {{1, 12, 3}, {13, 18, 3}, {19, 34, 2}, {36, 47, 3}};
  EXPECT_EQ(out.runs(), want);
}
