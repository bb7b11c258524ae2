#pragma once
// Pickle safety: what a plain torch.load(weights_only=False) of a file would import and call, judged by one
// documented rule. ckptdoc itself never runs any of it (the unpickler is inert); the user's Python later
// might.
//
// Each GLOBAL is judged by what it reaches, not by how it reads: find_class imports the module and looks the
// name up on it attribute by attribute (a dotted name is walked at protocol 4 and later), and an attribute
// that is a module the package imports continues the walk there: torch / os.system is os.system,
// torch.serialization / os.system too, torch / fx.graph_module._exec_with_source is torch.fx's exec.
//
// The rule (README "Pickle safety"):
//   error    a callable that runs code (os/posix/subprocess/builtins eval, exec, getattr, __import__, open,
//            ..., pickle.loads and other nested loaders, and the exec, import, process and file paths inside
//            allow-listed packages: torch.fx, torch.serialization, torch.jit, numpy.testing, numpy.ctypeslib,
//            ...), wherever it is reached, even if only named; a name walked through a dunder (__globals__,
//            __builtins__, __class__); any other callable that torch.load would invoke (REDUCE, NEWOBJ,
//            NEWOBJ_EX, INST, OBJ, BUILD) outside the allow-listed packages; and any call of a computed value
//            (the result of another call)
//   warning  a callable of an allow-listed package (DeepSpeed of any version, torch, numpy, collections) that
//            ckptdoc does not know by name: torch.load would call it, and a package is not a function; and a
//            module torch.load would import for a name it never calls, outside the allow list (importing a
//            module runs its top-level code)
//   (none)   the known reconstructors of torch, numpy, collections and builtins, DeepSpeed's checkpoint
//            classes, argparse.Namespace, and enum members looked up on them (getattr(ZeroStageEnum,
//            'gradients'))
#include <cstdint>
#include <string>
#include <vector>

#include "ckptdoc/format/unpickler.h"

namespace ckptdoc {

class PickleUseMemo;  // pickle_use_memo.h

struct PickleHazard {
  std::string file;      // as given to the reader
  std::string record;    // e.g. "archive/data.pkl", "object pickle"
  std::string callable;  // e.g. "posix.system", "<result of builtins.getattr>"
  // What the callable's GLOBAL reaches when that is not what it reads as: "os.system" for torch / os.system
  // (an attribute walk through the os module torch imports); else empty.
  std::string reaches;
  std::string
      how;  // "REDUCE", "NEWOBJ", "BUILD", "INST", "OBJ", "persistent id", "GLOBAL (named, not called)",
            // with " in a nested pickle (via pickle.loads)" when it sits inside pickled bytes
  std::string severity;         // "error" | "warning"
  std::string why;              // the rule that applied, in plain words
  uint64_t offset = 0;          // first occurrence in the record
  uint64_t count = 0;           // occurrences
  std::string message() const;  // one line: file, record, callable, how, why
};

// Judges every recorded use of a pickle stream by the rule above; only uses that carry a hazard are returned,
// errors first.
std::vector<PickleHazard> assess_pickle_uses(const std::vector<PickleUse>& uses, const std::string& file);

// The hazards of one file on disk: its pickles as far as they can be read (also when ckptdoc refuses the
// file: torch.load may still run it). Empty for files that are not torch.save files. `display` names it in
// messages.
// With a memo, a pickle byte-identical to one the memo has read is not unpickled again.
std::vector<PickleHazard> pickle_hazards_of_file(const std::string& path, const std::string& display,
                                                 PickleUseMemo* memo = nullptr);

// What to tell a user about a hazard of this severity (the sentence after PickleHazard::message()).
std::string pickle_advice(const std::string& severity);

// Highest severity among hazards: "error", "warning", "info", or "" when there are none.
std::string worst_severity(const std::vector<PickleHazard>& hazards);

}  // namespace ckptdoc
