// How a compiled call's arguments become graph inputs and guarded host values, and what the traced
// function receives for each: the flattening Compiled<F> applies to every call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

#include "graphs/calls/dynamic_scalar.h"
#include "graphs/compile_options.h"

namespace tg::graphs::detail {

// True for std::vector, whose elements a call flattens one by one.
template <typename T>
struct is_vector : std::false_type {};
template <typename T>
struct is_vector<std::vector<T>> : std::true_type {};

// How one argument of a compiled call is treated: a tensor or a dynamic scalar (a graph input), a
// list of tensors (flattened into graph inputs), a host value guarded by value, or an object passed
// by reference (guarded by identity).
template <typename A>
struct ArgTraits {
  using D = std::decay_t<A>;
  static constexpr bool dynamic = std::is_same_v<D, DynamicScalar>;
  static constexpr bool tensor = std::is_same_v<D, Tensor> || std::is_base_of_v<Tensor, D> || dynamic;
  static constexpr bool tensor_list = std::is_same_v<D, std::vector<Tensor>> || std::is_same_v<D, TensorList>;
  static constexpr bool scalar = std::is_arithmetic_v<D> || std::is_same_v<D, std::string> ||
                                 std::is_same_v<D, const char*> || std::is_same_v<D, char*>;
  static constexpr bool int_list = is_vector<D>::value && !tensor_list;
};

// A scalar argument as the guards compare it (integers as int64_t, floating point as double).
template <typename D>
HostValue to_host_value(const D& v) {
  if constexpr (std::is_same_v<D, bool>) return HostValue(v);
  else if constexpr (std::is_integral_v<D>) return HostValue(static_cast<int64_t>(v));
  else if constexpr (std::is_floating_point_v<D>) return HostValue(static_cast<double>(v));
  else return HostValue(std::string(v));
}

// Appends argument `a` (named `who`) to the flattened call.
template <typename A>
void flatten_arg(const A& a, const std::string& who, CallArgs& out) {
  using T = ArgTraits<A>;
  if constexpr (T::dynamic) {
    // A graph input like a tensor: guarded on dtype and shape, its value read when the graph runs.
    out.tensors.push_back(a.tensor());
    out.names.push_back(who + " (dynamic scalar)");
  } else if constexpr (T::tensor) {
    out.tensors.push_back(a);
    out.names.push_back(who);
  } else if constexpr (T::tensor_list) {
    out.host.push_back({"len(" + who + ")", HostValue(static_cast<int64_t>(a.size()))});
    for (size_t k = 0; k < a.size(); ++k) {
      out.tensors.push_back(a[k]);
      out.names.push_back(who + "[" + std::to_string(k) + "]");
    }
  } else if constexpr (T::scalar) {
    out.host.push_back({who, to_host_value(a)});
  } else if constexpr (T::int_list) {
    static_assert(std::is_arithmetic_v<typename std::decay_t<A>::value_type>,
                  "compiled functions take Tensors, std::vector<Tensor>, scalars, strings, vectors of numbers "
                  "and objects by reference");
    out.host.push_back({"len(" + who + ")", HostValue(static_cast<int64_t>(a.size()))});
    for (size_t k = 0; k < a.size(); ++k)
      out.host.push_back({who + "[" + std::to_string(k) + "]", to_host_value(a[k])});
  } else {
    // An object by reference (a module): the graph is specialized on which object it is.
    char buf[32];
    std::snprintf(buf, sizeof buf, "%p", static_cast<const void*>(&a));
    out.host.push_back({who + " (by reference)", HostValue(std::string("object at ") + buf)});
  }
}

// What the traced function receives for argument `a`: graph inputs for tensors, the call's own
// value otherwise. `pos` walks the flattened tensors.
template <typename A>
decltype(auto) unflatten_arg(std::decay_t<A>& a, const TensorList& xs, size_t& pos) {
  using T = ArgTraits<A>;
  if constexpr (T::tensor) {
    return Tensor(xs.at(pos++));
  } else if constexpr (T::tensor_list) {
    std::vector<Tensor> out(xs.begin() + static_cast<ptrdiff_t>(pos),
                            xs.begin() + static_cast<ptrdiff_t>(pos + a.size()));
    pos += a.size();
    return out;
  } else {
    return (a);
  }
}

// The type the traced function receives for an argument of type A.
template <typename A>
using UnflatType =
    std::conditional_t<ArgTraits<A>::tensor, Tensor,
                       std::conditional_t<ArgTraits<A>::tensor_list, std::vector<Tensor>, std::decay_t<A>&>>;

}  // namespace tg::graphs::detail
