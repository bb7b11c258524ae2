#pragma once
// What opening a checkpoint is asked (Checkpoint::open, checkpoint.h), and the checkpoint's name alone: the
// session, the watcher and the headers of analysis, repair and convert hold an opened checkpoint without
// reaching its catalog (sources/deepspeed/catalog.h).
#include <optional>
#include <string>

namespace ckptdoc::deepspeed {

class Checkpoint;

struct OpenOptions {
  std::optional<std::string> tag;  // default: the `latest` file, else the only tag folder
  int mp_rank = 0;  // the model-parallel rank (pipeline stage * tp + tensor rank) whose catalog to build
};

}  // namespace ckptdoc::deepspeed
