#include "sources/accelerate/drop_refusal.h"

namespace ckptdoc::accelerate {

std::string drop_refusal(const std::string& optimizer_part, const std::string& loader) {
  return "an Accelerate save_state folder keeps its optimizer in " + optimizer_part +
         ", which Accelerator.load_state loads for every prepared optimizer (accelerate " + loader +
         "): without it load_state fails. {reset_optimizer} writes it with a fresh optimizer's state (zero "
         "moments, step 0) instead";
}

}  // namespace ckptdoc::accelerate
