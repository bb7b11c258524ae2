#pragma once
// Which source reads a path: the built-in sources (sources/registry.cpp, one line each) after any registered
// at run time, the first whose probe accepts. The catalog source (DeepSpeed and the formats it opens) is last
// and takes every path the others decline, so that its open says why a path is not a checkpoint.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ckptdoc/sources/source.h"

namespace ckptdoc::sources {

// Never null.
std::shared_ptr<const Source> find_source(const std::string& path);
// find_source, refused (Source::refusal) when it cannot do `command`.
std::shared_ptr<const Source> source_for(const std::string& path, Command command);

// Every source in probe order.
std::vector<std::shared_ptr<const Source>> all_sources();

// A source probed before the built-in ones (tests, plug-ins); unregister_source removes it by name.
void register_source(std::shared_ptr<const Source> source);
void unregister_source(std::string_view name);

}  // namespace ckptdoc::sources
