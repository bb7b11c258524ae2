#include "sources/deepspeed/file_roles.h"

#include <charconv>
#include <regex>
#include <string>

namespace ckptdoc::deepspeed::detail {
namespace {

int to_int(const std::ssub_match& m) {
  int v = -1;
  const std::string s = m.str();
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return -1;  // too large for int
  return v;
}

}  // namespace

std::optional<FileNameInfo> classify_file_name(std::string_view file_name) {
  static const std::regex model(R"(^mp_rank_(\d+)_model_states\.pt$)");
  static const std::regex zero3_model(R"(^zero_pp_rank_(\d+)_mp_rank_(\d+)_model_states\.pt$)");
  static const std::regex optim(R"(^(bf16_|fp16_)?zero_pp_rank_(\d+)_mp_rank_(\d+)(_?)optim_states\.pt$)");
  static const std::regex layer(R"(^layer_(\d+)(-model_(\d+))?-model_states\.pt$)");
  static const std::regex expert(R"(^layer_(\d+)_expert_(\d+)_mp_rank_(\d+)_model_states\.pt$)");
  static const std::regex old_expert(R"(^expert_(\d+)_mp_rank_(\d+)_model_states\.pt$)");
  static const std::regex expert_optim(R"(^expp_rank_(\d+)_mp_rank_(\d+)_optim_states\.pt$)");

  const std::string name(file_name);
  std::smatch m;
  FileNameInfo info;
  if (std::regex_match(name, m, model)) {
    info.role = FileRole::Model;
    info.mp_rank = to_int(m[1]);
  } else if (std::regex_match(name, m, zero3_model)) {
    info.role = FileRole::Model;
    info.dp_rank = to_int(m[1]);
    info.mp_rank = to_int(m[2]);
    info.zero3_model = true;
  } else if (std::regex_match(name, m, optim)) {
    info.role = FileRole::Optim;
    info.bf16_prefix = m[1].str() == "bf16_";
    info.dp_rank = to_int(m[2]);
    info.mp_rank = to_int(m[3]);
    info.old_optim_name = m[4].str().empty();
  } else if (std::regex_match(name, m, layer)) {
    info.role = FileRole::Layer;
    info.layer = to_int(m[1]);
    info.mp_rank = m[3].matched ? to_int(m[3]) : 0;
    info.tp_named = m[3].matched;
  } else if (std::regex_match(name, m, expert)) {
    info.role = FileRole::Expert;
    info.layer = to_int(m[1]);
    info.expert = to_int(m[2]);
    info.mp_rank = to_int(m[3]);
  } else if (std::regex_match(name, m, old_expert)) {
    info.role = FileRole::Expert;
    info.expert = to_int(m[1]);
    info.mp_rank = to_int(m[2]);
  } else if (std::regex_match(name, m, expert_optim)) {
    info.role = FileRole::ExpertOptim;
    info.ep_rank = to_int(m[1]);
    info.mp_rank = to_int(m[2]);
  } else {
    return std::nullopt;
  }
  // a number that overflowed int
  if (info.mp_rank < 0 && info.role != FileRole::Layer) return std::nullopt;
  if ((info.role == FileRole::Layer && (info.layer < 0 || info.mp_rank < 0)) ||
      (info.role == FileRole::ExpertOptim && info.ep_rank < 0) ||
      (info.role == FileRole::Expert && info.expert < 0))
    return std::nullopt;
  return info;
}

}  // namespace ckptdoc::deepspeed::detail
