// libFuzzer harness: the unpickler with a storage-making persistent_load, as the torch reader uses it.
#include <cstdint>
#include <vector>

#include "ckptdoc/error.h"
#include "ckptdoc/format/pickle_safety.h"
#include "ckptdoc/format/unpickler.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ckptdoc::UnpickleOptions o;
  o.limits.max_alloc_bytes = 1 << 24;
  o.limits.max_container_items = 1 << 20;
  o.persistent_load = [](const ckptdoc::Value& pid) {
    auto s = std::make_shared<ckptdoc::Storage>();
    s->dtype = ckptdoc::DType::F32;
    s->numel = pid.is(ckptdoc::Value::Kind::Tuple) ? pid.items().size() * 4 : 1;
    s->owned = std::make_shared<const std::vector<uint8_t>>(s->numel * 4, 0);
    return ckptdoc::Value::storage(s);
  };
  ckptdoc::PickleUseLog
      uses;  // what the stream reaches, judged as for unsafe-pickle, also when it is refused
  o.uses = &uses;
  try {
    auto r = ckptdoc::unpickle({data, size}, o);
    (void)r.value.repr(1000);
    r.value.dismantle();
  } catch (const ckptdoc::Error&) {
  }
  for (const auto& h : ckptdoc::assess_pickle_uses(uses.uses(), "fuzz")) (void)h.message();
  return 0;
}
