// The pickle safety rule (pickle_safety.h): which recorded imports and calls of a pickle stream would run
// code, or construct something ckptdoc does not know, under a plain torch.load(weights_only=False).
#include "ckptdoc/format/pickle_safety.h"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>

#include "ckptdoc/format/pickle_use_memo.h"
#include "ckptdoc/format/torch_file.h"
#include "ckptdoc/io/mapped_file.h"
#include "io/no_read_around.h"

namespace ckptdoc {
namespace {

std::string py3(std::string q) {
  if (q.rfind("__builtin__.", 0) == 0) return "builtins." + q.substr(12);
  if (q.rfind("copy_reg.", 0) == 0) return "copyreg." + q.substr(9);
  return q;
}

std::string module_of(const std::string& q) {
  const auto dot = q.rfind('.');
  return dot == std::string::npos ? std::string() : q.substr(0, dot);
}

bool starts_with_module(const std::string& q, std::string_view module) {
  return q.size() > module.size() && q.compare(0, module.size(), module) == 0 && q[module.size()] == '.';
}

// Callables that run code, read or write files, spawn processes, import modules or unpickle more data: an
// error wherever they appear.
bool runs_code(const std::string& q, std::string* why) {
  static const std::set<std::string_view> modules{"os",
                                                  "posix",
                                                  "nt",
                                                  "subprocess",
                                                  "sys",
                                                  "shutil",
                                                  "socket",
                                                  "importlib",
                                                  "runpy",
                                                  "pty",
                                                  "webbrowser",
                                                  "ctypes",
                                                  "pickle",
                                                  "_pickle",
                                                  "cPickle",
                                                  "dill",
                                                  "marshal",
                                                  "code",
                                                  "codeop",
                                                  "multiprocessing",
                                                  "signal",
                                                  "platform",
                                                  "commands",
                                                  "popen2",
                                                  "asyncio",
                                                  "http",
                                                  "urllib",
                                                  "urllib2",
                                                  "requests",
                                                  "ftplib",
                                                  "smtplib",
                                                  "telnetlib",
                                                  "tempfile",
                                                  "pathlib",
                                                  "io",
                                                  "_io",
                                                  "fileinput",
                                                  "zipimport",
                                                  "pdb",
                                                  "bdb",
                                                  "timeit",
                                                  "cProfile",
                                                  "profile",
                                                  "trace",
                                                  "threading",
                                                  "_thread",
                                                  "joblib",
                                                  "numpy.testing",
                                                  "torch.hub",
                                                  "torch.package",
                                                  "torch.utils.cpp_extension",
                                                  "torch.jit",
                                                  "torch._dynamo",
                                                  "torch.ops",
                                                  "torch._ops"};
  // Parts of allow-listed packages with exec, eval, import, process or file paths (an allow-listed package is
  // not an allow-listed function): torch.fx.graph_module._exec_with_source and reduce_graph_module exec
  // source text, torch.serialization loads more pickles and imports dotted names, numpy's ctypeslib loads
  // libraries and its _datasource binds builtins.open as _open.
  static const std::set<std::string_view> package_modules{"torch.fx",
                                                          "torch.serialization",
                                                          "torch._inductor",
                                                          "torch.export",
                                                          "torch._export",
                                                          "torch.compiler",
                                                          "torch.utils.benchmark",
                                                          "torch.testing",
                                                          "torch.library",
                                                          "torch._library",
                                                          "torch.utils._config_module",
                                                          "torch.utils.collect_env",
                                                          "torch.utils.hipify",
                                                          "torch.utils.model_dump",
                                                          "torch.utils.tensorboard",
                                                          "torch.multiprocessing",
                                                          "torch.distributed.rpc",
                                                          "torch.distributed.elastic",
                                                          "torch.distributed.run",
                                                          "torch.distributed.launch",
                                                          "torch.classes",
                                                          "torch._classes",
                                                          "torch.onnx",
                                                          "numpy.f2py",
                                                          "numpy.distutils",
                                                          "numpy.ctypeslib",
                                                          "numpy.lib.npyio",
                                                          "numpy.lib.format",
                                                          "numpy.lib._datasource",
                                                          "numpy.lib.utils",
                                                          "numpy.core._internal",
                                                          "numpy._core._internal",
                                                          "deepspeed.launcher",
                                                          "deepspeed.ops.op_builder",
                                                          "deepspeed.autotuning",
                                                          "deepspeed.env_report",
                                                          "transformers.dynamic_module_utils"};
  static const std::set<std::string_view> builtins{"eval",    "exec",    "compile",    "open",    "getattr",
                                                   "setattr", "delattr", "__import__", "globals", "locals",
                                                   "vars",    "input",   "breakpoint", "apply",   "execfile",
                                                   "file",    "reload",  "help",       "exit",    "quit"};
  static const std::set<std::string_view> names{"operator.attrgetter",
                                                "operator.methodcaller",
                                                "operator.itemgetter",
                                                "functools.partial",
                                                "functools.reduce",
                                                "types.FunctionType",
                                                "types.CodeType",
                                                "types.LambdaType",
                                                "types.MethodType",
                                                "types.ModuleType",
                                                "torch.load",
                                                "torch.serialization.load",
                                                "torch.serialization._load",
                                                "numpy.load",
                                                "numpy.lib.npyio.load",
                                                "numpy.fromfile",
                                                "torch.storage._load_from_bytes",
                                                "torch._weights_only_unpickler._Unpickler",
                                                "copyreg._reconstructor_unsafe",
                                                "torch._C._import_ir_module",
                                                "torch.Tensor._make_subclass"};
  static const std::set<std::string_view> package_names{
      "torch.compile", "numpy.save",        "numpy.savez",        "numpy.savez_compressed",
      "numpy.savetxt", "numpy.loadtxt",     "numpy.genfromtxt",   "numpy.fromregex",
      "numpy.memmap",  "numpy.core.memmap", "numpy._core.memmap", "numpy.DataSource",
      "numpy.lookfor", "numpy.source",      "numpy.info"};
  const std::string m = module_of(q);
  if (m == "builtins") {
    const std::string n = q.substr(m.size() + 1);
    if (builtins.count(n)) {
      *why = "builtins." + n + " runs code, touches files or reaches any attribute";
      return true;
    }
    return false;
  }
  for (const auto* list : {&modules, &package_modules})
    for (const auto& mod : *list)
      if (q == mod) {  // the module object itself (an attribute walk can reach one)
        *why = "module " + q + " runs commands, code or I/O";
        return true;
      } else if (m == mod || starts_with_module(m + ".", mod)) {
        *why = "module " + m + " runs commands, code or I/O";
        return true;
      }
  if (names.count(q) || package_names.count(q)) {
    *why = q + " calls other code or loads more data";
    return true;
  }
  return false;
}

// Reconstructors torch checkpoints use, by exact name: nothing to report.
bool known(const std::string& q) {
  static const std::set<std::string_view> exact{
      // torch
      "torch._utils._rebuild_tensor", "torch._utils._rebuild_tensor_v2", "torch._utils._rebuild_tensor_v3",
      "torch._utils._rebuild_parameter", "torch._utils._rebuild_parameter_with_state",
      "torch._utils._rebuild_meta_tensor_no_storage", "torch._utils._rebuild_sparse_tensor",
      "torch._utils._rebuild_qtensor", "torch._utils._rebuild_device_tensor_from_numpy",
      "torch._tensor._rebuild_from_type_v2", "torch._utils._rebuild_wrapper_subclass", "torch.Size",
      "torch.device", "torch.Tensor", "torch._tensor.Tensor", "torch.nn.parameter.Parameter", "torch.strided",
      "torch.sparse_coo", "torch.per_tensor_affine", "torch.storage.TypedStorage",
      "torch.storage.UntypedStorage", "torch.UntypedStorage", "torch.TypedStorage",
      "torch.serialization._get_layout", "torch.nn.modules.container.ParameterDict",
      // collections, builtins, copyreg, codecs
      "collections.OrderedDict", "builtins.set", "builtins.frozenset", "builtins.bytes", "builtins.bytearray",
      "builtins.complex", "builtins.slice", "builtins.range", "builtins.list", "builtins.dict",
      "builtins.tuple", "builtins.int", "builtins.float", "builtins.str", "builtins.bool", "_codecs.encode",
      "copyreg._reconstructor", "copyreg.__newobj__", "copyreg.__newobj_ex__",
      // numpy
      "numpy.core.multiarray._reconstruct", "numpy._core.multiarray._reconstruct", "numpy.ndarray",
      "numpy.dtype", "numpy.core.multiarray.scalar", "numpy._core.multiarray.scalar",
      "numpy.core.numeric._frombuffer", "numpy._core.numeric._frombuffer",
      // Megatron's args and DeepSpeed's checkpoint objects
      "argparse.Namespace", "deepspeed.runtime.zero.config.ZeroStageEnum",
      "deepspeed.utils.tensor_fragment.fragment_address", "deepspeed.runtime.bf16_optimizer.fragment_address",
      "deepspeed.runtime.fp16.loss_scaler.LossScaler", "deepspeed.runtime.fp16.loss_scaler.DynamicLossScaler",
      "deepspeed.runtime.fp16.loss_scaler.LossScalerBase", "deepspeed.checkpoint.constants",
      // Megatron-LM's saved args (megatron.training 0.18.0 arguments.py): its enums, looked up with getattr
      // (AttnBackend.auto), and args.exit_signal, the constant signal.SIGTERM named (not called) by a GLOBAL
      "megatron.core.transformer.enums.AttnBackend", "megatron.core.transformer.enums.CudaGraphModule",
      "megatron.core.transformer.enums.InferenceCudaGraphScope", "signal.SIGTERM", "signal.SIGINT",
      // PyTorch Distributed Checkpoint .metadata (torch 2.x): its dataclasses, the memory-format enum looked
      // up
      // with getattr, and StorageMeta.checkpoint_id, a pathlib path (built from its parts, no I/O)
      "torch.distributed.checkpoint.metadata.Metadata",
      "torch.distributed.checkpoint.metadata.TensorStorageMetadata",
      "torch.distributed.checkpoint.metadata.BytesStorageMetadata",
      "torch.distributed.checkpoint.metadata.ChunkStorageMetadata",
      "torch.distributed.checkpoint.metadata.TensorProperties",
      "torch.distributed.checkpoint.metadata.MetadataIndex",
      "torch.distributed.checkpoint.metadata.StorageMeta",
      "torch.distributed.checkpoint.metadata._MEM_FORMAT_ENCODING",
      "torch.distributed.checkpoint.filesystem._StorageInfo", "pathlib.PosixPath",
      // megatron-core <= 0.15's subclass of that Metadata (a dataclass with one more field, mcore_data)
      "megatron.core.dist_checkpointing.strategies.torch.MCoreMetadata"};
  if (exact.count(q)) return true;
  // Storage classes (torch.FloatStorage, torch.cuda.HalfStorage, ...) and dtypes named as GLOBALs.
  const std::string m = module_of(q);
  const std::string n = q.substr(m.empty() ? 0 : m.size() + 1);
  if ((m == "torch" || m == "torch.cuda") && n.size() > 7 && n.compare(n.size() - 7, 7, "Storage") == 0)
    return true;
  return false;
}

// Packages whose classes are allowed but that ckptdoc does not know one by one: info.
bool allowed_package(const std::string& q, std::string* package) {
  for (const char* p : {"deepspeed", "torch", "numpy", "collections", "megatron", "transformers", "apex"})
    if (starts_with_module(q, p)) {
      *package = p;
      return true;
    }
  return false;
}

// Modules that packages bind under these attribute names (`import os`, `import builtins as _builtins`,
// torch's `from os import path as _osp`): an attribute walk through one continues in that module. Only names
// of modules that run code, touch files or reach other code are listed (the rest stay inside the package they
// are read from, which is judged no less strictly); names that are also real submodules of an allow-listed
// package (torch.types, torch.signal, deepspeed.io) are left out, but for torch.multiprocessing, an error
// either way.
const char* module_bound_as(std::string_view attribute) {
  static const std::set<std::string_view> same{"os",
                                               "posix",
                                               "nt",
                                               "posixpath",
                                               "ntpath",
                                               "sys",
                                               "subprocess",
                                               "builtins",
                                               "importlib",
                                               "runpy",
                                               "pty",
                                               "ctypes",
                                               "pickle",
                                               "_pickle",
                                               "cPickle",
                                               "dill",
                                               "marshal",
                                               "shutil",
                                               "socket",
                                               "tempfile",
                                               "pathlib",
                                               "_io",
                                               "multiprocessing",
                                               "threading",
                                               "_thread",
                                               "webbrowser",
                                               "platform",
                                               "asyncio",
                                               "urllib",
                                               "http",
                                               "requests",
                                               "codeop",
                                               "timeit",
                                               "pdb",
                                               "fileinput",
                                               "zipimport",
                                               "joblib",
                                               "inspect",
                                               "operator",
                                               "functools",
                                               "copyreg"};
  static const std::map<std::string_view, const char*> renamed{{"_osp", "posixpath"},
                                                               {"__builtins__", "builtins"},
                                                               {"_builtins", "builtins"},
                                                               {"__builtin__", "builtins"},
                                                               {"python_multiprocessing", "multiprocessing"},
                                                               {"reducer", "multiprocessing.reduction"},
                                                               {"_functools", "functools"},
                                                               {"copy_reg", "copyreg"}};
  if (const auto it = same.find(attribute); it != same.end()) return it->data();
  const auto it = renamed.find(attribute);
  return it == renamed.end() ? nullptr : it->second;
}

bool is_dunder(std::string_view s) {
  return s.size() > 4 && s.substr(0, 2) == "__" && s.substr(s.size() - 2) == "__";
}

// What a GLOBAL reaches, as Python's find_class would: it imports `module`, then looks `name` up on it, a
// dotted name part by part (protocol 4 and later; ckptdoc judges every protocol alike). Each part is an
// attribute of what the previous one reached: a module a package imports (torch's `os`) continues the walk
// there, so torch / os.system is the os module's system; and a walk through a dunder (__globals__,
// __builtins__, __class__, __subclasses__) can reach anything.
struct Reached {
  std::string name;     // the dotted path judged, Python 3 spelling: "os.system", "torch.fx.graph_module.x"
  bool walked = false;  // the name had dots
  std::string dunder;   // the dunder the walk passed through or ended on
  std::string bound_as, bound_module;  // the first part that is an imported module ("os"), and that module
};

Reached resolve(const PickleUse& u) {
  Reached r;
  if (u.computed || u.module.empty() || u.name.empty()) {
    r.name = py3(u.callable);
    return r;
  }
  std::string path = u.module == "__builtin__" ? "builtins" : u.module == "copy_reg" ? "copyreg" : u.module;
  r.walked = u.name.find('.') != std::string::npos;
  size_t at = 0;
  while (true) {
    const size_t dot = u.name.find('.', at);
    const std::string_view part =
        std::string_view(u.name).substr(at, dot == std::string::npos ? dot : dot - at);
    if (r.walked && is_dunder(part) && r.dunder.empty()) r.dunder = std::string(part);
    if (const char* m = module_bound_as(part)) {
      if (r.bound_as.empty()) {
        r.bound_as = std::string(part);
        r.bound_module = m;
      }
      path = m;
    } else {
      path += "." + std::string(part);
    }
    if (dot == std::string::npos) break;
    at = dot + 1;
  }
  r.name = path;
  return r;
}

std::string how_text(const PickleUse& u) {
  std::string s;
  switch (u.how) {
    case PickleUseKind::Global:
      s = "GLOBAL (named, not called)";
      break;
    case PickleUseKind::Reduce:
      s = "REDUCE";
      break;
    case PickleUseKind::NewObj:
      s = "NEWOBJ";
      break;
    case PickleUseKind::NewObjEx:
      s = "NEWOBJ_EX";
      break;
    case PickleUseKind::Inst:
      s = "INST";
      break;
    case PickleUseKind::Obj:
      s = "OBJ";
      break;
    case PickleUseKind::Build:
      s = "BUILD";
      break;
    case PickleUseKind::PersistentId:
      s = "persistent id";
      break;
  }
  if (!u.via.empty()) s += " via " + u.via;
  if (!u.nested_in.empty()) s += " in a nested pickle (via " + u.nested_in + ")";
  return s;
}

bool invokes(PickleUseKind k) {
  return k != PickleUseKind::Global && k != PickleUseKind::PersistentId;
}

int rank_of(const std::string& severity) {
  return severity == "error" ? 2 : severity == "warning" ? 1 : 0;
}

}  // namespace

std::string PickleHazard::message() const {
  std::string m = file + ": record '" + record + "': " + callable +
                  (reaches.empty() ? "" : " (reaches " + reaches + ")") + " reached by " + how + " (offset " +
                  std::to_string(offset) + (count > 1 ? ", " + std::to_string(count) + " times" : "") +
                  "): " + why;
  return m;
}

std::vector<PickleHazard> assess_pickle_uses(const std::vector<PickleUse>& uses, const std::string& file) {
  // Names that some use invokes: their bare GLOBAL uses say nothing more.
  std::set<std::pair<std::string, std::string>> invoked;
  for (const auto& u : uses)
    if (invokes(u.how)) invoked.insert({u.record + "\n" + u.nested_in, u.module + "\n" + py3(u.callable)});
  std::vector<PickleHazard> out;
  for (const auto& u : uses) {
    if (u.how == PickleUseKind::Global &&
        invoked.count({u.record + "\n" + u.nested_in, u.module + "\n" + py3(u.callable)}))
      continue;
    const Reached r = resolve(u);
    const std::string& q = r.name;  // what find_class returns, not how the stream spells it
    PickleHazard h;
    h.file = file;
    h.record = u.record;
    h.callable = u.callable;
    if (q != py3(u.callable)) h.reaches = q;
    h.how = how_text(u);
    h.offset = u.offset;
    h.count = u.count;
    // How the name gets there, when it is not what it reads as.
    std::string walk;
    if (r.walked || !r.bound_as.empty()) {
      walk = "GLOBAL " + u.module + " / " + u.name + ": ";
      if (r.walked) walk += "find_class looks a dotted name up attribute by attribute (protocol 4 and later)";
      if (!r.bound_as.empty())
        walk += std::string(r.walked ? ", and " : "") + "attribute " + r.bound_as + " is the module " +
                r.bound_module + " that " + u.module + " imports";
      walk += ", so it reaches " + q + "; ";
    }
    std::string why, package;
    // An enum member looked up on a known class (Python 3.11+ pickles enums this way).
    const bool enum_lookup = !u.computed && q == "builtins.getattr" && !u.attribute_of.empty() &&
                             !u.attribute.empty() && u.attribute.front() != '_' && known(py3(u.attribute_of));
    if (u.computed && q.rfind("<more than", 0) == 0) {
      h.severity = "error";
      h.why = "too many distinct imports and calls to judge them all; treat the file as unsafe";
    } else if (u.computed) {
      h.severity = "error";
      h.why =
          "a computed value (" + u.callable + ") is called: torch.load would run whatever it evaluates to";
    } else if (!enum_lookup && !r.dunder.empty()) {
      h.severity = "error";
      h.why = walk + "a walk through " + r.dunder +
              " reaches Python's internals (any module, function or builtin); a plain "
              "torch.load(weights_only=False) would use it";
    } else if (enum_lookup || known(q)) {
      continue;  // by exact name, even in a module that is otherwise an error (torch.serialization)
    } else if (runs_code(q, &why)) {
      h.severity = "error";
      h.why = walk + why + "; a plain torch.load(weights_only=False) would run it";
    } else if (allowed_package(q, &package)) {
      if (!invokes(u.how)) continue;  // a reference into an allowed package: imported, nothing called
      // Not harmless by package: only the reconstructors checkpoints really use are known to be.
      h.severity = "warning";
      h.why = walk;
      h.why += "a ";
      h.why += package;
      h.why +=
          " callable ckptdoc does not know by name (not one of the reconstructors torch and DeepSpeed "
          "checkpoints use); a plain torch.load(weights_only=False) would call it";
    } else if (invokes(u.how)) {
      h.severity = "error";
      h.why = walk + "not on the allow list of known reconstructors; a plain " +
              "torch.load(weights_only=False) would call it";
    } else {
      h.severity = "warning";
      h.why = walk + "not on the allow list; torch.load would import module " +
              (u.module.empty() ? module_of(q) : u.module) +
              " (running its top-level code) although nothing calls it";
    }
    out.push_back(std::move(h));
  }
  std::stable_sort(out.begin(), out.end(), [](const PickleHazard& a, const PickleHazard& b) {
    return rank_of(a.severity) > rank_of(b.severity);
  });
  return out;
}

std::vector<PickleHazard> pickle_hazards_of_file(const std::string& path, const std::string& display,
                                                 PickleUseMemo* memo) {
  try {
    const auto f = MappedFile::open(path);
    const NoReadAround no_read_around(*f);  // a cold head check would read 8 MB of a big file
    if (!TorchFile::is_torch_file(f->bytes().first(std::min<size_t>(f->size(), 16)))) return {};
  } catch (const std::exception&) {
    return {};  // unreadable: the caller reports that on its own
  }
  return assess_pickle_uses(memo ? memo->uses_of(path) : TorchFile::pickle_uses_of(path), display);
}

std::string pickle_advice(const std::string& severity) {
  if (severity == "error")
    return "ckptdoc never runs it, but do not torch.load this file without weights_only=True unless you "
           "trust where "
           "it came from.";
  if (severity == "warning") return "Check where the file came from before loading it with torch.load.";
  return "Usually harmless.";
}

std::string worst_severity(const std::vector<PickleHazard>& hazards) {
  std::string w;
  for (const auto& h : hazards)
    if (w.empty() || rank_of(h.severity) > rank_of(w)) w = h.severity;
  return w;
}

}  // namespace ckptdoc
