#include "ops/guard_value.h"

#include <sstream>

namespace tg {
namespace {

thread_local HostGuardSink* current_sink = nullptr;

}  // namespace

std::string host_value_str(const HostValue& v) {
  if (const bool* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (const int64_t* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const double* d = std::get_if<double>(&v)) {
    std::ostringstream os;
    os.precision(17);
    os << *d;
    return os.str();
  }
  return "'" + std::get<std::string>(v) + "'";
}

bool host_guards_active() { return current_sink != nullptr; }

void guard_value(const std::string& name, const HostValue& current, HostValueReader reader, const void* owner) {
  if (current_sink) current_sink->declare(name, current, std::move(reader), owner);
}

ScopedHostGuardSink::ScopedHostGuardSink(HostGuardSink* sink) : previous_(current_sink) { current_sink = sink; }

ScopedHostGuardSink::~ScopedHostGuardSink() { current_sink = previous_; }

}  // namespace tg
