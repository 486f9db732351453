#include "tensor/check.h"

namespace tg::detail {

void throw_error(const std::string& msg) { throw Error(msg); }

}  // namespace tg::detail
