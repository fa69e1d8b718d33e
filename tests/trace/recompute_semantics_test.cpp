// Recompute semantics: the default table, declarations in the trace header (read, written,
// recorded) and the reader's errors for malformed ones.
#include <stash/trace/recompute_semantics.hpp>
#include <stash/trace/trace_error.hpp>
#include <stash/trace/trace_reader.hpp>
#include <stash/trace/trace_recorder.hpp>
#include <stash/trace/trace_writer.hpp>

#include <doctest/doctest.h>

#include <string>

namespace STASH_UNITY_ID {

namespace {

std::string const body =
    "t 0 16 act a\n"
    "t 1 16 act b\n"
    "o aten::bernoulli_.float 0 0\n"
    "o aten::relu 0 1\n"
    "o my::custom 1 1\n";

stash::trace_error read_error(std::string const& header)
{
  try {
    (void)stash::parse_trace("# stash-trace v1 " + header + "\n" + body, "decl.trace");
  } catch (stash::trace_error const& e) {
    return e;
  }
  FAIL("no trace_error for header '" << header << "'");
  return stash::trace_error("", 0, "");
}

}  // namespace

TEST_CASE("the default table: pure ops yes, batch norm skip_state, rng ops rng, unknown no")
{
  CHECK(stash::default_recompute_class("aten::convolution") == stash::recompute_class::yes);
  CHECK(stash::default_recompute_class("aten::relu_") == stash::recompute_class::yes);
  CHECK(stash::default_recompute_class("aten::native_batch_norm") ==
        stash::recompute_class::skip_state);
  CHECK(stash::default_recompute_class("aten::bernoulli_.float") == stash::recompute_class::rng);
  CHECK(stash::default_recompute_class("aten::sgd_step") == stash::recompute_class::no);
  // Transformers' forward ops beyond data/traces' models: attention scores with a mask, token
  // embeddings, Swin's shifted windows, group norm; torch.rand* draws are rng.
  for (auto const* op :
       {"aten::baddbmm", "aten::embedding", "aten::roll", "aten::constant_pad_nd",
        "aten::native_group_norm", "aten::masked_fill.Scalar", "aten::index.Tensor"}) {
    CAPTURE(op);
    CHECK(stash::default_recompute_class(op) == stash::recompute_class::yes);
  }
  CHECK(stash::default_recompute_class("aten::randn") == stash::recompute_class::rng);
  CHECK(stash::default_recompute_class("aten::native_dropout") == stash::recompute_class::rng);
  CHECK(stash::default_recompute_class("") == stash::recompute_class::no);
  CHECK_FALSE(stash::recomputable(stash::recompute_class::rng));
  CHECK(stash::recomputable(stash::recompute_class::skip_state));
  // The table is sorted (default_recompute_class binary-searches it).
  auto const& table = stash::detail::recompute_defaults;
  for (std::size_t i = 1; i < table.size(); ++i) { CHECK(table[i - 1].op < table[i].op); }
}

TEST_CASE("declarations by name and by index override the table; index wins over name")
{
  auto const t = stash::parse_trace(
      "# stash-trace v1 recompute.aten::bernoulli_.float=yes recompute.aten::relu=no "
      "recompute@1=skip_state recompute.my::custom=yes\n" +
          body,
      "decl.trace");
  auto const classes = stash::resolve_recompute_classes(t);
  REQUIRE(classes.size() == 3);
  CHECK(classes[0] == stash::recompute_class::yes);
  CHECK(classes[1] == stash::recompute_class::skip_state);
  CHECK(classes[2] == stash::recompute_class::yes);
  auto const plain = stash::resolve_recompute_classes(
      stash::parse_trace("# stash-trace v1\n" + body, "plain.trace"));
  CHECK(plain[0] == stash::recompute_class::rng);
  CHECK(plain[1] == stash::recompute_class::yes);
  CHECK(plain[2] == stash::recompute_class::no);
}

TEST_CASE("a malformed recompute declaration is a trace_error on the header line")
{
  auto const bad_value = read_error("model=x recompute.aten::relu=maybe");
  CHECK(bad_value.file() == "decl.trace");
  CHECK(bad_value.line() == 1);
  CHECK(std::string(bad_value.what()).starts_with("decl.trace:1: bad recompute declaration"));
  CHECK(bad_value.reason().find("yes, no or skip_state") != std::string::npos);
  CHECK(read_error("recompute@x1=yes").reason().find("not an op index") != std::string::npos);
  CHECK(read_error("recompute.=yes").reason().find("missing the op name") != std::string::npos);
  CHECK(read_error("recompute@=no").reason().find("missing the op name") != std::string::npos);
  auto const out_of_range = read_error("recompute@3=yes");
  CHECK(out_of_range.line() == 1);
  CHECK(out_of_range.reason().find("out of range (the trace has 3 ops)") != std::string::npos);
  CHECK(read_error("recompute.aten::relu=rng").reason().find("must be yes") != std::string::npos);
}

TEST_CASE("a header line after blank and comment lines is still the line errors name")
{
  try {
    (void)stash::parse_trace("\n# stash-trace v1 recompute@9=yes\n" + body, "late.trace");
    FAIL("no trace_error");
  } catch (stash::trace_error const& e) {
    CHECK(e.line() == 2);
  }
}

TEST_CASE("the recorder declares per name and per op; the declarations survive a round trip")
{
  stash::trace_recorder rec;
  rec.declare_recompute("aten::bernoulli_.float", stash::recompute_class::yes);
  auto const a = rec.allocate(16, stash::storage_kind::act, "a");
  auto const b = rec.allocate(16, stash::storage_kind::act, "b");
  rec.op("aten::bernoulli_.float", {a}, {a});
  auto const relu = rec.op("aten::relu", {a}, {b});
  rec.declare_recompute(relu, stash::recompute_class::no);
  CHECK_THROWS_AS(rec.declare_recompute(relu, stash::recompute_class::rng), stash::logic_error);
  auto const back = stash::parse_trace(stash::to_trace_text(rec.trace()), "recorded.trace");
  CHECK(back == rec.trace());
  auto const classes = stash::resolve_recompute_classes(back);
  CHECK(classes[0] == stash::recompute_class::yes);
  CHECK(classes[1] == stash::recompute_class::no);
}

}  // namespace STASH_UNITY_ID
