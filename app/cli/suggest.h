#pragma once
// "Did you mean …?" for a mistyped subcommand or option: CLI11 says only that an argument was not expected.
#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

namespace ckptdoc::cli {

// The candidate closest to `word` when it is near enough to be a typo of it (edit distance, transpositions
// counted once), else nothing.
std::optional<std::string> closest(const std::string& word, const std::vector<std::string>& candidates);

// One line per argument of argv that names no subcommand or option of `app`, with the one it probably meant;
// empty when there is nothing to suggest.
std::string suggestions(CLI::App& app, int argc, char** argv);

}  // namespace ckptdoc::cli
