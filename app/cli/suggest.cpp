#include "suggest.h"

#include <algorithm>

namespace ckptdoc::cli {

namespace {

// Optimal string alignment distance: insertions, deletions, substitutions and swaps of neighbours cost 1.
size_t distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

std::vector<std::string> subcommand_names(CLI::App& app) {
  std::vector<std::string> out;
  for (const CLI::App* s : app.get_subcommands([](const CLI::App*) { return true; }))
    if (!s->get_group().empty()) out.push_back(s->get_name());  // hidden ones are not suggested
  return out;
}

std::vector<std::string> option_names(const CLI::App& app) {
  std::vector<std::string> out;
  for (const CLI::Option* o : app.get_options())
    for (const auto& l : o->get_lnames()) out.push_back("--" + l);
  return out;
}

}  // namespace

std::optional<std::string> closest(const std::string& word, const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  size_t best_d = 0;
  for (const auto& c : candidates) {
    const size_t d = distance(word, c);
    if (!best || d < best_d) best = c, best_d = d;
  }
  // A typo is near: at most 2 edits, and fewer than half the word's letters.
  if (!best || best_d == 0 || best_d > 2 || 2 * best_d >= word.size()) return std::nullopt;
  return best;
}

std::string suggestions(CLI::App& app, int argc, char** argv) {
  std::string out;
  CLI::App* sub = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--", 0) == 0 && arg.size() > 2) {
      const std::string name = arg.substr(0, arg.find('='));
      const CLI::App& scope = sub ? *sub : app;
      if (scope.get_option_no_throw(name) || app.get_option_no_throw(name)) continue;
      if (const auto c = closest(name, option_names(scope)))
        out += "unknown option '" + name + "': did you mean '" + *c + "'?\n";
    } else if (!sub && arg[0] != '-') {
      const auto named = app.get_subcommands([&arg](CLI::App* s) { return s->check_name(arg); });
      if (!named.empty()) {
        sub = named.front();
        continue;
      }
      if (const auto c = closest(arg, subcommand_names(app)))
        out += "unknown command '" + arg + "': did you mean '" + *c + "'?\n";
      break;
    }
  }
  return out;
}

}  // namespace ckptdoc::cli
